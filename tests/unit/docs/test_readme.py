"""The README as a user reads it: the two first commands, a quickstart that installs and waits with a timeout, a
table of contents that leads somewhere, supported versions that agree with the chart, and a complete metrics list.

Why: the README is the interface people meet first, and each of these drifted before (a `kubectl wait` without
`--timeout`, two metrics the alerts read missing from the list). The quickstart itself is run on kind by
tests/e2e/test_readme_quickstart.py and its registry path on the local control plane by
tests/integration/test_readme_helm.py; here is what can be checked without a cluster.
"""

from __future__ import annotations

import re
import shlex

import yaml

from tests.support.readme import README, first_screen_blocks, quickstart_blocks, section, sh_blocks
from webserver_operator.metrics import REGISTRY

ROOT = README.parent


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def test_the_first_screen_installs_a_release_then_reaches_the_page() -> None:
    """What it is, then a release installed from an OCI registry (registry and version as variables), the sample
    applied, waited for with a timeout, and its page reached through `kubectl port-forward` (the NodePort second)."""
    text = README.read_text()
    install, _ = first_screen_blocks(text)
    assert [c.split("=", 1)[0] for c in install[:2]] == ["REGISTRY", "VERSION"], install
    assert re.fullmatch(r"VERSION=\d+\.\d+\.\d+", install[1]), install[1]
    helm = shlex.split(install[2])
    assert helm[:4] == ["helm", "install", "webserver-operator", "oci://$REGISTRY/charts/webserver-operator"], helm
    assert helm[helm.index("--version") + 1] == "$VERSION"
    assert "--wait" in helm and "--timeout" in helm
    (sample_path,) = [c.split()[-1] for c in install if c.startswith("kubectl apply -f")]
    sample = yaml.safe_load((ROOT / sample_path).read_text())
    name, port = sample["metadata"]["name"], sample["spec"]["port"]
    assert re.fullmatch(rf"kubectl wait --for=condition=Ready webserver/{name} --timeout=\d+m", install[4]), install
    assert install[5] == f"kubectl port-forward service/{name} {port}:{port} &"
    assert install[6].startswith("curl ") and install[6].endswith(f"http://localhost:{port}/")
    first_screen = text[: text.index("\n## ")]
    assert first_screen.index("port-forward") < first_screen.index(".status.nodePort"), "port-forward first"


def test_the_first_screen_sample_passes_restricted_pod_security() -> None:
    install, _ = first_screen_blocks()
    (sample_path,) = [c.split()[-1] for c in install if c.startswith("kubectl apply -f")]
    assert sample_path == "config/samples/web_v1_webserver_unprivileged.yaml"
    spec = yaml.safe_load((ROOT / sample_path).read_text())["spec"]
    context = spec["securityContext"]
    assert context["runAsNonRoot"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"] and context["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec["port"] >= 1024, "a non-root server cannot bind a port below 1024 without a capability"


def test_the_readme_starts_with_make_demo_then_make_test_then_the_install() -> None:
    text = README.read_text()
    install, contributor = first_screen_blocks(text)
    assert [command.split()[:2] for command in contributor] == [["make", "demo"], ["make", "test"]]
    assert sh_blocks(text)[:2] == [contributor, install]


def test_the_quickstart_installs_applies_and_waits_with_a_timeout() -> None:
    for commands in quickstart_blocks():
        kinds = [command.split()[0] for command in commands]
        assert kinds[:4] == ["make", "helm", "kubectl", "kubectl"], commands
        assert commands[2] == "kubectl apply -f config/samples/web_v1_webserver.yaml"
        assert re.fullmatch(
            r"kubectl wait --for=condition=Ready webserver/webserver-sample --timeout=\d+m", commands[3]
        )
    sample = yaml.safe_load((ROOT / "config" / "samples" / "web_v1_webserver.yaml").read_text())
    assert sample["metadata"]["name"] == "webserver-sample"


def test_every_kubectl_wait_has_a_timeout() -> None:
    text = README.read_text() + (ROOT / "hack" / "demo.sh").read_text()
    waits = re.findall(r"kubectl wait [^\n`]*", text) + re.findall(r"\bk wait [^\n`]*", text)
    assert waits
    assert [wait for wait in waits if "--timeout" not in wait] == []


def test_the_quickstart_comes_before_the_demo_and_the_reference() -> None:
    headings = re.findall(r"^## (.+)$", README.read_text(), flags=re.MULTILINE)
    order = ["Contents", "Quickstart: on your cluster", "The local demo", "Supported versions", "The WebServer API"]
    assert headings[: len(order)] == order
    assert headings.index("Troubleshooting") > headings.index("Operations")
    assert headings[-1] == "Development"
    for moved in ("Performance", "Real containers: kind"):
        assert moved not in headings, f"{moved} belongs in bench/README.md or docs/development.md"


def test_the_table_of_contents_links_to_headings_that_exist() -> None:
    text = README.read_text()
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links
    assert sorted({link for link in links if link not in anchors}) == []
    contents = section("Contents", text)
    for heading in re.findall(r"^## (.+)$", text, flags=re.MULTILINE):
        if heading != "Contents":
            assert f"(#{_anchor(heading)})" in contents, f"Contents lacks {heading!r}"


def test_supported_versions_agree_with_the_chart() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "webserver-operator" / "Chart.yaml").read_text())
    oldest = re.fullmatch(r">=(\d+\.\d+)\.0-0", chart["kubeVersion"])
    assert oldest, chart["kubeVersion"]
    versions = section("Supported versions")
    (kubernetes,) = [row for row in versions.splitlines() if row.startswith("| Kubernetes |")]
    claimed, tested = kubernetes.split("|")[2:4]
    assert f"{oldest[1]} and newer" in claimed
    pinned = re.search(r"^KUBERNETES_VERSION=v(\d+\.\d+)\.\d+$", (ROOT / "hack" / "versions.env").read_text(), re.M)
    assert pinned and f"{pinned[1]} on every test run" in tested
    # The oldest claimed minor is the one CI also runs the integration suite on (make test, KUBERNETES_LINE=oldest).
    built = re.search(
        r"^KUBERNETES_OLDEST_VERSION=v(\d+\.\d+)\.(\d+)$", (ROOT / "hack" / "versions.env").read_text(), re.M
    )
    assert built and built[1] == oldest[1], "hack/versions.env's KUBERNETES_OLDEST_VERSION is not the chart's claim"
    assert f"v{built[1]}.{built[2]} control plane" in tested
    assert "not tested" in tested, "say which claimed versions are not tested"


def test_metrics_section_lists_every_metric_the_operator_registers() -> None:
    registered = set()
    for family in REGISTRY.collect():
        registered.add(f"{family.name}_total" if family.type == "counter" else family.name)
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", section("Metrics"), flags=re.MULTILINE))
    assert sorted(registered - listed) == [], "add these to the README's Metrics table"
    assert sorted(listed - registered) == [], "the README lists metrics the operator does not register"


def test_moved_developer_text_lives_in_docs() -> None:
    development = (ROOT / "docs" / "development.md").read_text()
    for heading in ("## Real containers: kind", "## CI", "## Reproducible image", "## Tools: built, or yours"):
        assert heading in development
    bench = (ROOT / "bench" / "README.md").read_text()
    assert "<!-- bench:results:begin -->" in bench and "<!-- bench:results:end -->" in bench
    assert "bench:results" not in README.read_text()
