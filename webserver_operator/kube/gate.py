"""The write gate: a check asked at the last moment before a write goes on the wire.

Why at the last moment: a gate checked when ``KubeClient.request`` starts is checked before the client-side rate
limiter and before the wait for a free pooled connection, and each of those can hold a request for seconds. A write
that passed the gate, then waited past the Lease's validity deadline, would still leave. So ``KubeClient._send``
asks the gate again once it holds a connection (``kube.transport.connection.ConnectionPool.acquire``) and the request's
bytes are ready: from that answer to ``transport.write`` nothing awaits, so nothing can wait any more. A refused write
raises ``WritesStopped``, nothing of it is sent, and the unused connection goes back to the pool.

Used by ``kube.client`` (``KubeClient.gated(check)``); the check is usually
``runtime.leases.fence.LeaseFence.why_not``, or,
with sharding, ``runtime.sharding.shardset``'s check of the shard that a path's namespace belongs to.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["WriteCheck"]

#: Given the path a write goes to, ``None`` while it may leave, else why not. The path lets one check cover writes
#: under different Leases: with sharding, the namespace in the path names the shard whose fence decides.
WriteCheck = Callable[[str], str | None]
