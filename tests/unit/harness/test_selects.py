"""Whether a Service selects a WebServer's pods, as the benchmark and the chaos harness judge it."""

from __future__ import annotations

from typing import Any

from harness.selects import selects_the_pods

PODS = {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "web"}
LABEL = {"webserver-operator.dev/pre-stop-pause": "true"}


def deployment(labels: dict[str, str] | None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {}}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return {"spec": {"template": template}}


def test_the_pod_selector_alone_selects_the_pods() -> None:
    assert selects_the_pods(PODS, PODS, deployment(None))
    assert selects_the_pods(PODS, PODS, None)


def test_an_extra_label_only_when_the_pod_template_carries_it() -> None:
    assert selects_the_pods({**PODS, **LABEL}, PODS, deployment({**PODS, **LABEL}))
    assert not selects_the_pods({**PODS, **LABEL}, PODS, deployment(PODS))
    assert not selects_the_pods({**PODS, "webserver-operator.dev/pre-stop-pause": "false"}, PODS, deployment(LABEL))


def test_a_selector_without_the_pod_selector_does_not() -> None:
    assert not selects_the_pods(LABEL, PODS, deployment({**PODS, **LABEL}))
    assert not selects_the_pods({**PODS, "app.kubernetes.io/instance": "other"}, PODS, deployment(PODS))
