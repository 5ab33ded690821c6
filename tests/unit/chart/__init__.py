"""The installation as users get it: the Helm chart, config/ (kustomize), their RBAC, dashboards and alerts."""
