"""The bad-input table: malformed or hostile WebServers and bad settings, with what happens to each.

One table, three readers: ``tests/integration/test_bad_input.py`` asserts every row against the real API server and
a running operator, ``docs/bad-input.md`` is rendered from it (``python -m tests.support.bad_input`` rewrites the
page, and a unit test fails when the page is out of date), and people read the page. So a documented message cannot
drift from what the API server or the operator actually says.

Outcomes:
- ``rejected``: the API server refuses the object (CRD schema, CEL rule, or strict field validation) with
  ``message``; nothing reaches the operator.
- ``condition``: the object is accepted and the operator reports ``Ready=<status>`` with ``reason`` and a message
  containing ``message``.
- ``ready``: accepted and served; ``message`` says what the row proves (for instance that nothing is written while
  the pods come and go).
- ``exit``: ``webserver-operator run`` exits 2 before touching the cluster, printing ``message``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from harness.paths import ROOT
from tests.support.factories import webserver

DOC = ROOT / "docs" / "bad-input.md"


_UNSET: Any = object()


def ws(
    name: str = "web", *, metadata: dict[str, Any] | None = None, spec: Any = _UNSET, **fields: Any
) -> dict[str, Any]:
    """A row's manifest: ``fields`` become the spec exactly (no defaults: a row says what it sends), unless ``spec``
    is given (``None`` leaves it out)."""
    return webserver(name, metadata=metadata, spec=fields if spec is _UNSET else spec)


@dataclass(frozen=True)
class Case:
    """One WebServer row. ``action`` other than ``create`` names a scripted step in the test (see its docstring)."""

    id: str
    what: str
    outcome: str  # rejected | condition | ready
    message: str
    manifest: dict[str, Any] = field(default_factory=dict)
    action: str = "create"
    reason: str = ""
    status: str = ""


@dataclass(frozen=True)
class SettingCase:
    id: str
    what: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    message: str = ""
    outcome: str = "exit"


_IMAGE_PATTERN = "spec.image in body should match"

CASES: tuple[Case, ...] = (
    Case("no-image", "spec without an image", "rejected", "spec.image: Required value", ws(replicas=1)),
    Case("empty-image", "empty image", "rejected", "spec.image in body should be at least 1 chars long", ws(image="")),
    Case(
        "uppercase-image",
        "upper case in the image path (Nginx:1.27)",
        "rejected",
        _IMAGE_PATTERN,
        ws(image="Nginx:1.27"),
    ),
    Case(
        "shell-image",
        "shell metacharacters in the image (nginx; rm -rf /)",
        "rejected",
        _IMAGE_PATTERN,
        ws(image="nginx; rm -rf /"),
    ),
    Case(
        "long-image",
        "image reference of 606 characters",
        "rejected",
        "spec.image: Too long: may not be more than 512 bytes",
        ws(image="nginx:" + "a" * 600),
    ),
    Case(
        "short-digest",
        "digest too short to be one (nginx@sha256:abc)",
        "rejected",
        _IMAGE_PATTERN,
        ws(image="nginx@sha256:abc"),
    ),
    Case(
        "negative-replicas",
        "replicas -1",
        "rejected",
        "spec.replicas in body should be greater than or equal to 0",
        ws(image="nginx", replicas=-1),
    ),
    Case(
        "too-many-replicas",
        "replicas 1001 (a typo for 100?)",
        "rejected",
        "spec.replicas in body should be less than or equal to 1000",
        ws(image="nginx", replicas=1001),
    ),
    Case(
        "string-replicas",
        'replicas "three"',
        "rejected",
        "spec.replicas in body must be of type integer",
        ws(image="nginx", replicas="three"),
    ),
    Case(
        "float-replicas",
        "replicas 1.5",
        "rejected",
        "spec.replicas in body must be of type integer",
        ws(image="nginx", replicas=1.5),
    ),
    Case(
        "port-zero",
        "port 0",
        "rejected",
        "spec.port in body should be greater than or equal to 1",
        ws(image="nginx", port=0),
    ),
    Case(
        "port-too-big",
        "port 70000",
        "rejected",
        "spec.port in body should be less than or equal to 65535",
        ws(image="nginx", port=70000),
    ),
    Case(
        "nodeport-low",
        "nodePort 80 (below the NodePort range)",
        "rejected",
        "spec.nodePort in body should be greater than or equal to 30000",
        ws(image="nginx", nodePort=80),
    ),
    Case(
        "nodeport-high",
        "nodePort 40000 (above the NodePort range)",
        "rejected",
        "spec.nodePort in body should be less than or equal to 32767",
        ws(image="nginx", nodePort=40000),
    ),
    Case(
        "bad-quantity",
        'cpu request "lots"',
        "rejected",
        "spec.resources.requests.cpu in body should match",
        ws(image="nginx", resources={"requests": {"cpu": "lots"}}),
    ),
    Case(
        "long-quantity",
        "cpu request of 71 digits",
        "rejected",
        "spec.resources.requests.cpu: Too long: may not be more than 64 bytes",
        ws(image="nginx", resources={"requests": {"cpu": "1" + "0" * 70}}),
    ),
    Case(
        "request-above-limit",
        "cpu request 2 with limit 1",
        "rejected",
        "resources.requests must not exceed resources.limits for the same resource (pods could not be created): "
        "lower the request or raise the limit",
        ws(image="nginx", resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
    ),
    Case(
        "many-resources",
        "17 resource names in requests",
        "rejected",
        "spec.resources.requests: Too many: 17: must have at most 16 items",
        ws(image="nginx", resources={"requests": {f"example.com/r{i}": 1 for i in range(17)}}),
    ),
    Case(
        "bad-pull-secret",
        "imagePullSecrets name Bad_Name",
        "rejected",
        "spec.imagePullSecrets[0].name in body should match",
        ws(image="nginx", imagePullSecrets=[{"name": "Bad_Name"}]),
    ),
    Case(
        "duplicate-pull-secret",
        "the same imagePullSecret twice",
        "rejected",
        'spec.imagePullSecrets[1]: Duplicate value: {"name":"a"}',
        ws(image="nginx", imagePullSecrets=[{"name": "a"}, {"name": "a"}]),
    ),
    Case(
        "many-pull-secrets",
        "17 imagePullSecrets",
        "rejected",
        "spec.imagePullSecrets: Too many: 17: must have at most 16 items",
        ws(image="nginx", imagePullSecrets=[{"name": f"s{i}"} for i in range(17)]),
    ),
    Case(
        "unknown-field",
        "a field the CRD does not have (spec.foo) with kubectl's default strict validation",
        "rejected",
        'strict decoding error: unknown field "spec.foo"',
        ws(image="nginx", foo="bar"),
    ),
    Case(
        "cap-all",
        "capabilities.add [ALL] (root on the node in a namespace without a Pod Security label)",
        "rejected",
        "spec.securityContext.capabilities.add: Forbidden: may only add capabilities the Pod Security baseline level "
        "allows",
        ws(image="nginx", securityContext={"capabilities": {"add": ["ALL"]}}),
    ),
    Case(
        "cap-sys-admin",
        "capabilities.add [NET_BIND_SERVICE, SYS_ADMIN]",
        "rejected",
        "spec.securityContext.capabilities.add: Forbidden: may only add capabilities the Pod Security baseline level "
        "allows",
        ws(image="nginx", securityContext={"capabilities": {"add": ["NET_BIND_SERVICE", "SYS_ADMIN"]}}),
    ),
    Case(
        "cap-sys-module",
        "capabilities.add [SYS_MODULE]",
        "rejected",
        "spec.securityContext.capabilities.add: Forbidden: may only add capabilities the Pod Security baseline level "
        "allows",
        ws(image="nginx", securityContext={"capabilities": {"add": ["SYS_MODULE"]}}),
    ),
    Case(
        "seccomp-unconfined",
        "seccompProfile.type Unconfined",
        "rejected",
        "spec.securityContext.seccompProfile.type: Forbidden: Unconfined is beyond the Pod Security baseline level",
        ws(image="nginx", securityContext={"seccompProfile": {"type": "Unconfined"}}),
    ),
    Case(
        "probe-path-relative",
        "health.path healthz (not an absolute path)",
        "rejected",
        "spec.health.path in body should match",
        ws(image="nginx", health={"path": "healthz"}),
    ),
    Case(
        "probe-path-space",
        'health.path "/a b" (a space)',
        "rejected",
        "spec.health.path in body should match",
        ws(image="nginx", health={"path": "/a b"}),
    ),
    Case(
        "probe-path-url",
        "health.path http://169.254.169.254/ (another host)",
        "rejected",
        "spec.health.path in body should match",
        ws(image="nginx", health={"path": "http://169.254.169.254/"}),
    ),
    Case(
        "probe-path-long",
        "health.path of 1025 characters",
        "rejected",
        "spec.health.path: Too long: may not be more than 1024 bytes",
        ws(image="nginx", health={"path": "/" + "a" * 1024}),
    ),
    Case(
        "probe-host",
        "health.host set (probes may not name a host)",
        "rejected",
        'strict decoding error: unknown field "spec.health.host"',
        ws(image="nginx", health={"host": "169.254.169.254"}),
    ),
    Case(
        "probe-exec",
        "readiness.exec set (only HTTP GET probes)",
        "rejected",
        'strict decoding error: unknown field "spec.health.readiness.exec"',
        ws(image="nginx", health={"readiness": {"exec": {"command": ["cat", "/etc/shadow"]}}}),
    ),
    Case(
        "probe-period-zero",
        "readiness.periodSeconds 0",
        "rejected",
        "spec.health.readiness.periodSeconds in body should be greater than or equal to 1",
        ws(image="nginx", health={"readiness": {"periodSeconds": 0}}),
    ),
    Case(
        "probe-period-long",
        "liveness.periodSeconds 301",
        "rejected",
        "spec.health.liveness.periodSeconds in body should be less than or equal to 300",
        ws(image="nginx", health={"liveness": {"periodSeconds": 301}}),
    ),
    Case(
        "probe-timeout-zero",
        "readiness.timeoutSeconds 0",
        "rejected",
        "spec.health.readiness.timeoutSeconds in body should be greater than or equal to 1",
        ws(image="nginx", health={"readiness": {"timeoutSeconds": 0}}),
    ),
    Case(
        "probe-timeout-long",
        "liveness.timeoutSeconds 61",
        "rejected",
        "spec.health.liveness.timeoutSeconds in body should be less than or equal to 60",
        ws(image="nginx", health={"liveness": {"timeoutSeconds": 61}}),
    ),
    Case(
        "probe-threshold-zero",
        "liveness.failureThreshold 0",
        "rejected",
        "spec.health.liveness.failureThreshold in body should be greater than or equal to 1",
        ws(image="nginx", health={"liveness": {"failureThreshold": 0}}),
    ),
    Case(
        "probe-threshold-big",
        "startup.failureThreshold 121",
        "rejected",
        "spec.health.startup.failureThreshold in body should be less than or equal to 120",
        ws(image="nginx", health={"startup": {"failureThreshold": 121}}),
    ),
    Case(
        "probe-delay-negative",
        "startup.initialDelaySeconds -1",
        "rejected",
        "spec.health.startup.initialDelaySeconds in body should be greater than or equal to 0",
        ws(image="nginx", health={"startup": {"initialDelaySeconds": -1}}),
    ),
    Case(
        "probe-delay-long",
        "readiness.initialDelaySeconds 3601",
        "rejected",
        "spec.health.readiness.initialDelaySeconds in body should be less than or equal to 3600",
        ws(image="nginx", health={"readiness": {"initialDelaySeconds": 3601}}),
    ),
    Case(
        "probe-enabled-string",
        'readiness.enabled "no"',
        "rejected",
        "spec.health.readiness.enabled in body must be of type boolean",
        ws(image="nginx", health={"readiness": {"enabled": "no"}}),
    ),
    Case("no-spec", "no spec at all", "rejected", "spec: Required value", ws(spec=None)),
    Case("string-spec", 'spec: "hello"', "rejected", "spec in body must be of type object", ws(spec="hello")),
    Case(
        "digit-name",
        "name 1web (a DNS subdomain, not a DNS-1035 label)",
        "rejected",
        "metadata.name must be a DNS-1035 label of at most 63 characters (lowercase letters, digits and '-', "
        "starting with a letter, ending with a letter or digit): it names the WebServer's Service and is used as a "
        "label value; rename the WebServer",
        ws("1web", image="nginx"),
    ),
    Case(
        "dotted-name",
        "name web.server",
        "rejected",
        "metadata.name must be a DNS-1035 label",
        ws("web.server", image="nginx"),
    ),
    Case(
        "long-name",
        "name of 71 characters",
        "rejected",
        "metadata.name must be a DNS-1035 label",
        ws("w" + "a" * 70, image="nginx"),
    ),
    Case(
        "huge-annotation",
        "a 300 kB annotation",
        "rejected",
        "metadata.annotations: Too long: may not be more than 262144 bytes",
        ws(metadata={"annotations": {"big": "a" * 300_000}}, image="nginx"),
    ),
    Case(
        "scale-too-far",
        "`kubectl scale --replicas=2000` through the scale subresource",
        "rejected",
        "spec.replicas in body should be less than or equal to 1000",
        ws(image="nginx", replicas=1),
        action="scale-2000",
    ),
    Case(
        "null-image-patch",
        "merge patch that removes the image of an existing WebServer",
        "rejected",
        "spec.image: Required value",
        ws(image="nginx", replicas=1),
        action="patch-null-image",
    ),
    Case(
        "negative-cpu",
        'cpu request "-1" (passes the quantity pattern)',
        "condition",
        "the API server rejected Deployment web",
        ws(image="nginx", resources={"requests": {"cpu": "-1"}}),
        reason="DeploymentInvalid",
        status="False",
    ),
    Case(
        "extended-resource-without-limit",
        "request of an extended resource (example.com/widget) without a limit",
        "condition",
        "Limit must be set for non overcommitable resources",
        ws(image="nginx", resources={"requests": {"example.com/widget": 1}}),
        reason="DeploymentInvalid",
        status="False",
    ),
    Case(
        "bad-resource-name",
        'resource name "bad key!"',
        "condition",
        "must be a standard resource",
        ws(image="nginx", resources={"requests": {"bad key!": 1}}),
        reason="DeploymentInvalid",
        status="False",
    ),
    Case(
        "nodeport-taken",
        "nodePort already held by another Service",
        "condition",
        "provided port is already allocated",
        ws(image="nginx"),
        action="nodeport-taken",
        reason="ServiceInvalid",
        status="False",
    ),
    Case(
        "nodeport-changed-to-taken",
        "nodePort of a running WebServer changed to one another Service holds",
        "condition",
        "provided port is already allocated",
        ws(image="nginx"),
        action="nodeport-changed-to-taken",
        reason="ServiceInvalid",
        status="False",
    ),
    Case(
        "foreign-deployment",
        "a Deployment of the same name that the operator did not create",
        "condition",
        "it was not created by webserver-operator; the operator will not modify it",
        ws(image="nginx"),
        action="foreign-deployment",
        reason="DeploymentConflict",
        status="False",
    ),
    Case(
        "foreign-service",
        "a Service of the same name that the operator did not create",
        "condition",
        "it was not created by webserver-operator; the operator will not modify it",
        ws(image="nginx"),
        action="foreign-service",
        reason="ServiceConflict",
        status="False",
    ),
    Case(
        "foreign-controlled",
        "a Deployment of the same name with the operator's labels, controlled by a ConfigMap",
        "condition",
        "it is controlled by ConfigMap/owner",
        ws(image="nginx"),
        action="foreign-controlled",
        reason="DeploymentConflict",
        status="False",
    ),
    Case(
        "cap-stored-before-crd",
        "capabilities.add [SYS_ADMIN] stored before the CRD refused it",
        "condition",
        'the WebServer asks for pods beyond the Pod Security baseline level: non-default capabilities (container "web" '
        'must not include "SYS_ADMIN" in securityContext.capabilities.add). Nothing was written to its Deployment',
        ws(image="nginx", securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
        action="stored-before-crd",
        reason="ExceedsPodSecurityBaseline",
        status="False",
    ),
    Case(
        "cap-net-bind-service",
        "capabilities.add [NET_BIND_SERVICE] (within baseline)",
        "ready",
        "the Deployment's container adds NET_BIND_SERVICE",
        ws(image="nginx", securityContext={"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}),
        action="baseline-capability",
    ),
    Case(
        "tiny-quantity",
        "cpu request 0.5n (the API server stores 1n in the Deployment)",
        "ready",
        "no write while the pods are deleted and come back",
        ws(image="nginx", resources={"requests": {"cpu": "0.5n"}}),
        action="delete-pods-quiet",
    ),
    Case(
        "huge-quantity",
        "cpu request 1e30 (beyond what a quantity holds)",
        "ready",
        "no write while the pods are deleted and come back",
        ws(image="nginx", resources={"requests": {"cpu": "1e30"}}),
        action="delete-pods-quiet",
    ),
    Case(
        "faked-status",
        "status written by someone else (observedGeneration 99, Ready=True reason Faked)",
        "ready",
        "the operator writes the true status back",
        ws(image="nginx"),
        action="fake-status",
    ),
    Case(
        "foreign-finalizer",
        "deleted while another controller's finalizer holds it",
        "ready",
        "the operator writes nothing to a WebServer being deleted",
        ws(image="nginx"),
        action="finalizer-delete",
    ),
)

_NO_CLUSTER = ("--health-probe-bind-address=127.0.0.1:0", "--metrics-bind-address=0")

SETTINGS: tuple[SettingCase, ...] = (
    SettingCase(
        "workers-zero",
        "--workers=0",
        ("--workers=0",),
        message="invalid setting workers (--workers / WEBSERVER_OPERATOR_WORKERS): Input should be greater "
        "than or equal to 1 (got '0')",
    ),
    SettingCase(
        "workers-text",
        "--workers=many",
        ("--workers=many",),
        message="invalid setting workers (--workers / WEBSERVER_OPERATOR_WORKERS): Input should be a valid integer",
    ),
    SettingCase(
        "workers-env",
        "WEBSERVER_OPERATOR_WORKERS=0 in the environment",
        env=(("WEBSERVER_OPERATOR_WORKERS", "0"),),
        message="invalid setting workers (--workers / WEBSERVER_OPERATOR_WORKERS): Input should be greater "
        "than or equal to 1",
    ),
    SettingCase(
        "pod-security-level",
        "--pod-security-level=restricted (not a level the operator offers)",
        ("--pod-security-level=restricted",),
        message="invalid setting pod_security_level (--pod-security-level / WEBSERVER_OPERATOR_POD_SECURITY_LEVEL): "
        "Input should be 'baseline' or 'privileged'",
    ),
    SettingCase(
        "lease-shorter-than-renew",
        "--lease-duration=5 with the default renew deadline 10",
        ("--lease-duration=5",),
        message="renew_deadline (10.0s) must be shorter than lease_duration (5.0s)",
    ),
    SettingCase(
        "retry-too-long",
        "--retry-period=9 with the default renew deadline 10",
        ("--retry-period=9",),
        message="retry_period (9.0s) must be shorter than renew_deadline (10.0s) by more than its 20% jitter",
    ),
    SettingCase(
        "bad-namespace",
        "--namespaces=Bad_NS",
        ("--namespaces=Bad_NS",),
        message="invalid setting namespaces (--namespaces / WEBSERVER_OPERATOR_NAMESPACES): 'Bad_NS' is not a "
        "namespace name",
    ),
    SettingCase(
        "bind-without-port",
        "--metrics-bind-address=localhost",
        ("--metrics-bind-address=localhost",),
        message="'localhost' is not a bind address: use HOST:PORT or :PORT",
    ),
    SettingCase(
        "bind-port-range",
        "--health-probe-bind-address=:99999",
        ("--health-probe-bind-address=:99999",),
        message="':99999' is not a bind address",
    ),
    SettingCase(
        "watch-timeout-short",
        "--watch-timeout=5",
        ("--watch-timeout=5",),
        message="invalid setting watch_timeout (--watch-timeout / WEBSERVER_OPERATOR_WATCH_TIMEOUT): Input "
        "should be greater than or equal to 10",
    ),
    SettingCase(
        "read-timeout-zero",
        "--read-timeout=0",
        ("--read-timeout=0",),
        message="invalid setting read_timeout (--read-timeout / WEBSERVER_OPERATOR_READ_TIMEOUT): Input should "
        "be greater than 0",
    ),
    SettingCase(
        "qps-infinite",
        "--qps=inf",
        ("--qps=inf",),
        message="invalid setting qps (--qps / WEBSERVER_OPERATOR_QPS): must be a finite number",
    ),
    SettingCase(
        "log-level",
        "--log-level=VERBOSE",
        ("--log-level=VERBOSE",),
        message="invalid setting log_level (--log-level / WEBSERVER_OPERATOR_LOG_LEVEL): Input should be "
        "'DEBUG', 'INFO', 'WARNING' or 'ERROR'",
    ),
    SettingCase(
        "drain-negative",
        "--drain-timeout=-1",
        ("--drain-timeout=-1",),
        message="invalid setting drain_timeout (--drain-timeout / WEBSERVER_OPERATOR_DRAIN_TIMEOUT): Input "
        "should be greater than or equal to 0",
    ),
    SettingCase(
        "resync-short",
        "--resync-period=10",
        ("--resync-period=10",),
        message="invalid setting resync_period (--resync-period / WEBSERVER_OPERATOR_RESYNC_PERIOD): Input "
        "should be greater than or equal to 60",
    ),
    SettingCase(
        "lease-name",
        "--leader-election-id=Leader_Lock (not a DNS-1123 subdomain)",
        ("--leader-election-id=Leader_Lock",),
        message="invalid setting leader_election_id (--leader-election-id / WEBSERVER_OPERATOR_LEADER_ELECTION_ID): "
        "'Leader_Lock' is not a Lease name: use a DNS-1123 subdomain",
    ),
    SettingCase(
        "lease-namespace",
        "--leader-election-namespace=Ops_NS (not a DNS-1123 label)",
        ("--leader-election-namespace=Ops_NS",),
        message="invalid setting leader_election_namespace (--leader-election-namespace / "
        "WEBSERVER_OPERATOR_LEADER_ELECTION_NAMESPACE): 'Ops_NS' is not a namespace name: use a DNS-1123 label",
    ),
    SettingCase(
        "loop-lag-short",
        "--max-loop-lag=1 (liveness would flap)",
        ("--max-loop-lag=1",),
        message="invalid setting max_loop_lag (--max-loop-lag / WEBSERVER_OPERATOR_MAX_LOOP_LAG): must be a number "
        "of seconds of at least 2: the event loop's heartbeat ticks every 0.5 s",
    ),
    SettingCase(
        "stall-timeout-tiny",
        "--watch-stall-timeout=0.01 (watches reopened in a loop)",
        ("--watch-stall-timeout=0.01",),
        message="invalid setting watch_stall_timeout (--watch-stall-timeout / WEBSERVER_OPERATOR_WATCH_STALL_TIMEOUT): "
        "must be a number of seconds of at least 1: a shorter stall timeout restarts watches in a loop",
    ),
    SettingCase("typo-flag", "--wrokers=3 (a typo)", ("--wrokers=3",), message="unrecognized arguments: --wrokers=3"),
    SettingCase(
        "missing-kubeconfig",
        "--kubeconfig=/nonexistent",
        ("--kubeconfig=/nonexistent", *_NO_CLUSTER),
        message="no kubeconfig at /nonexistent and not running in a cluster: set KUBECONFIG or --kubeconfig",
    ),
    SettingCase(
        "missing-context",
        "--context=nope with a valid kubeconfig",
        ("--context=nope", *_NO_CLUSTER),
        message="context 'nope' not found in kubeconfig",
    ),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """docs/bad-input.md."""
    lines = [
        "# Bad input: what happens to malformed or hostile WebServers and settings",
        "",
        "Every row is asserted by `tests/integration/test_bad_input.py` against the real API server with the operator",
        "running (`make test`): the API server's or the operator's message contains the text shown, the operator",
        "neither crashes (no traceback on its stderr, still alive) nor hot-loops (no write, and a bounded number of",
        "requests, in a quiet window after the rows settle, counted from the API server's audit log).",
        "Generated from `tests/support/bad_input.py` (`python -m tests.support.bad_input`); a unit test fails when",
        "this page is stale.",
        "",
        "## WebServers",
        "",
        "| # | input | outcome | message (contains) |",
        "| --- | --- | --- | --- |",
    ]
    for n, case in enumerate(CASES, 1):
        if case.outcome == "rejected":
            outcome = "rejected by the API server"
        elif case.outcome == "condition":
            outcome = f"accepted; `Ready={case.status}`, reason `{case.reason}`"
        else:
            outcome = "accepted and served"
        lines.append(f"| {n} | {_cell(case.what)} | {outcome} | {_cell(case.message)} |")
    lines += [
        "",
        "## Settings (`webserver-operator run`)",
        "",
        "Each exits with code 2 before doing anything, printing the message.",
        "",
        "| # | setting | message (contains) |",
        "| --- | --- | --- |",
    ]
    for n, setting in enumerate(SETTINGS, 1):
        lines.append(f"| {n} | {_cell(setting.what)} | {_cell(setting.message)} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    DOC.write_text(render())
    print(f"wrote {DOC}", file=sys.stderr)
