"""Configuration discovery (kubeconfig vs in-cluster), its error messages, and credential refresh."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.config import incluster_config

from webserver_operator.kube import config as kube_config
from webserver_operator.kube.config import (
    kubeconfig_paths,
    load_configuration,
    load_in_cluster_configuration,
    running_in_cluster,
)
from webserver_operator.kube.errors import ConfigurationError


def kubeconfig_dict(*, user: dict[str, Any] | None = None, current: str | None = "dev") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "dev-cluster", "cluster": {"server": "http://127.0.0.1:6443/"}},
            {"name": "prod-cluster", "cluster": {"server": "http://10.0.0.1:6443"}},
            {"name": "broken-cluster", "cluster": {}},
        ],
        "users": [{"name": "me", "user": user if user is not None else {"token": "static-token"}}],
        "contexts": [
            {"name": "dev", "context": {"cluster": "dev-cluster", "user": "me"}},
            {"name": "prod", "context": {"cluster": "prod-cluster", "user": "me"}},
            {"name": "broken", "context": {"cluster": "broken-cluster", "user": "me"}},
        ],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(autouse=True)
def outside_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(kube_config, "SERVICE_TOKEN_PATH", str(tmp_path / "sa" / "token"))
    monkeypatch.setattr(kube_config, "SERVICE_CA_PATH", str(tmp_path / "sa" / "ca.crt"))


def fake_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, token: str = "sa-token") -> Path:  # noqa: S107
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_text("not parsed until a TLS client is built")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return sa / "token"


def test_kubeconfig_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert kubeconfig_paths("/x/config") == ["/x/config"]
    assert kubeconfig_paths(None) == [str(tmp_path / "home" / ".kube" / "config")]
    assert kubeconfig_paths(None, environ={"KUBECONFIG": "/a::/b"}) == ["/a", "/b"]
    monkeypatch.setenv("KUBECONFIG", "~/k")
    assert kubeconfig_paths(None) == [str(tmp_path / "home" / "k")]


async def test_nothing_found_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await load_configuration(kubeconfig=None, context=None)
    message = str(caught.value)
    assert f"no kubeconfig at {tmp_path / 'home' / '.kube' / 'config'} and not running in a cluster" in message
    assert "set KUBECONFIG or --kubeconfig" in message


async def test_explicit_kubeconfig_and_contexts(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", kubeconfig_dict())
    configuration = await load_configuration(kubeconfig=path, context=None)
    assert configuration.host == "http://127.0.0.1:6443"
    assert configuration.api_key["BearerToken"] == "Bearer static-token"
    assert configuration.refresh_api_key_hook is None  # static credentials need no refresh

    prod = await load_configuration(kubeconfig=path, context="prod")
    assert prod.host == "http://10.0.0.1:6443"

    with pytest.raises(ConfigurationError, match=r"context 'nope' not found in kubeconfig .*available contexts: dev"):
        await load_configuration(kubeconfig=path, context="nope")
    with pytest.raises(ConfigurationError, match="without a server URL"):
        await load_configuration(kubeconfig=path, context="broken")


async def test_no_current_context(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", kubeconfig_dict(current=None))
    with pytest.raises(ConfigurationError, match="has no current-context: pass --context"):
        await load_configuration(kubeconfig=path, context=None)


async def test_unreadable_kubeconfig(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("clusters: [unclosed")
    with pytest.raises(ConfigurationError, match="cannot read kubeconfig"):
        await load_configuration(kubeconfig=str(bad), context=None)


async def test_kubeconfig_env_is_merged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first = kubeconfig_dict()
    first["contexts"] = first["contexts"][:1]
    second = kubeconfig_dict(current=None)
    second["contexts"] = second["contexts"][1:2]
    monkeypatch.setenv("KUBECONFIG", f"{write(tmp_path / 'a', first)}:{write(tmp_path / 'b', second)}")
    configuration = await load_configuration(kubeconfig=None, context="prod")
    assert configuration.host == "http://10.0.0.1:6443"


async def test_in_pod_uses_in_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert not running_in_cluster()
    fake_pod(monkeypatch, tmp_path)
    assert running_in_cluster()
    configuration = await load_configuration(kubeconfig=None, context=None)
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.api_key["BearerToken"] == "Bearer sa-token"
    assert configuration.refresh_api_key_hook is not None


async def test_kubeconfig_beats_in_cluster_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_pod(monkeypatch, tmp_path)
    path = write(tmp_path / "kc", kubeconfig_dict())
    assert (await load_configuration(kubeconfig=path, context=None)).host == "http://127.0.0.1:6443"
    monkeypatch.setenv("KUBECONFIG", path)
    assert (await load_configuration(kubeconfig=None, context=None)).host == "http://127.0.0.1:6443"
    # ... unless in-cluster is forced.
    assert (await load_configuration(kubeconfig=None, context=None, in_cluster=True)).host == "https://10.96.0.1:443"
    with pytest.raises(ConfigurationError, match="do not also pass"):
        await load_configuration(kubeconfig=path, context=None, in_cluster=True)


async def test_forced_in_cluster_outside_a_pod(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await load_configuration(kubeconfig=None, context=None, in_cluster=True)
    assert "KUBERNETES_SERVICE_HOST" in str(caught.value)
    assert "automountServiceAccountToken" in str(caught.value)


async def test_forced_kubeconfig_in_a_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_pod(monkeypatch, tmp_path)
    with pytest.raises(ConfigurationError, match="no kubeconfig at"):
        await load_configuration(kubeconfig=None, context=None, in_cluster=False)


async def test_in_cluster_token_is_reread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token = fake_pod(monkeypatch, tmp_path, token="first")
    # The library re-reads at most once a minute; make "a minute" pass at once.
    monkeypatch.setattr(incluster_config, "TOKEN_REFRESH_PERIOD", datetime.timedelta(0))
    configuration = load_in_cluster_configuration()
    assert (await configuration.auth_settings())["BearerToken"]["value"] == "Bearer first"
    token.write_text("rotated")
    assert (await configuration.auth_settings())["BearerToken"]["value"] == "Bearer rotated"


async def test_kubeconfig_token_file_is_reloaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    path = write(tmp_path / "kc", kubeconfig_dict(user={"tokenFile": str(token)}))
    monkeypatch.setattr(kube_config, "CREDENTIAL_REFRESH_SECONDS", 0.0)
    configuration = await load_configuration(kubeconfig=path, context=None)
    assert configuration.refresh_api_key_hook is not None
    assert (await configuration.auth_settings())["BearerToken"]["value"] == "Bearer one"
    token.write_text("two")
    assert (await configuration.auth_settings())["BearerToken"]["value"] == "Bearer two"
    # A failing reload keeps the last good credentials (the API server decides whether they still work).
    token.unlink()
    assert (await configuration.auth_settings())["BearerToken"]["value"] == "Bearer two"


async def test_kubeconfig_refresh_is_rate_limited(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    path = write(tmp_path / "kc", kubeconfig_dict(user={"tokenFile": str(token)}))
    configuration = await load_configuration(kubeconfig=path, context=None)
    token.write_text("two")
    assert (await configuration.auth_settings())["BearerToken"]["value"] == "Bearer one"  # within the minute
