"""Which fields of a child the operator owns, whether they drifted, and the patch that puts them back.

Why not send the whole desired object: the API server adds defaults (``imagePullPolicy``, ``strategy``,
``clusterIP``, an allocated ``nodePort``...) and other actors add their own labels, annotations, sidecars and
``kubectl rollout restart`` stamps. Comparing or overwriting whole objects would either see drift forever (a write
every reconcile) or wipe what others own. So the operator owns a short, explicit list of fields, compares only those
after normalising server defaults (a missing ``protocol`` is ``TCP``, ``0.5`` cpu is ``500m``), and writes only what
differs:

``merge_owned_deployment`` / ``merge_owned_service`` return a copy of the *live* object with only the owned fields
set from *desired*, and only where they differ, so an unchanged field keeps the live value byte for byte. The copy is
made along the paths it changes (each dict or list on the way is copied before it is written); everything else is
shared with *live* (the cache's object) and *desired* (built fresh for this reconcile), neither of which is ever
written. A deep copy of the whole live object per child and reconcile was 4% of the operator's CPU in a profiled bulk
create, for objects whose owned fields are a handful of keys. The
reconciler hands ``(live, merged)`` to ``core.jsondiff.compare``, which says what drifted and builds the merge patch
(with ``metadata.resourceVersion``, so a write based on a stale cache fails with 409 and is retried from fresh state).

Owned, Deployment: our label keys (metadata and pod template), our controller ownerReference, ``spec.replicas``, and
in the container named ``web`` its ``image``, ``ports``, ``resources`` and (while the WebServer sets it)
``securityContext``, plus the pod's ``imagePullSecrets``,
``automountServiceAccountToken: false`` and ``enableServiceLinks: false``. Adopting an orphan enforces exactly these;
what someone else set on it (``serviceAccountName``, volumes, a securityContext) stays, as on any child: whoever can
edit the Deployment could set those anyway, so adoption grants nothing new.
Owned, Service: our label keys, our ownerReference, ``spec.type``, ``spec.selector`` and ``spec.ports`` (one ``http``
port; an allocated ``nodePort`` is kept unless the WebServer asks for a specific one). Everything else is someone
else's. A Deployment's ``spec.selector`` is immutable, so it is never patched: ``selector_mismatch`` reports it.

Called by ``reconcile.reconciler`` for each child; hands ``(live, merged)`` on to ``core.jsondiff.compare``.
"""

from typing import Any, Final

from webserver_operator.core.quantity import MILLI, quantities_equal
from webserver_operator.core.vocabulary import KubeObject, controller_of
from webserver_operator.desired import CONTAINER_NAME, template_revision_of

__all__ = ["merge_owned_budget", "merge_owned_deployment", "merge_owned_service", "selector_mismatch"]

_DEFAULT_PROTOCOL: Final = "TCP"
_DEFAULT_REPLICAS: Final = 1
_DEFAULT_SERVICE_TYPE: Final = "ClusterIP"
_RESOURCE_LISTS: Final = ("limits", "requests")
_BUDGET_FIELDS: Final = ("maxUnavailable", "selector", "unhealthyPodEvictionPolicy")
_DEFAULT_GRACE_SECONDS: Final = 30
_PROBES: Final = ("readinessProbe", "livenessProbe", "startupProbe")
_PROBE_DEFAULTS: Final = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
#: The first template revision with probes, preStop, grace period and strategy (``desired.TEMPLATE_REVISIONS``).
_AVAILABILITY_REVISION: Final = 2
#: Pod fields that would hand the pods more than the WebServer asks for; enforced like any owned field.
_POD_PRIVILEGE_FIELDS: Final = ("automountServiceAccountToken", "enableServiceLinks")


# --- merging owned fields --------------------------------------------------------------------------------------------


def merge_owned_deployment(live: KubeObject, desired: KubeObject) -> KubeObject:
    """A copy of ``live`` with the operator-owned Deployment fields set from ``desired`` where they differ.

    Raises ValueError when ``live`` is controlled by another owner (the reconciler checks ownership first: a foreign
    object is reported, never overwritten).
    """
    merged = dict(live)
    _merge_metadata(merged, desired)
    want_spec = desired.get("spec") or {}
    spec = _child(merged, "spec")

    want_replicas = want_spec.get("replicas", _DEFAULT_REPLICAS)
    if spec.get("replicas", _DEFAULT_REPLICAS) != want_replicas:
        spec["replicas"] = want_replicas
    revised = template_revision_of(desired) >= _AVAILABILITY_REVISION
    if revised:
        _merge_rollout(spec, want_spec)

    want_template = want_spec.get("template") or {}
    template = _child(spec, "template")
    _merge_labels(template, (want_template.get("metadata") or {}).get("labels") or {})
    _merge_pod_spec(_child(template, "spec"), want_template.get("spec") or {}, revised=revised)
    return merged


def _merge_rollout(spec: KubeObject, want: KubeObject) -> None:
    """Revision 2's Deployment fields: the strategy and ``minReadySeconds``, compared with the server's defaults."""
    if _normalise_strategy(spec.get("strategy")) != _normalise_strategy(want.get("strategy")):
        spec["strategy"] = want.get("strategy")
    if (spec.get("minReadySeconds") or 0) != (want.get("minReadySeconds") or 0):
        spec["minReadySeconds"] = want.get("minReadySeconds") or 0


def _normalise_strategy(strategy: dict[str, Any] | None) -> tuple[Any, ...]:
    """A strategy as the API server defaults it: RollingUpdate with 25% / 25% unless set (Recreate has no numbers)."""
    strategy = strategy or {}
    kind = strategy.get("type") or "RollingUpdate"
    if kind != "RollingUpdate":
        return (kind,)
    rolling = strategy.get("rollingUpdate") or {}
    return (kind, rolling.get("maxUnavailable", "25%"), rolling.get("maxSurge", "25%"))


def merge_owned_service(live: KubeObject, desired: KubeObject) -> KubeObject:
    """A copy of ``live`` with the operator-owned Service fields set from ``desired`` where they differ.

    Raises ValueError when ``live`` is controlled by another owner (see ``merge_owned_deployment``).
    """
    merged = dict(live)
    _merge_metadata(merged, desired)
    want_spec = desired.get("spec") or {}
    spec = _child(merged, "spec")

    if (spec.get("type") or _DEFAULT_SERVICE_TYPE) != want_spec.get("type", _DEFAULT_SERVICE_TYPE):
        spec["type"] = want_spec["type"]
    want_selector = want_spec.get("selector") or {}
    if (spec.get("selector") or {}) != want_selector:
        spec["selector"] = want_selector
    ports = _merge_service_ports(spec.get("ports") or [], want_spec.get("ports") or [])
    if ports != (spec.get("ports") or []):
        spec["ports"] = ports
    return merged


def merge_owned_budget(live: KubeObject, desired: KubeObject) -> KubeObject:
    """A copy of ``live`` with the operator-owned PodDisruptionBudget fields set from ``desired`` where they differ.

    Owned: our labels and ownerReference, ``spec.selector``, ``spec.maxUnavailable`` (a ``minAvailable`` set beside it
    is removed: the two exclude each other) and ``spec.unhealthyPodEvictionPolicy``. Raises ValueError for a budget
    controlled by someone else (see ``merge_owned_deployment``).
    """
    merged = dict(live)
    _merge_metadata(merged, desired)
    want_spec = desired.get("spec") or {}
    spec = live.get("spec") or {}
    drift = {key: want_spec.get(key) for key in _BUDGET_FIELDS if spec.get(key) != want_spec.get(key)}
    if spec.get("minAvailable") is not None:
        drift["minAvailable"] = None
    if drift:
        spec = _child(merged, "spec")
        for key, value in drift.items():
            _set_or_drop(spec, key, value)
    return merged


def selector_mismatch(live: KubeObject, desired: KubeObject) -> bool:
    """Whether the live Deployment's (immutable) ``spec.selector`` differs from the desired one.

    A mismatch cannot be patched: the Deployment has to be deleted and recreated, or reported.
    """
    return _normalise_selector(live) != _normalise_selector(desired)


def _normalise_selector(obj: KubeObject) -> tuple[dict[str, Any], list[Any]]:
    selector = (obj.get("spec") or {}).get("selector") or {}
    return selector.get("matchLabels") or {}, selector.get("matchExpressions") or []


def _merge_metadata(merged: KubeObject, desired: KubeObject) -> None:
    want_meta = desired.get("metadata") or {}
    _merge_labels(merged, want_meta.get("labels") or {})
    _merge_annotations(merged, want_meta.get("annotations") or {})
    want_ref = controller_of(desired)
    if want_ref is not None:
        _merge_owner_reference(merged, want_ref)


def _merge_labels(obj: KubeObject, want: dict[str, str]) -> None:
    """Set our label keys in ``obj.metadata.labels``; other keys are someone else's."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    drifted = {key: value for key, value in want.items() if labels.get(key) != value}
    if drifted:
        _child(_child(obj, "metadata"), "labels").update(drifted)


def _merge_annotations(obj: KubeObject, want: dict[str, str]) -> None:
    """Set our annotation keys (the template revision); other keys are someone else's."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    drifted = {key: value for key, value in want.items() if annotations.get(key) != value}
    if drifted:
        _child(_child(obj, "metadata"), "annotations").update(drifted)


def _merge_owner_reference(obj: KubeObject, want: dict[str, Any]) -> None:
    """Make our controller ownerReference present and exact; other (non-controller) references are kept."""
    current = controller_of(obj)
    if current is not None and current.get("uid") != want.get("uid"):
        name = (obj.get("metadata") or {}).get("name")
        raise ValueError(
            f"{obj.get('kind', 'object')} {name} is controlled by {current.get('kind')} {current.get('name')} "
            f"(uid {current.get('uid')}): refusing to take it over"
        )
    refs = list((obj.get("metadata") or {}).get("ownerReferences") or [])
    for index, ref in enumerate(refs):
        if isinstance(ref, dict) and ref.get("uid") == want.get("uid"):
            if all(ref.get(key) == value for key, value in want.items()):
                return
            refs[index] = want
            break
    else:
        refs.append(want)
    _child(obj, "metadata")["ownerReferences"] = refs


def _merge_pod_spec(pod_spec: KubeObject, want: KubeObject, *, revised: bool = False) -> None:
    want_container = next((c for c in want.get("containers") or [] if c.get("name") == CONTAINER_NAME), None)
    if want_container is not None:
        containers = list(pod_spec.get("containers") or [])
        index = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER_NAME), None)
        if index is None:
            containers.append(want_container)
        else:
            container = dict(containers[index])
            _merge_container(container, want_container)
            if revised:
                _merge_availability(container, want_container)
            if container != containers[index]:
                containers[index] = container
        if containers != pod_spec.get("containers"):
            pod_spec["containers"] = containers
    if revised:
        want_grace = want.get("terminationGracePeriodSeconds", _DEFAULT_GRACE_SECONDS)
        if pod_spec.get("terminationGracePeriodSeconds", _DEFAULT_GRACE_SECONDS) != want_grace:
            pod_spec["terminationGracePeriodSeconds"] = want_grace

    for key in _POD_PRIVILEGE_FIELDS:
        if key in want and pod_spec.get(key) != want[key]:
            pod_spec[key] = want[key]

    want_secrets = want.get("imagePullSecrets") or []
    if _secret_names(pod_spec.get("imagePullSecrets")) != _secret_names(want_secrets):
        if want_secrets:
            pod_spec["imagePullSecrets"] = want_secrets
        else:
            pod_spec.pop("imagePullSecrets", None)


def _merge_container(container: KubeObject, want: KubeObject) -> None:
    """Set image, ports and resources of the ``web`` container; every other container field is left alone."""
    if container.get("image") != want.get("image"):
        container["image"] = want.get("image")
    if _normalise_container_ports(container.get("ports")) != _normalise_container_ports(want.get("ports")):
        _set_or_drop(container, "ports", want.get("ports"))
    if not _resources_equal(container.get("resources"), want.get("resources")):
        _set_or_drop(container, "resources", want.get("resources"))
    # Owned only while the WebServer sets it: otherwise an admission webhook that hardens pods would be fought forever.
    want_security = want.get("securityContext")
    if want_security is not None and container.get("securityContext") != want_security:
        container["securityContext"] = want_security


def _merge_availability(container: KubeObject, want: KubeObject) -> None:
    """Revision 2's container fields: the three probes (set or absent, as ``spec.health`` says) and the preStop pause.

    Compared with the API server's probe defaults filled in (``_normalise_probe``), so a stored probe equals the one
    rendered. Only ``lifecycle.preStop`` is ours: a ``postStart`` someone else set stays.
    """
    for key in _PROBES:
        if _normalise_probe(container.get(key)) != _normalise_probe(want.get(key)):
            _set_or_drop(container, key, want.get(key))
    want_pre_stop = (want.get("lifecycle") or {}).get("preStop")
    lifecycle = container.get("lifecycle") or {}
    if lifecycle.get("preStop") != want_pre_stop:
        lifecycle = {**lifecycle, "preStop": want_pre_stop}
        _set_or_drop(container, "lifecycle", {k: v for k, v in lifecycle.items() if v is not None})


def _normalise_probe(probe: dict[str, Any] | None) -> dict[str, Any] | None:
    """A probe with the API server's defaults made explicit and zero values dropped (``initialDelaySeconds: 0``)."""
    if not probe:
        return None
    normalised = {**_PROBE_DEFAULTS, **{k: v for k, v in probe.items() if v not in (None, 0)}}
    get = normalised.get("httpGet")
    if isinstance(get, dict):
        normalised["httpGet"] = {"scheme": "HTTP", **{k: v for k, v in get.items() if v not in (None, "")}}
    return normalised


def _normalise_container_ports(ports: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Container ports with server defaults made explicit (protocol TCP) and zero values dropped (hostPort 0)."""
    normalised = []
    for port in ports or []:
        entry = {key: value for key, value in port.items() if value not in (None, "", 0)}
        entry.setdefault("protocol", _DEFAULT_PROTOCOL)
        normalised.append(entry)
    return normalised


def _resources_equal(live: dict[str, Any] | None, want: dict[str, Any] | None) -> bool:
    """Resources compared exactly, but with quantities compared by amount and absent == empty."""
    live, want = live or {}, want or {}
    for key in _RESOURCE_LISTS:
        live_list, want_list = live.get(key) or {}, want.get(key) or {}
        if live_list.keys() != want_list.keys():
            return False
        if not all(quantities_equal(live_list[name], want_list[name], resolution=MILLI) for name in want_list):
            return False

    def rest(resources: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in resources.items() if k not in _RESOURCE_LISTS and v not in (None, {}, [])}

    return rest(live) == rest(want)


def _secret_names(secrets: list[dict[str, Any]] | None) -> set[str]:
    return {str(secret.get("name")) for secret in secrets or []}


def _merge_service_ports(live_ports: list[dict[str, Any]], want_ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Service's ports: exactly the desired ones, each built on its live counterpart.

    Building on the live port keeps what is not ours (``appProtocol``) and, above all, the allocated ``nodePort``
    when the WebServer does not ask for a specific one: a merge patch replaces the whole list, and a port entry sent
    without ``nodePort`` would make the API server allocate a new port, breaking every client of the old one.
    """
    by_name = {port.get("name"): port for port in live_ports}
    ports = []
    for want in want_ports:
        base = by_name.get(want.get("name"))
        if base is None and len(live_ports) == 1 and len(want_ports) == 1:
            base = live_ports[0]  # renamed by hand: still the same port, keep its nodePort
        port = dict(base) if base is not None else {}  # only its top-level keys are set below
        for key, value in want.items():
            current = port.get(key, _DEFAULT_PROTOCOL) if key == "protocol" else port.get(key)
            if current != value:
                port[key] = value
        ports.append(port)
    return ports


def _child(obj: KubeObject, key: str) -> KubeObject:
    """A copy of ``obj[key]``, put in its place, to write into; created when missing.

    ``obj`` is itself a copy (the merge's result or a child of it got from here), so the live object is never written.
    Only called on paths that are about to be written.
    """
    value = obj.get(key)
    value = obj[key] = dict(value) if isinstance(value, dict) else {}
    return value


def _set_or_drop(obj: KubeObject, key: str, value: Any) -> None:
    if value:
        obj[key] = value
    else:
        obj.pop(key, None)
