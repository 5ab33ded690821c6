"""The parts of kubernetes_asyncio the operator uses, imported without the generated client it does not use.

Why: ``import kubernetes_asyncio.client`` runs the package's ``__init__``, which imports every generated API class and
model (about 850 modules, some 33 MB resident and seconds of start-up on a small node), and
``kubernetes_asyncio/__init__`` adds the dynamic client, streams and watch helpers. The operator uses five things:
``Configuration``, ``ApiClient.call_api`` (TLS, bearer token and its refresh; see ``kube.client``) and the kubeconfig /
in-cluster loaders (``kube.config``). It never deserialises into models (``_preload_content=False``).

How: before the first import, the packages ``kubernetes_asyncio``, ``kubernetes_asyncio.client`` and
``kubernetes_asyncio.client.models`` are registered as empty package modules pointing at the library's own
directories, so the submodules below load from the installed library, unchanged, without their package
``__init__`` files. ``client`` then gets the two names the loaders import from it. If the full library was already
imported in this process (a test, another tool), it is used as it is.

Used by ``kube.client`` and ``kube.config``; hands them the library's own classes.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types


def _package(name: str, path: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    module.__spec__.submodule_search_locations = [path]
    sys.modules[name] = module
    return module


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
    configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
    api_client = importlib.import_module("kubernetes_asyncio.client.api_client")
    client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
    client.ApiClient = api_client.ApiClient  # type: ignore[attr-defined]


_install()

from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402 - after the packages are in place
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402
from kubernetes_asyncio.config.config_exception import ConfigException  # noqa: E402
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader  # noqa: E402
from kubernetes_asyncio.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger  # noqa: E402

__all__ = [
    "ApiClient",
    "ConfigException",
    "ConfigNode",
    "Configuration",
    "InClusterConfigLoader",
    "KubeConfigLoader",
    "KubeConfigMerger",
]
