"""The generic controller runtime: informers, their shared cache, the work queue, the reconcile loop and the builder.

Nothing here knows about WebServers: it is this project's controller-runtime. The reconcile layer above declares what
to watch and how to reconcile (``runtime.controller.builder``); the manager runs what it gets back.

Imported by ``reconcile`` (builder, result) and ``manager`` (cache, controller).
"""

__all__: list[str] = []
