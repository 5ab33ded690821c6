"""The settings tree: one pydantic section per part of the operator, each read by the layer it configures.

Why sections (as kopf's ``OperatorSettings``): the API client takes ``settings.client``, the controller runtime
``settings.controller`` and ``settings.watch``, the leader elector ``settings.leader_election``, the probe server
``settings.server``; each validates its own values once, here, and nothing maps one settings object into another by
hand. The sections live in the bottom layer so every layer can name the one it reads; ``manager.settings`` composes
them into the root object that is read from ``WEBSERVER_OPERATOR_*`` variables and ``run`` flags.

Field names are unique across sections and are the user-facing names: ``workers`` is the flag ``--workers`` and the
variable ``WEBSERVER_OPERATOR_WORKERS`` whichever section holds it. Field descriptions become the flags' help text.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import NoDecode

_BIND_RE = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(?P<port>\d{1,5})$")
_NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

#: Seconds a watch's socket may stay silent beyond the server-side ``timeoutSeconds`` before it counts as dead.
_WATCH_READ_GRACE_SECONDS = 30.0
#: An informer restarts a watch that delivered nothing (bookmarks included) for the watch timeout plus this.
STALL_GRACE_SECONDS = 60.0


def parse_bind_address(value: str) -> tuple[str, int]:
    """Split ``host:port`` (``:8080`` = all interfaces, ``0`` = disabled); raise ValueError with the expected form."""
    match = _BIND_RE.match(value)
    if not match or int(match["port"]) > 65535:
        raise ValueError(f"{value!r} is not a bind address: use HOST:PORT or :PORT (e.g. :8080, 127.0.0.1:0)")
    host = match["host"].strip("[]") or "0.0.0.0"  # noqa: S104 - binding all interfaces is the documented default
    return host, int(match["port"])


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientSettings(_Section):
    """How the one shared API client connects (``kube.client.KubeClient``)."""

    kubeconfig: str | None = Field(
        default=None, description="Path to a kubeconfig; default: in-cluster config, else $KUBECONFIG/~/.kube/config."
    )
    context: str | None = Field(default=None, description="kubeconfig context to use (default: current context).")
    connect_timeout: float = Field(default=10.0, gt=0, description="Seconds to connect to the API server.")
    read_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for an API response.")
    qps: float | None = Field(default=None, gt=0, description="Client-side request rate limit (default: off).")
    burst: int = Field(default=10, ge=1, description="Requests allowed at once above --qps.")

    @field_validator("connect_timeout", "read_timeout", "qps")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class WatchSettings(_Section):
    """What the informers watch and when they give up on a silent watch (``runtime.informer``)."""

    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Namespaces to watch, comma-separated; empty = all namespaces.",
    )
    watch_timeout: int = Field(
        default=300, ge=10, le=1800, description="Server-side timeout of each watch request (seconds)."
    )
    watch_stall_timeout: float | None = Field(
        default=None,
        gt=0,
        description="Seconds without any watch event (bookmarks included) before a watch is restarted "
        "(default: watch timeout + 60).",
    )

    @field_validator("namespaces", mode="before")
    @classmethod
    def _split_namespaces(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("namespaces")
    @classmethod
    def _valid_namespaces(cls, value: list[str]) -> list[str]:
        value = [ns for ns in value if ns]
        for ns in value:
            if not _NAMESPACE_RE.fullmatch(ns) or len(ns) > 63:
                raise ValueError(f"{ns!r} is not a namespace name (lowercase letters, digits, '-')")
        return sorted(set(value))

    @property
    def stall_timeout(self) -> float:
        """Seconds of silence after which an informer restarts its watch."""
        if self.watch_stall_timeout is not None:
            return self.watch_stall_timeout
        return self.watch_timeout + STALL_GRACE_SECONDS

    @property
    def read_timeout(self) -> float:
        """Client socket read timeout of a watch: longer than ``timeoutSeconds``, so the server ends healthy ones."""
        return self.watch_timeout + _WATCH_READ_GRACE_SECONDS


class ControllerSettings(_Section):
    """How many reconciles run at once, how often everything is looked at again, how long a drain may take."""

    workers: int = Field(default=4, ge=1, le=64, description="WebServers reconciled concurrently.")
    resync_period: float = Field(
        default=36000.0, ge=60, description="Seconds between full resyncs (a safety net; changes are event-driven)."
    )
    drain_timeout: float = Field(
        default=20.0,
        ge=0,
        description="Seconds in-flight reconciles may take to finish on shutdown (keep it below the pod's "
        "terminationGracePeriodSeconds minus 10: the Lease release comes after it).",
    )


class LeaderElectionSettings(_Section):
    """The Lease that lets one replica act while the others stand by (``manager.leader``)."""

    leader_elect: bool = Field(default=False, description="Elect a leader with a Lease so only one replica acts.")
    leader_election_id: str = Field(default="webserver-operator-leader", description="Name of the Lease.")
    leader_election_namespace: str | None = Field(
        default=None, description="Namespace of the Lease (default: the pod's namespace, else 'default')."
    )
    lease_duration: float = Field(default=15.0, gt=0, description="Seconds a standby waits before taking over.")
    renew_deadline: float = Field(
        default=10.0, gt=0, description="Seconds the leader retries renewing before it quits."
    )
    retry_period: float = Field(default=2.0, gt=0, description="Seconds between leader election attempts.")

    @model_validator(mode="after")
    def _election_timings(self) -> LeaderElectionSettings:
        if not self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}s) must be shorter than lease_duration ({self.lease_duration}s)"
            )
        if not self.retry_period * 1.2 < self.renew_deadline:
            raise ValueError(
                f"retry_period ({self.retry_period}s) must be shorter than renew_deadline ({self.renew_deadline}s) "
                "by more than its 20% jitter, or a single slow renewal would cost the lease"
            )
        return self


class ServerSettings(_Section):
    """The HTTP endpoints: kubelet probes (``manager.endpoints``) and Prometheus metrics (``manager.metrics_server``).

    /metrics is HTTPS behind the API server's TokenReview and SubjectAccessReview by default, as kubebuilder v4
    scaffolds it: the per-WebServer series name every tenant's WebServers. Plain HTTP is an explicit choice.
    """

    metrics_bind_address: str = Field(
        default=":8443",
        description="Address of the Prometheus /metrics endpoint (HOST:PORT; port 0 picks a free port; '0' disables).",
    )
    metrics_secure: bool = Field(
        default=True,
        description="Serve /metrics over HTTPS, only to callers whose bearer token the API server authenticates "
        "(TokenReview) and allows to get the non-resource URL /metrics (SubjectAccessReview); --no-metrics-secure "
        "serves plain HTTP to anyone who can connect.",
    )
    metrics_cert_path: str | None = Field(
        default=None,
        description="Directory with tls.crt and tls.key (e.g. a mounted cert-manager Secret) for /metrics "
        "(default: a self-signed certificate made at start).",
    )
    health_probe_bind_address: str = Field(
        default=":8081", description="Address of /healthz and /readyz (HOST:PORT; port 0 picks a free port)."
    )
    max_loop_lag: float = Field(
        default=10.0, gt=0, description="Seconds the event loop may be blocked before /healthz fails."
    )

    @field_validator("metrics_bind_address", "health_probe_bind_address")
    @classmethod
    def _valid_bind(cls, value: str) -> str:
        if value == "0":
            return value
        parse_bind_address(value)
        return value

    @model_validator(mode="after")
    def _certificate_needs_https(self) -> ServerSettings:
        if self.metrics_cert_path is not None and not self.metrics_secure:
            raise ValueError(
                "metrics_cert_path is set but --no-metrics-secure serves /metrics over plain HTTP: drop one of them"
            )
        return self

    @property
    def metrics_enabled(self) -> bool:
        return self.metrics_bind_address != "0"


class LogSettings(_Section):
    """Log lines: how many and in which format (``manager.logs``)."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", description="Log level.")
    log_format: Literal["json", "text"] = Field(default="json", description="Log format: json or text.")
