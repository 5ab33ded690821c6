"""Labels of the children, and the selector that ties the Service and the Deployment to the pods.

Why two sets: the *selector* is ``{name, instance}`` only, because a Deployment's ``spec.selector`` is immutable and
must never change for the life of a WebServer (so nothing that can change, such as an image or version, is in it).
The full *child labels* add ``managed-by`` (which label-filtered informers use to watch only our children, see
``CHILD_LABEL_SELECTOR``) and ``component``. All keys are the recommended ``app.kubernetes.io/*`` labels, so
dashboards and ``kubectl get -l`` work without knowing this operator.

Used by the other builders, ``reconcile.setup`` (the informers' label selector, and ``orphan_of`` as the orphan
rule of the child watches), ``reconcile.reconciler`` (adoption) and ``reconcile.status`` (``status.selector``).
"""

from typing import Any

NAME_LABEL = "app.kubernetes.io/name"
NAME_VALUE = "webserver"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "webserver-operator"
COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT_VALUE = "web-server"

CHILD_LABEL_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
"""Label selector (string form) for informers that watch only the Deployments and Services this operator manages."""


def selector_labels(name: str) -> dict[str, str]:
    """The immutable pod selector of the WebServer ``name`` (Deployment ``matchLabels`` and Service ``selector``)."""
    return {NAME_LABEL: NAME_VALUE, INSTANCE_LABEL: name}


def selector_string(name: str) -> str:
    """The selector in string form (``k=v,k=v``, keys sorted): ``status.selector`` and the scale labelSelectorPath."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector_labels(name).items()))


def orphan_of(obj: dict[str, Any]) -> str | None:
    """The WebServer a child with our labels belongs to by its instance label, or None when it has not got them.

    The adoption rule, in one place: a child left without a controller by ``kubectl delete --cascade=orphan`` keeps
    our labels, so it wakes (``reconcile.setup``) and is adopted by (``reconcile.reconciler``) the WebServer its
    ``app.kubernetes.io/instance`` label names. Only for objects without a controller reference.
    """
    labels = (obj.get("metadata") or {}).get("labels") or {}
    instance = labels.get(INSTANCE_LABEL)
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE or not isinstance(instance, str) or not instance:
        return None
    return instance


def child_labels(name: str) -> dict[str, str]:
    """All labels the operator sets on its children and on the pod template of the WebServer ``name``."""
    return {
        **selector_labels(name),
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        COMPONENT_LABEL: COMPONENT_VALUE,
    }
