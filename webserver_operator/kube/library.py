"""The parts of kubernetes_asyncio the operator uses, imported without the generated client it does not use.

Why: ``import kubernetes_asyncio.client`` runs the package's ``__init__``, which imports every generated API class and
model (about 850 modules, some 33 MB resident and seconds of start-up on a small node), and
``kubernetes_asyncio/__init__`` adds the dynamic client, streams and watch helpers. The operator uses
``Configuration`` (host, credentials, the token refresh hook) and the kubeconfig / in-cluster loaders
(``kube.config``). It never deserialises into models and has no aiohttp client session: ``kube.client`` talks HTTP/1.1
through its own connection pool (``kube.transport.connection``, ``kube.transport.http1``), so it does not use
``ApiClient`` either.

How: before the first import, the packages ``kubernetes_asyncio``, ``kubernetes_asyncio.client`` and
``kubernetes_asyncio.client.models`` are registered as empty package modules pointing at the library's own
directories, so the submodules below load from the installed library, unchanged, without their package
``__init__`` files. ``client`` then gets the two names the loaders import from it: ``Configuration``, and
``ApiClient`` on demand. If the full library was already imported in this process (a test, another tool), it is
used as it is.

Two imports of the kept modules are deferred to first use, because nothing the operator runs uses them and together
they keep about 2 MB resident for the life of the process (issue 19, idle RSS):

- ``kubernetes_asyncio.client.api_client`` (``ApiClient``, with ``rest``, ``dateutil`` and ``multiprocessing.pool``).
  The kubeconfig loader imports ``ApiClient`` by name for ``new_client_from_config``, which the operator never calls:
  while the loaders are imported, ``client.ApiClient`` is ``_ApiClientOnDemand``, which imports the real class when it
  is called and returns a real ``ApiClient``; afterwards ``kubernetes_asyncio.client.ApiClient`` is the real class,
  imported on first access (a module ``__getattr__``).
- ``urllib3``, which ``configuration`` imports for one helper, ``Configuration.get_basic_auth_token`` (called only by
  ``auth_settings``, i.e. by ``ApiClient``; the kubeconfig loader encodes basic auth itself). The module is executed
  with ``_DeferredModule("urllib3")`` standing in ``sys.modules`` (when urllib3 is not imported yet), so its global
  ``urllib3`` is that stand-in, which imports the real urllib3 on first attribute access. (A
  ``importlib.util.LazyLoader`` does not help on Python 3.11: the import statement reads the module's ``__spec__``
  and so loads it at once.)

Used by ``kube.client`` and ``kube.config``; hands them the library's own classes.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

_API_CLIENT_MODULE = "kubernetes_asyncio.client.api_client"


def _package(name: str, path: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    module.__spec__.submodule_search_locations = [path]
    sys.modules[name] = module
    return module


class _DeferredModule(types.ModuleType):
    """Stands in for a module that was not imported: the first attribute read imports the real one and answers."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or sys.modules.get(self.__name__) is self:
            raise AttributeError(attribute)  # dunder probes, or still standing in sys.modules: nothing to load yet
        return getattr(importlib.import_module(self.__name__), attribute)


def _import_deferring(name: str, *, deferred: str) -> types.ModuleType:
    """Import module ``name``; its ``import <deferred>`` binds a ``_DeferredModule`` unless ``deferred`` is loaded."""
    if deferred in sys.modules:
        return importlib.import_module(name)
    stand_in = _DeferredModule(deferred)
    sys.modules[deferred] = stand_in
    try:
        return importlib.import_module(name)
    finally:
        if sys.modules.get(deferred) is stand_in:
            del sys.modules[deferred]


class _ApiClientOnDemand:
    """``ApiClient`` as the kubeconfig loader sees it: calling it imports the library's and returns a real one."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return importlib.import_module(_API_CLIENT_MODULE).ApiClient(*args, **kwargs)


def _client_attribute(name: str) -> Any:
    """``kubernetes_asyncio.client``'s module ``__getattr__``: ``ApiClient`` is imported when it is first asked for."""
    if name == "ApiClient":
        return importlib.import_module(_API_CLIENT_MODULE).ApiClient
    raise AttributeError(f"module 'kubernetes_asyncio.client' has no attribute {name!r}")


def _install() -> None:
    if "kubernetes_asyncio.client" in sys.modules:
        return  # the full library is already loaded: nothing to save any more
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("kubernetes_asyncio is not installed: pip install the operator's dependencies")
    root = spec.submodule_search_locations[0]
    if "kubernetes_asyncio" not in sys.modules:
        _package("kubernetes_asyncio", root)
    client = _package("kubernetes_asyncio.client", os.path.join(root, "client"))
    _package("kubernetes_asyncio.client.models", os.path.join(root, "client", "models"))
    configuration = _import_deferring("kubernetes_asyncio.client.configuration", deferred="urllib3")
    client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
    client.ApiClient = _ApiClientOnDemand  # type: ignore[attr-defined]
    try:
        importlib.import_module("kubernetes_asyncio.config.kube_config")
        importlib.import_module("kubernetes_asyncio.config.incluster_config")
    finally:
        del client.ApiClient
        client.__getattr__ = _client_attribute  # type: ignore[method-assign]


_install()

from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402 - after the packages are in place
from kubernetes_asyncio.config.config_exception import ConfigException  # noqa: E402
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader  # noqa: E402
from kubernetes_asyncio.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger  # noqa: E402

__all__ = [
    "ConfigException",
    "ConfigNode",
    "Configuration",
    "InClusterConfigLoader",
    "KubeConfigLoader",
    "KubeConfigMerger",
]
