"""Find the API server and credentials: kubeconfig or in-cluster ServiceAccount, with token refresh.

Order (controller-runtime's, so it behaves like every other operator):

1. ``kubeconfig`` given explicitly (``--kubeconfig``), or a ``context`` asked for: that kubeconfig.
2. ``KUBECONFIG`` set in the environment: those files (``:``-separated, merged like kubectl does).
3. Running in a pod (``KUBERNETES_SERVICE_HOST`` set and the ServiceAccount token file present): in-cluster.
4. ``~/.kube/config``.

``in_cluster=True`` / ``False`` forces one side. Every failure is a ``ConfigurationError`` saying what to set;
kubernetes_asyncio itself answers a missing context with a bare ``AssertionError``, so contexts are checked first.

Token refresh, the trap: projected ServiceAccount tokens expire (about an hour) and kubelet rewrites the file. The
library's in-cluster loader installs ``Configuration.refresh_api_key_hook``, which re-reads the file once a minute,
but that hook only runs when a request is made with ``auth_settings=["BearerToken"]`` (the generated API classes pass
it; a bare ``ApiClient.call_api`` does not, and then sends no token at all). ``Kube`` always passes it. For
kubeconfig users with expiring credentials (exec plugins, ``tokenFile``, OIDC) the library only offers a background
task; we install an equivalent hook instead, which reloads the user's credentials at most once a minute (an exec
plugin's cached token is reused until its ``expirationTimestamp``). Certificates are read once, when the client is
built: rotating client certificates need a restart. A token read from a file keeps its trailing newline here (the
library's loaders read files as they are); ``kube.client`` trims it, as client-go does, before it is sent.

``persist_config=False`` semantics: we never write back into the user's kubeconfig.

Called by ``manager.operator`` before anything else; hands the kubernetes_asyncio ``Configuration`` to
``KubeClient.create``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from webserver_operator.kube.errors import ConfigurationError
from webserver_operator.kube.library import (
    ConfigException,
    ConfigNode,
    Configuration,
    InClusterConfigLoader,
    KubeConfigLoader,
    KubeConfigMerger,
)

__all__ = [
    "SERVICE_CA_PATH",
    "SERVICE_TOKEN_PATH",
    "kubeconfig_paths",
    "load_configuration",
    "load_in_cluster_configuration",
    "running_in_cluster",
]

log = logging.getLogger(__name__)

_SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105 - a path, not a secret
SERVICE_CA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
_DEFAULT_KUBECONFIG = "~/.kube/config"
#: How often expiring kubeconfig credentials are reloaded (the in-cluster loader uses the same minute).
CREDENTIAL_REFRESH_SECONDS = 60.0

_LIBRARY_ERRORS = (ConfigException, yaml.YAMLError, OSError, AssertionError, KeyError, TypeError, ValueError)


def running_in_cluster(*, environ: Mapping[str, str] | None = None, token_path: str | None = None) -> bool:
    """True in a pod with a ServiceAccount token mounted."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(_SERVICE_HOST_ENV)) and os.path.isfile(token_path or SERVICE_TOKEN_PATH)


def kubeconfig_paths(kubeconfig: str | None, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """The kubeconfig files to merge: the explicit path, else ``KUBECONFIG``'s list, else ``~/.kube/config``."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        raw = [kubeconfig]
    elif environ.get("KUBECONFIG"):
        raw = [p for p in environ["KUBECONFIG"].split(os.pathsep) if p]
    else:
        raw = [_DEFAULT_KUBECONFIG]
    return [os.path.expanduser(p) for p in raw]


async def load_configuration(
    *, kubeconfig: str | None, context: str | None, in_cluster: bool | None = None
) -> Configuration:
    """Return a ``Configuration`` for the one shared ``ApiClient`` (see the module docstring for the order)."""
    if in_cluster:
        if kubeconfig or context:
            raise ConfigurationError("in-cluster configuration was forced: do not also pass a kubeconfig or context")
        return load_in_cluster_configuration()
    asked_for_kubeconfig = bool(kubeconfig or context or os.environ.get("KUBECONFIG"))
    if in_cluster is None and not asked_for_kubeconfig and running_in_cluster():
        return load_in_cluster_configuration()
    return await _load_kubeconfig_configuration(kubeconfig_paths(kubeconfig), context=context)


def load_in_cluster_configuration(
    *,
    environ: Mapping[str, str] | None = None,
    token_path: str | None = None,
    ca_path: str | None = None,
) -> Configuration:
    """ServiceAccount configuration; the token file is re-read every minute (rotation of projected tokens)."""
    environ = os.environ if environ is None else environ
    token_path = token_path or SERVICE_TOKEN_PATH
    ca_path = ca_path or SERVICE_CA_PATH
    configuration = Configuration()
    loader = InClusterConfigLoader(
        token_filename=token_path, cert_filename=ca_path, try_refresh_token=True, environ=dict(environ)
    )
    try:
        loader.load_and_set(configuration)
    except _LIBRARY_ERRORS as exc:
        raise ConfigurationError(
            f"cannot use the in-cluster configuration ({_describe(exc)}): the pod needs {_SERVICE_HOST_ENV}/"
            f"KUBERNETES_SERVICE_PORT and a ServiceAccount token at {token_path} and CA at {ca_path} "
            "(automountServiceAccountToken must not be false)"
        ) from exc
    log.info("using the in-cluster configuration for %s", configuration.host)
    return configuration


async def _load_kubeconfig_configuration(paths: list[str], *, context: str | None) -> Configuration:
    """Configuration from the merged kubeconfig ``paths`` and ``context`` (its current-context when ``None``)."""
    existing = _existing_files(paths)
    shown = os.pathsep.join(paths)
    if not existing:
        raise ConfigurationError(
            f"no kubeconfig at {shown} and not running in a cluster: set KUBECONFIG or --kubeconfig"
        )
    try:
        merged = KubeConfigMerger(os.pathsep.join(existing)).config
    except _LIBRARY_ERRORS as exc:
        raise ConfigurationError(f"cannot read kubeconfig {shown}: {_describe(exc)}") from exc
    if merged is None:
        raise ConfigurationError(f"kubeconfig {shown} is empty: set KUBECONFIG or --kubeconfig")
    chosen = _check_context(merged.value, context=context, shown=shown)

    if not _has_server(merged.value, chosen):
        raise ConfigurationError(f"context {chosen!r} of kubeconfig {shown} names a cluster without a server URL")
    configuration = Configuration()
    try:
        loader = KubeConfigLoader(config_dict=merged, config_base_path=None, active_context=chosen)
        await loader.load_and_set(configuration)
    except _LIBRARY_ERRORS as exc:
        raise ConfigurationError(f"cannot use context {chosen!r} of kubeconfig {shown}: {_describe(exc)}") from exc
    if _has_expiring_credentials(loader):
        _install_credential_refresh(configuration, loader=loader)
    log.info("using kubeconfig %s, context %s, server %s", shown, chosen, configuration.host)
    return configuration


def _describe(exc: BaseException) -> str:
    """The library raises bare KeyError/AssertionError: name the type when the message says nothing."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text and not isinstance(exc, ConfigException) else text or repr(exc)


def _existing_files(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.isfile(p)]


def _entries(config: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The named entries of a merged kubeconfig list (the merger wraps each in a ConfigNode)."""
    items = config.get(key) or []
    plain = [item.value if isinstance(item, ConfigNode) else item for item in items]
    return [item for item in plain if isinstance(item, Mapping)]


def _check_context(config: Mapping[str, Any], *, context: str | None, shown: str) -> str:
    names = [str(c.get("name")) for c in _entries(config, "contexts")]
    available = ", ".join(names) or "none"
    chosen = context or config.get("current-context")
    if not chosen:
        raise ConfigurationError(
            f"kubeconfig {shown} has no current-context: pass --context (available contexts: {available})"
        )
    if chosen not in names:
        raise ConfigurationError(
            f"context {chosen!r} not found in kubeconfig {shown} (available contexts: {available})"
        )
    return str(chosen)


def _has_server(config: Mapping[str, Any], context: str) -> bool:
    ctx = next(c for c in _entries(config, "contexts") if c.get("name") == context)
    cluster_name = (ctx.get("context") or {}).get("cluster")
    for cluster in _entries(config, "clusters"):
        if cluster.get("name") == cluster_name:
            return bool((cluster.get("cluster") or {}).get("server"))
    return False


def _has_expiring_credentials(loader: KubeConfigLoader) -> bool:
    user = loader._user  # the library exposes the active user section only here
    if user is None:
        return False
    return any(key in user for key in ("exec", "tokenFile", "auth-provider"))


def _install_credential_refresh(
    configuration: Configuration,
    *,
    loader: KubeConfigLoader,
    period: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Reload the kubeconfig user's credentials at most every ``period`` seconds, from the request path."""
    interval = CREDENTIAL_REFRESH_SECONDS if period is None else period
    lock = asyncio.Lock()
    last = clock()

    async def refresh(conf: Configuration) -> None:
        nonlocal last
        if clock() - last < interval:
            return
        async with lock:
            if clock() - last < interval:
                return
            last = clock()
            try:
                await loader.load_and_set(conf)
            except Exception as exc:  # keep the current credentials; the API server judges them
                log.warning("refreshing the kubeconfig credentials failed, keeping the current ones: %s", exc)

    configuration.refresh_api_key_hook = refresh
