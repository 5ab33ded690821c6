"""The API server's own request counter, ``apiserver_request_total``, summed by verb and resource.

Why next to the audit log: the counter is what a cluster's monitoring shows, for every client at once (controllers,
kwok and the operator together), so a steady-state window that stays flat here is flat for the whole control plane.
The audit log says which client sent what.
"""

from __future__ import annotations

from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from harness.kubeapi import KubeApi

RESOURCES = frozenset({"webservers", "deployments", "services", "events"})


def request_totals(metrics_text: str) -> Counter[str]:
    """``verb resource[/subresource]`` -> requests, for the resources the operators touch."""
    totals: Counter[str] = Counter()
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            resource = sample.labels.get("resource", "")
            if resource not in RESOURCES:
                continue
            if sample.labels.get("subresource"):
                resource += "/" + sample.labels["subresource"]
            totals[f"{sample.labels.get('verb', '').lower()} {resource}"] += int(sample.value)
    return totals


async def snapshot(api: KubeApi) -> Counter[str]:
    return request_totals(await api.text("/metrics"))


def delta(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    changed = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    return dict(sorted(changed.items(), key=lambda kv: -kv[1]))
