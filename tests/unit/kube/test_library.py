"""kube.library: the operator loads the pieces of kubernetes_asyncio it uses, not its ~850 generated modules."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import asyncio, json, sys
import webserver_operator.kube.client, webserver_operator.kube.config
from webserver_operator.kube.library import ApiClient, Configuration

async def build():
    await ApiClient(configuration=Configuration(host="https://127.0.0.1:1")).close()

asyncio.run(build())
loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio")]
print(json.dumps(loaded))
"""


def test_the_generated_client_is_not_imported() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "kubernetes_asyncio.client.api_client" in loaded
    assert not [m for m in loaded if m.startswith("kubernetes_asyncio.client.models.")], "no generated model"
    assert not [m for m in loaded if m.startswith("kubernetes_asyncio.client.api.")], "no generated API class"
    assert len(loaded) < 40, loaded


def test_an_already_imported_library_is_used_as_it_is() -> None:
    probe = "import kubernetes_asyncio.client as full\nimport webserver_operator.kube.library as lib\n"
    probe += "assert lib.ApiClient is full.ApiClient and hasattr(full, 'CoreV1Api')\n"
    subprocess.run([sys.executable, "-c", probe], check=True)
