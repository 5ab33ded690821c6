"""Helpers shared by the integration and e2e suites: cluster backends, kubectl, waiting."""
