"""kube.library: the operator loads the pieces of kubernetes_asyncio it uses, not its ~850 generated modules.

Nor ``ApiClient``'s module, nor urllib3 (issue 19, idle RSS): those are imported on first use only. Each check runs
in a fresh interpreter, so what other tests imported cannot hide an import (or the full library be loaded already).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

#: Imported by the kept parts of kubernetes_asyncio only for what the operator never calls (see ``kube.library``).
DEFERRED = (
    "urllib3",
    "dateutil",
    "multiprocessing.pool",
    "kubernetes_asyncio.client.api_client",
    "kubernetes_asyncio.client.rest",
)

RUN_THE_CLIENT = """
import asyncio, json, sys
import webserver_operator.kube.client, webserver_operator.kube.config
from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration

async def build():
    configuration = await load_configuration(kubeconfig=sys.argv[1], context=None)
    client = await KubeClient.create(configuration, settings=ClientSettings(), pool_size=4)
    await client.close()

asyncio.run(build())
print(json.dumps(sorted(sys.modules)))
"""


def run(probe: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write_kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "static-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def test_the_generated_client_is_not_imported(tmp_path: Path) -> None:
    modules = json.loads(run(RUN_THE_CLIENT, write_kubeconfig(tmp_path)))
    loaded = [m for m in modules if m.startswith("kubernetes_asyncio")]
    assert not [m for m in loaded if m.startswith("kubernetes_asyncio.client.models.")], "no generated model"
    assert not [m for m in loaded if m.startswith("kubernetes_asyncio.client.api.")], "no generated API class"
    assert len(loaded) < 40, loaded


def test_neither_api_client_nor_urllib3_is_imported_to_load_a_kubeconfig_and_build_a_client(tmp_path: Path) -> None:
    modules = set(json.loads(run(RUN_THE_CLIENT, write_kubeconfig(tmp_path))))
    assert [m for m in DEFERRED if m in modules] == []


def test_the_deferred_pieces_still_work_when_asked_for() -> None:
    """Whoever uses ``ApiClient`` or ``Configuration.get_basic_auth_token`` (urllib3) gets the library's real ones."""
    probe = """
import asyncio, sys
import webserver_operator.kube.library as lib
import kubernetes_asyncio.client.configuration as configuration_module
from kubernetes_asyncio.config import kube_config

assert "urllib3" not in sys.modules and "kubernetes_asyncio.client.api_client" not in sys.modules
token = lib.Configuration(host="https://127.0.0.1:1", username="me", password="pw").get_basic_auth_token()
assert token == "Basic bWU6cHc=", token
import urllib3
assert sys.modules["urllib3"] is urllib3 and hasattr(urllib3, "PoolManager")
assert configuration_module.urllib3.util is urllib3.util

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.api_client import ApiClient as real

assert ApiClient is real

async def through_the_kubeconfig_loader():
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    client = await kube_config.new_client_from_config_dict(config)
    assert type(client) is real, type(client)
    await client.close()

asyncio.run(through_the_kubeconfig_loader())
"""
    run(probe)


def test_an_already_imported_library_is_used_as_it_is() -> None:
    probe = """
import asyncio
import kubernetes_asyncio.client as full
import webserver_operator.kube.library as lib
from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube.client import KubeClient

assert lib.Configuration is full.Configuration and hasattr(full, "CoreV1Api")

async def build():
    client = await KubeClient.create(full.Configuration(host="https://127.0.0.1:1"), settings=ClientSettings())
    await client.close()

asyncio.run(build())
"""
    run(probe)
