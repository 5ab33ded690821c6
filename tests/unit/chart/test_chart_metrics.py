"""Secure metrics in the chart and in config/: HTTPS behind TokenReview and SubjectAccessReview by default.

As kubebuilder v4 ships it: the operator gets create on tokenreviews and subjectaccessreviews (its own ClusterRole,
also with watchNamespaces), scrapers get the metrics-reader ClusterRole, the ServiceMonitor scrapes over HTTPS with
Prometheus' token, a cert-manager certificate and a NetworkPolicy are options. Plain HTTP only when asked for.
Rendered with the project's helm and kubectl (`make tools`); tests/e2e scrape an installed release this way.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.paths import CONFIG
from tests.support.chart import (
    FULLNAME,
    KUSTOMIZE_NAMESPACE,
    KUSTOMIZE_PREFIX,
    METRICS_AUTH_RULES,
    NAMESPACE,
    deployment_of,
    find,
    flag_values_of,
    helm_template,
    kustomize,
    manager_of,
    one,
    render,
    rule_triples,
)

pytestmark = pytest.mark.tools

READER_RULES = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
CERT_DIR = "/etc/webserver-operator/metrics-certs"
SA_SUBJECT = [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]


def endpoint_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    result: dict[str, Any] = endpoint
    return result


def test_metrics_are_https_behind_reviews_by_default() -> None:
    docs = render()
    args = manager_of(docs)["args"]
    assert "--metrics-secure" in args and "--no-metrics-secure" not in args
    assert not flag_values_of(args, "--metrics-cert-path")  # self-signed at start
    auth = one(docs, "ClusterRole", f"{FULLNAME}-metrics-auth")
    assert rule_triples(auth["rules"]) == METRICS_AUTH_RULES
    binding = one(docs, "ClusterRoleBinding", f"{FULLNAME}-metrics-auth")
    assert binding["roleRef"]["name"] == f"{FULLNAME}-metrics-auth"
    assert binding["subjects"] == SA_SUBJECT
    assert one(docs, "ClusterRole", f"{FULLNAME}-metrics-reader")["rules"] == READER_RULES
    assert not find(docs, "ClusterRoleBinding", f"{FULLNAME}-metrics-reader")  # bound by the user (metrics.reader)
    assert not find(docs, "Certificate") and not find(docs, "NetworkPolicy")


def test_the_metrics_connection_limit_is_the_operators_default_unless_set() -> None:
    from webserver_operator.core.settings import ServerSettings  # noqa: PLC0415 - only this test needs it

    # The chart passes the flag only when its value differs from the operator's default (both 512).
    assert ServerSettings().metrics_max_connections == 512
    assert not flag_values_of(manager_of(render())["args"], "--metrics-max-connections")
    args = manager_of(render(values={"metrics": {"maxConnections": 2048}}))["args"]
    assert flag_values_of(args, "--metrics-max-connections") == ["2048"]


def test_metrics_reader_subjects_are_bound() -> None:
    subject = "metrics.reader.subjects[0]"
    docs = render(
        "--set", f"{subject}.kind=ServiceAccount,{subject}.name=prometheus-k8s,{subject}.namespace=monitoring"
    )
    binding = one(docs, "ClusterRoleBinding", f"{FULLNAME}-metrics-reader")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": f"{FULLNAME}-metrics-reader",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]


def test_service_monitor_scrapes_https_with_prometheus_token_and_skips_verifying_the_self_signed_cert() -> None:
    endpoint = endpoint_of(render("--set", "metrics.serviceMonitor.enabled=true"))
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == TOKEN_FILE
    assert "authorization" not in endpoint
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")


def test_service_monitor_can_send_a_token_from_a_secret() -> None:
    docs = render(
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.bearerTokenSecret.name=scrape-token,"
        "metrics.serviceMonitor.bearerTokenSecret.key=token",
    )
    endpoint = endpoint_of(docs)
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": "scrape-token", "key": "token"}}
    assert "bearerTokenFile" not in endpoint


@pytest.mark.parametrize("half", ["name=scrape-token", "key=token"])
def test_a_token_secret_needs_both_name_and_key(half: str) -> None:
    result = helm_template(
        "--set", f"metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.bearerTokenSecret.{half}", check=False
    )
    assert result.returncode != 0
    assert "bearerTokenSecret" in result.stderr


def test_plain_http_only_when_chosen() -> None:
    docs = render("--set", "metrics.secure=false,metrics.serviceMonitor.enabled=true")
    args = manager_of(docs)["args"]
    assert "--no-metrics-secure" in args and "--metrics-secure" not in args
    endpoint = endpoint_of(docs)
    assert endpoint["scheme"] == "http"
    assert not {"tlsConfig", "bearerTokenFile", "authorization"} & endpoint.keys()
    assert not find(docs, "ClusterRole", f"{FULLNAME}-metrics-auth")
    assert not find(docs, "ClusterRole", f"{FULLNAME}-metrics-reader")


def test_cert_manager_certificate_is_mounted_served_and_verified() -> None:
    docs = render("--set", "metrics.certManager.enabled=true,metrics.serviceMonitor.enabled=true")
    host = f"{FULLNAME}-metrics.{NAMESPACE}.svc"
    certificate = one(docs, "Certificate", f"{FULLNAME}-metrics-cert")
    assert certificate["spec"]["secretName"] == f"{FULLNAME}-metrics-cert"
    assert certificate["spec"]["dnsNames"] == [host, f"{host}.cluster.local"]
    issuer = one(docs, "Issuer", f"{FULLNAME}-metrics-selfsigned")
    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["spec"]["issuerRef"] == {
        "name": f"{FULLNAME}-metrics-selfsigned",
        "kind": "Issuer",
        "group": "cert-manager.io",
    }
    manager = manager_of(docs)
    assert flag_values_of(manager["args"], "--metrics-cert-path") == [CERT_DIR]
    assert {"name": "metrics-certs", "mountPath": CERT_DIR, "readOnly": True} in manager["volumeMounts"]
    volumes = deployment_of(docs)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "metrics-certs", "secret": {"secretName": f"{FULLNAME}-metrics-cert"}} in volumes
    assert endpoint_of(docs)["tlsConfig"] == {
        "serverName": host,
        "ca": {"secret": {"name": f"{FULLNAME}-metrics-cert", "key": "ca.crt"}},
        "insecureSkipVerify": False,
    }


def test_cert_manager_with_an_issuer_of_yours() -> None:
    docs = render(
        "--set",
        "metrics.certManager.enabled=true,metrics.certManager.issuerRef.name=corp-ca,"
        "metrics.certManager.issuerRef.kind=ClusterIssuer",
    )
    assert not find(docs, "Issuer")
    issuer_ref = one(docs, "Certificate")["spec"]["issuerRef"]
    assert issuer_ref == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}


def test_cert_manager_without_https_is_refused_with_the_reason() -> None:
    result = helm_template("--set", "metrics.certManager.enabled=true,metrics.secure=false", check=False)
    assert result.returncode != 0
    assert "metrics.certManager.enabled needs metrics.secure=true" in result.stderr


def test_network_policy_admits_scrapes_only_from_labelled_namespaces() -> None:
    docs = render("--set", "metrics.networkPolicy.enabled=true")
    policy = one(docs, "NetworkPolicy", f"{FULLNAME}-metrics")
    selector = deployment_of(docs)["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["podSelector"] == {"matchLabels": selector}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    metrics_rule, health_rule = policy["spec"]["ingress"]
    assert metrics_rule == {
        "from": [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}],
        "ports": [{"port": 8443, "protocol": "TCP"}],
    }
    # The `helm test` pod reaches the health port; its labels are the ones the rule names.
    test_pod = one(docs, "Pod", f"{FULLNAME}-healthz-test")
    (peer,) = health_rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= test_pod["metadata"]["labels"].items()
    assert health_rule["ports"] == [{"port": 8081, "protocol": "TCP"}]


def test_network_policy_follows_the_ports_and_selector_values() -> None:
    docs = render(
        "--set",
        "metrics.networkPolicy.enabled=true,metrics.port=9443,test.enabled=false,"
        "metrics.networkPolicy.namespaceSelector.matchLabels.team=monitoring",
    )
    (rule,) = one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9443, "protocol": "TCP"}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"metrics": "enabled", "team": "monitoring"}}}]
    assert not find(render("--set", "metrics.networkPolicy.enabled=true,metrics.enabled=false"), "NetworkPolicy")


# --- config/ ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return kustomize(CONFIG / "default")


def test_config_manager_serves_https_behind_reviews(default: list[dict[str, Any]]) -> None:
    (deployment,) = find(default, "Deployment")
    (manager,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--metrics-secure" in manager["args"]
    assert flag_values_of(manager["args"], "--metrics-bind-address") == [":8443"]
    (port,) = [p for p in manager["ports"] if p["name"] == "metrics"]
    service = one(default, "Service")
    assert port["containerPort"] == service["spec"]["ports"][0]["port"] == 8443
    auth = one(default, "ClusterRole", f"{KUSTOMIZE_PREFIX}metrics-auth-role")
    assert rule_triples(auth["rules"]) == METRICS_AUTH_RULES
    binding = one(default, "ClusterRoleBinding", f"{KUSTOMIZE_PREFIX}metrics-auth-rolebinding")
    assert binding["roleRef"]["name"] == f"{KUSTOMIZE_PREFIX}metrics-auth-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"{KUSTOMIZE_PREFIX}controller-manager", "namespace": KUSTOMIZE_NAMESPACE}
    ]
    assert one(default, "ClusterRole", f"{KUSTOMIZE_PREFIX}metrics-reader")["rules"] == READER_RULES


def test_config_prometheus_monitor_scrapes_as_kubebuilder_does() -> None:
    (monitor,) = kustomize(CONFIG / "prometheus")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == TOKEN_FILE
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


def test_config_network_policy_selects_the_manager_and_its_metrics_port(default: list[dict[str, Any]]) -> None:
    (policy,) = kustomize(CONFIG / "network-policy")
    assert policy["kind"] == "NetworkPolicy"
    (deployment,) = find(default, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}]
    assert rule["ports"] == [{"port": 8443, "protocol": "TCP"}]


def test_uncommenting_the_options_in_config_default_adds_them(tmp_path: Path) -> None:
    """config/default lists ../prometheus and ../network-policy commented out: uncommented, they render in place."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    kustomization = config / "default" / "kustomization.yaml"
    text = kustomization.read_text()
    assert "#- ../prometheus" in text and "#- ../network-policy" in text
    kustomization.write_text(
        text.replace("#- ../prometheus", "- ../prometheus").replace("#- ../network-policy", "- ../network-policy")
    )
    docs = kustomize(config / "default")
    policy = one(docs, "NetworkPolicy", f"{KUSTOMIZE_PREFIX}allow-metrics-traffic")
    monitor = one(docs, "ServiceMonitor")
    (deployment,) = find(docs, "Deployment")
    assert policy["metadata"]["namespace"] == monitor["metadata"]["namespace"] == KUSTOMIZE_NAMESPACE
    assert (
        policy["spec"]["podSelector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
