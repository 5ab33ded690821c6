"""Operator settings: one pydantic-settings model, read from `WEBSERVER_OPERATOR_*` variables and mirrored by flags.

Why one model for both: the chart sets environment variables or arguments, people type flags, and both must mean
the same thing with the same validation. The `run` flags are generated from the fields below (name, help text,
type), so a setting cannot exist in one place and not the other. Flags override the environment.

Invalid settings fail at start with the setting's name, its flag, its variable and what is allowed, before
anything talks to the cluster.
"""

from __future__ import annotations

import argparse
import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "WEBSERVER_OPERATOR_"

_BIND_RE = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(?P<port>\d{1,5})$")


def parse_bind_address(value: str) -> tuple[str, int]:
    """Split ``host:port`` (``:8080`` = all interfaces, ``0`` = disabled); raise ValueError with the expected form."""
    match = _BIND_RE.match(value)
    if not match or int(match["port"]) > 65535:
        raise ValueError(f"{value!r} is not a bind address: use HOST:PORT or :PORT (e.g. :8080, 127.0.0.1:0)")
    host = match["host"].strip("[]") or "0.0.0.0"  # noqa: S104 - binding all interfaces is the documented default
    return host, int(match["port"])


class Settings(BaseSettings):
    """Everything `webserver-operator run` can be told. Field docs become the flags' help text."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True, populate_by_name=True)

    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Namespaces to watch, comma-separated; empty = all namespaces.",
    )
    kubeconfig: str | None = Field(
        default=None, description="Path to a kubeconfig; default: in-cluster config, else $KUBECONFIG/~/.kube/config."
    )
    context: str | None = Field(default=None, description="kubeconfig context to use (default: current context).")
    metrics_bind_address: str = Field(
        default=":8080",
        description="Address of the Prometheus /metrics endpoint (HOST:PORT; port 0 picks a free port; '0' disables).",
    )
    health_probe_bind_address: str = Field(
        default=":8081", description="Address of /healthz and /readyz (HOST:PORT; port 0 picks a free port)."
    )
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
    workers: int = Field(default=4, ge=1, le=64, description="WebServers reconciled concurrently.")
    resync_period: float = Field(
        default=36000.0, ge=60, description="Seconds between full resyncs (a safety net; changes are event-driven)."
    )
    drain_timeout: float = Field(
        default=25.0, ge=0, description="Seconds in-flight reconciles may take to finish on shutdown."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", description="Log level.")
    log_format: Literal["json", "text"] = Field(default="json", description="Log format: json or text.")
    connect_timeout: float = Field(default=10.0, gt=0, description="Seconds to connect to the API server.")
    read_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for an API response.")
    watch_timeout: int = Field(
        default=300, ge=10, le=1800, description="Server-side timeout of each watch request (seconds)."
    )
    watch_stall_timeout: float | None = Field(
        default=None,
        gt=0,
        description="Seconds without any watch event (bookmarks included) before a watch is restarted "
        "(default: watch timeout + 60).",
    )
    max_loop_lag: float = Field(
        default=10.0, gt=0, description="Seconds the event loop may be blocked before /healthz fails."
    )
    qps: float | None = Field(default=None, gt=0, description="Client-side request rate limit (default: off).")
    burst: int = Field(default=10, ge=1, description="Requests allowed at once above --qps.")

    @field_validator("namespaces", mode="before")
    @classmethod
    def _split_namespaces(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("namespaces")
    @classmethod
    def _valid_namespaces(cls, value: list[str]) -> list[str]:
        for ns in value:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", ns) or len(ns) > 63:
                raise ValueError(f"{ns!r} is not a namespace name (lowercase letters, digits, '-')")
        return sorted(set(value))

    @field_validator("metrics_bind_address", "health_probe_bind_address")
    @classmethod
    def _valid_bind(cls, value: str) -> str:
        if value == "0":
            return value
        parse_bind_address(value)
        return value

    @model_validator(mode="after")
    def _election_timings(self) -> Settings:
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


class SettingsError(Exception):
    """Settings could not be loaded; the message names each bad setting, its flag and its variable."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; defaults stay None so only flags actually given override the environment."""
    for name, field in Settings.model_fields.items():
        env = ENV_PREFIX + name.upper()
        help_text = f"{field.description} [env {env}]"
        if field.annotation is bool:
            parser.add_argument(_flag(name), dest=name, action=argparse.BooleanOptionalAction, help=help_text)
        else:
            parser.add_argument(_flag(name), dest=name, metavar=name.upper(), help=help_text)


def load_settings(args: argparse.Namespace | None = None) -> Settings:
    """Build Settings from the environment plus the flags in ``args``; raise SettingsError with a readable text."""
    overrides = {}
    if args is not None:
        overrides = {k: v for k, v in vars(args).items() if k in Settings.model_fields and v is not None}
    try:
        return Settings(**overrides)
    except ValidationError as err:
        lines = []
        for problem in err.errors():
            loc = [str(part) for part in problem["loc"]]
            name = loc[0] if loc else ""
            where = f"{name} ({_flag(name)} / {ENV_PREFIX}{name.upper()})" if name else "settings"
            lines.append(f"invalid setting {where}: {problem['msg']} (got {problem.get('input')!r})")
        raise SettingsError("\n".join(lines)) from None
