"""The settings tree: one pydantic section per part of the operator, each read by the layer it configures.

Why sections (as kopf's ``OperatorSettings``): the API client takes ``settings.client``, the controller runtime
``settings.controller`` and ``settings.watch``, every Lease ``settings.lease``, the manager ``settings.leader_election``
and the endpoints ``settings.server``; each validates its own values once, here, and nothing maps one settings object
into another by hand. The sections live in the bottom layer so every layer can name the one it reads;
``manager.configuration`` composes them into the root object that is read from ``WEBSERVER_OPERATOR_*`` variables and
``run`` flags.

Field names are unique across sections and are the user-facing names: ``workers`` is the flag ``--workers`` and the
variable ``WEBSERVER_OPERATOR_WORKERS`` whichever section holds it. Field descriptions become the flags' help text.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from webserver_operator.core.backoff import BackoffPolicy
from webserver_operator.core.podsecurity import PodSecurityLevel

__all__ = [
    "DEFAULT_STALL_TIMEOUT_RANGE",
    "MIN_MAX_LOOP_LAG",
    "ClientSettings",
    "ControllerSettings",
    "EventLoopChoice",
    "LeaderElectionSettings",
    "LeaseSettings",
    "LogSettings",
    "ServerSettings",
    "WatchSettings",
    "parse_bind_address",
]

_BIND_RE = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(?P<port>\d{1,5})$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")

#: Seconds a watch's socket may stay silent beyond the server-side ``timeoutSeconds`` before it counts as dead.
_WATCH_READ_GRACE_SECONDS = 30.0
#: Default stall timeout of a watch, drawn per watch from this range: the API server sends a bookmark about every
#: 60 s on a quiet watch, so a half-open connection is noticed after one or two missed bookmarks, and informers that
#: stalled together (one network fault) do not reconnect in lock step.
DEFAULT_STALL_TIMEOUT_RANGE = (90.0, 120.0)
#: Below this a stall timeout restarts watches in a loop (0.01 s opened about 100 watches a second per informer).
_MIN_STALL_TIMEOUT = 1.0
#: The smallest ``--max-loop-lag``: the loop heartbeat ticks every 0.5 s (``manager.probes.Heartbeat``), and a lag
#: limit close to that tick fails liveness on an ordinary busy moment; kubelet then restarts a healthy process.
MIN_MAX_LOOP_LAG = 2.0
#: A Lease candidate waits ``retry_period`` up to this fraction longer between attempts (client-go's JitterFactor).
_LEASE_RETRY_JITTER = 0.2
#: Each shard is a Lease renewed every retry period by its holder plus three informers on it: more than this many is
#: Lease traffic for nothing (a shard should carry at least a namespace or two).
_MAX_SHARDS = 256


def _check_namespace_name(value: str) -> str:
    """``value`` if it is a namespace name (a DNS-1123 label), else ValueError saying what one looks like."""
    if not _NAMESPACE_RE.fullmatch(value) or len(value) > 63:
        raise ValueError(
            f"{value!r} is not a namespace name: use a DNS-1123 label (lowercase letters, digits and '-', starting "
            "and ending with a letter or digit, at most 63 characters), e.g. team-a"
        )
    return value


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
    """What the informers watch and when they give up on a silent watch (``runtime.informers.informer``)."""

    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Namespaces to watch, comma-separated; empty = all namespaces.",
    )
    watch_timeout: int = Field(
        default=300, ge=10, le=1800, description="Server-side timeout of each watch request (seconds)."
    )
    watch_stall_timeout: float | None = Field(
        default=None,
        description="Seconds without any watch event (bookmarks included) before a watch is restarted "
        f"(default: {DEFAULT_STALL_TIMEOUT_RANGE[0]:g}-{DEFAULT_STALL_TIMEOUT_RANGE[1]:g}, drawn per watch; "
        "the API server sends a bookmark about every 60 s).",
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
        return sorted({_check_namespace_name(ns) for ns in value if ns})

    @field_validator("watch_stall_timeout")
    @classmethod
    def _stall_floor(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value >= _MIN_STALL_TIMEOUT):
            raise ValueError(
                f"must be a number of seconds of at least {_MIN_STALL_TIMEOUT:g}: a shorter stall timeout restarts "
                "watches in a loop. The API server sends a bookmark about every 60 s on a quiet watch, so leave it "
                f"unset (default {DEFAULT_STALL_TIMEOUT_RANGE[0]:g}-{DEFAULT_STALL_TIMEOUT_RANGE[1]:g} s) or keep "
                "it above 60"
            )
        return value

    @property
    def stall_timeout(self) -> float | None:
        """Seconds of silence after which an informer restarts its watch; ``None``: the default range, per watch."""
        return self.watch_stall_timeout

    @property
    def read_timeout(self) -> float:
        """Client socket read timeout of a watch: longer than ``timeoutSeconds``, so the server ends healthy ones."""
        return self.watch_timeout + _WATCH_READ_GRACE_SECONDS


EventLoopChoice = Literal["auto", "uvloop", "asyncio"]


class ControllerSettings(_Section):
    """How many reconciles run at once, on which event loop, how often everything is looked at again, and more.

    How long a drain may take, and how far pods may go. The event loop is chosen by ``manager.eventloop`` before
    anything runs.
    """

    workers: int = Field(default=4, ge=1, le=64, description="WebServers reconciled concurrently.")
    event_loop: EventLoopChoice = Field(
        default="asyncio",
        description="Event loop: asyncio (the standard library's; the default: uvloop measured no faster end to end, "
        "bench/README.md), uvloop (libuv), or auto: uvloop when the uvloop package is installed, else asyncio.",
    )
    resync_period: float = Field(
        default=36000.0, ge=60, description="Seconds between full resyncs (a safety net; changes are event-driven)."
    )
    drain_timeout: float = Field(
        default=20.0,
        ge=0,
        description="Seconds in-flight reconciles may take to finish on shutdown (keep it below the pod's "
        "terminationGracePeriodSeconds minus 10: the Lease release comes after it).",
    )
    pod_security_level: PodSecurityLevel = Field(
        default="baseline",
        description="How far a WebServer's pods may go: baseline (capabilities beyond the Pod Security baseline "
        "level's list, an Unconfined seccomp profile and anything else baseline forbids are refused) or privileged "
        "(accepted: a risk, every WebServer editor can then ask for privileged pods; see docs/security.md).",
    )
    template_upgrade_rate: float = Field(
        default=0.0,
        ge=0,
        le=1000,
        allow_inf_nan=False,
        description="WebServers per minute the operator moves, on its own, to the newest pod template revision (one "
        "rolling update each; never more than that many rolling at once, none while one of them is stuck). 0 (the "
        "default): only a WebServer's own pod-template change or its webserver-operator.dev/template-upgrade "
        "annotation moves it (docs/upgrades.md).",
    )


class LeaseSettings(_Section):
    """How every Lease this replica takes is claimed, renewed and released (``runtime.leases.lease.Lease``).

    One section for every Lease (the leader's today, each shard's with sharding): the timing rules are checked here,
    once, and a ``Lease`` takes the section as a whole.
    """

    lease_duration: float = Field(
        default=15.0, gt=0, allow_inf_nan=False, description="Seconds a standby waits before taking over."
    )
    renew_deadline: float = Field(
        default=10.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds the leader may write after its last successful renew was sent, and retries one renew "
        "before it quits.",
    )
    retry_period: float = Field(
        default=2.0, gt=0, allow_inf_nan=False, description="Seconds between leader election attempts."
    )

    @property
    def retry_backoff(self) -> BackoffPolicy:
        """The wait between two claim attempts: ``retry_period``, up to ``_LEASE_RETRY_JITTER`` longer.

        As client-go's ``wait.JitterUntil(retryPeriod, 1.2)``, so candidates started together do not poll in lock step.
        """
        longest = self.retry_period * (1 + _LEASE_RETRY_JITTER)
        return BackoffPolicy(base=longest, cap=longest, jitter=_LEASE_RETRY_JITTER / (1 + _LEASE_RETRY_JITTER))

    @property
    def release_timeout(self) -> float:
        """The whole release's budget: it runs after the drain, inside the pod's termination grace period."""
        return max(self.retry_period, self.renew_deadline / 2)

    @model_validator(mode="after")
    def _timings(self) -> LeaseSettings:
        if not self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}s) must be shorter than lease_duration "
                f"({self.lease_duration}s): a holder that cannot renew must stop writing before a standby may take over"
            )
        if not self.retry_backoff.cap < self.renew_deadline:
            raise ValueError(
                f"retry_period ({self.retry_period}s) must be shorter than renew_deadline ({self.renew_deadline}s) "
                f"by more than its {_LEASE_RETRY_JITTER:.0%} jitter, or a single slow renewal would cost the lease"
            )
        return self


class LeaderElectionSettings(_Section):
    """Whether replicas elect a leader, and the Lease they elect it with (timings: ``LeaseSettings``)."""

    leader_elect: bool = Field(default=False, description="Elect a leader with a Lease so only one replica acts.")
    leader_election_id: str = Field(default="webserver-operator-leader", description="Name of the Lease.")
    leader_election_namespace: str | None = Field(
        default=None, description="Namespace of the Lease (default: the pod's namespace, else 'default')."
    )

    shards: int = Field(
        default=1,
        ge=1,
        le=_MAX_SHARDS,
        description="Shards the WebServers are split into by a hash of their namespace; each replica holds a fair "
        "share of the shard Leases and reconciles only those shards (needs --leader-elect). 1: one leader reconciles "
        "everything.",
    )

    @model_validator(mode="after")
    def _shards_need_leases(self) -> LeaderElectionSettings:
        if self.shards > 1 and not self.leader_elect:
            raise ValueError(
                f"shards={self.shards} needs leader election: each shard is owned through a Lease, so turn on "
                "--leader-elect (WEBSERVER_OPERATOR_LEADER_ELECT=true, or the chart's leaderElection.enabled), or set "
                "--shards 1"
            )
        return self

    @field_validator("leader_election_id")
    @classmethod
    def _lease_name(cls, value: str) -> str:
        """A bad name would only show as a 403/422 on every Lease call while readiness stays green: refuse it here."""
        if not _DNS_SUBDOMAIN_RE.fullmatch(value) or len(value) > 253:
            raise ValueError(
                f"{value!r} is not a Lease name: use a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "
                "each part starting and ending with a letter or digit, at most 253 characters), e.g. "
                "webserver-operator-leader; the chart's Role grants get/update on exactly this name"
            )
        return value

    @field_validator("leader_election_namespace")
    @classmethod
    def _lease_namespace(cls, value: str | None) -> str | None:
        return None if value is None else _check_namespace_name(value)


class ServerSettings(_Section):
    """The HTTP endpoints: kubelet probes (``manager.endpoints``) and Prometheus metrics (``manager.metrics.server``).

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
    metrics_max_connections: int = Field(
        default=512,
        ge=1,
        description="Connections the /metrics port keeps open at once; at the limit a new one closes the one idle "
        "the longest (an idle TLS connection costs about 46 KiB).",
    )
    health_probe_bind_address: str = Field(
        default=":8081", description="Address of /healthz and /readyz (HOST:PORT; port 0 picks a free port)."
    )
    max_loop_lag: float = Field(
        default=10.0, description="Seconds the event loop may be blocked before /healthz fails (at least 2)."
    )

    @field_validator("max_loop_lag")
    @classmethod
    def _loop_lag_floor(cls, value: float) -> float:
        if not (math.isfinite(value) and value >= MIN_MAX_LOOP_LAG):
            raise ValueError(
                f"must be a number of seconds of at least {MIN_MAX_LOOP_LAG:g}: the event loop's heartbeat ticks "
                "every 0.5 s, and a limit close to that fails liveness on any busy moment, so kubelet would restart "
                "a healthy operator; the default is 10"
            )
        return value

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
