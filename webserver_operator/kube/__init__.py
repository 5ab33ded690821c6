"""The only layer that talks HTTP to the Kubernetes API server; everything above it sees plain JSON dicts.

Modules, one concern each: ``resources`` (paths), ``errors`` (our exception types, parsed from ``metav1.Status``),
``config`` (kubeconfig / in-cluster with token refresh), ``retry`` (pure retry policy), ``ratelimit`` (token
bucket), ``stream`` (watch body decoding) and ``client`` (``KubeClient``). Callers import from the module that
declares a name; this package re-exports nothing, so every name has one import path.

Imported by ``runtime``, ``reconcile`` and ``manager``, one module at a time.
"""
