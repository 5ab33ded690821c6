"""The only layer that talks HTTP to the Kubernetes API server; everything above it sees plain JSON dicts.

Modules, one concern each: ``library`` (the parts of kubernetes_asyncio we use, without its generated client),
``config`` (kubeconfig / in-cluster with token refresh), ``paths`` (REST paths read back: resource, object, RBAC
verb), ``errors`` (our exception types, parsed from ``metav1.Status``), ``retry`` (pure retry policy), ``ratelimit``
(token bucket), ``fence`` (a Lease's write deadline) and ``gate`` (checking it as a write goes on the wire),
``stream`` (watch body decoding), ``skim`` (tenant-written objects decoded without what no reader reads) and
``client`` (``KubeClient``). Resource paths are ``core.resources``. Callers import from the module that declares a
name; this package re-exports nothing, so every name has one import path.

Imported by ``runtime``, ``reconcile`` and ``manager``, one module at a time.
"""

__all__: list[str] = []
