"""Whether a WebServer's Service selects its pods, judged from the user's side (what `kubectl get` shows).

Shared by the benchmark's equivalence check (bench/checks.py) and the chaos harness's convergence check
(chaos/observe.py), which both spell the operator's contract out themselves instead of importing its builders. The
Service must select the WebServer's pod selector (``app.kubernetes.io/name`` and ``instance``); webserver-operator
also selects the preStop-pause label its newer pods carry (``reconcile.handover``), and an operator without it selects
the pod selector alone. Both reach the same pods, so any extra key is accepted only when the Deployment's pod
template carries it with that value.
"""

from __future__ import annotations

from typing import Any

__all__ = ["selects_the_pods"]


def selects_the_pods(service_selector: dict[str, str], pod_selector: dict[str, str], deployment: Any) -> bool:
    """Whether ``service_selector`` is ``pod_selector`` plus only labels ``deployment``'s pod template carries."""
    if not service_selector.items() >= pod_selector.items():
        return False
    template = ((deployment or {}).get("spec") or {}).get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in service_selector.items() - pod_selector.items())
