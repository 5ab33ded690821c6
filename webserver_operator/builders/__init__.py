"""Pure builders: a WebServer in, the Deployment, Service, labels and owner reference it should have out.

Why pure: no I/O and no client library here, so the objects the operator writes are unit-tested without a server and
every reconcile computes exactly the same desired state from the same WebServer. The submodules hold one concern each;
this package re-exports their public names. Called by the reconciler (``reconcile.reconciler``), which compares what
they return with the live children (``reconcile.owned``).
"""

from webserver_operator.builders.deployment import desired_container, desired_deployment
from webserver_operator.builders.labels import (
    CHILD_LABEL_SELECTOR,
    COMPONENT_LABEL,
    COMPONENT_VALUE,
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
    NAME_VALUE,
    child_labels,
    selector_labels,
    selector_string,
)
from webserver_operator.builders.names import CONTAINER_NAME, PORT_NAME, child_name
from webserver_operator.builders.ownership import owner_reference
from webserver_operator.builders.service import desired_service, desired_service_port

__all__ = [
    "CHILD_LABEL_SELECTOR",
    "COMPONENT_LABEL",
    "COMPONENT_VALUE",
    "CONTAINER_NAME",
    "INSTANCE_LABEL",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "NAME_LABEL",
    "NAME_VALUE",
    "PORT_NAME",
    "child_labels",
    "child_name",
    "desired_container",
    "desired_deployment",
    "desired_service",
    "desired_service_port",
    "owner_reference",
    "selector_labels",
    "selector_string",
]
