"""The WebServer API as pydantic models: the single source of truth for the CRD schema and for the operator.

Why pydantic and not hand-written OpenAPI: the operator parses the objects it watches with the same models the CRD
schema is generated from (``webserver_operator.api.schema``), so a field, default, range or description can never
mean one thing to the API server and another to the operator. Constraints are expressed with standard pydantic
``Field`` arguments (``ge``/``le``, ``pattern``, ``min_length``/``max_length``) that the schema emitter translates one
to one; Kubernetes-only schema keywords (``x-kubernetes-*``) travel in ``json_schema_extra``.

Field names are snake_case in Python and camelCase on the wire (``alias_generator``); always dump with
``by_alias=True, exclude_none=True`` when building JSON for the API server.

Used by ``desired`` (the children), ``reconcile`` (validation, status) and ``api.crd`` (the schema); hands on typed
WebServers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, WithJsonSchema
from pydantic.alias_generators import to_camel

from webserver_operator.core.podsecurity import BASELINE_CAPABILITIES
from webserver_operator.core.resources import Resource

__all__ = [
    "API_VERSION",
    "BASELINE_RULE_MARKER",
    "CAPABILITY_PATTERN",
    "CATEGORIES",
    "CONDITION_REASON_PATTERN",
    "CONDITION_TYPE_PATTERN",
    "GROUP",
    "IMAGE_MAX_LENGTH",
    "IMAGE_PATTERN",
    "KIND",
    "LIST_KIND",
    "MAX_REPLICAS",
    "MAX_RESOURCES",
    "NAME_MAX_LENGTH",
    "NAME_PATTERN",
    "NODE_PORT_MAX",
    "NODE_PORT_MIN",
    "PLURAL",
    "POD_SECURITY_RULES",
    "PROBE_PATH_MAX_LENGTH",
    "PROBE_PATH_PATTERN",
    "QUANTITY_MAX_LENGTH",
    "QUANTITY_PATTERN",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "WEBSERVERS",
    "Capabilities",
    "Capability",
    "Condition",
    "ConditionStatus",
    "Health",
    "LocalObjectReference",
    "Probe",
    "Quantity",
    "ReadinessProbe",
    "ResourceRequirements",
    "SeccompProfile",
    "SecurityContext",
    "WebServer",
    "WebServerSpec",
    "WebServerStatus",
]

GROUP = "web.webserver-operator.dev"
"""API group: ``<group>.<domain>`` in kubebuilder terms, group ``web`` under the project domain
``webserver-operator.dev`` (a domain the project can register; a Kubernetes API group must be a DNS subdomain that
nobody else uses, so a generic name such as ``example.com`` would collide with other CRDs)."""
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "WebServer"
LIST_KIND = "WebServerList"
PLURAL = "webservers"
SINGULAR = "webserver"
SHORT_NAMES = ("ws",)
CATEGORIES = ("all",)
WEBSERVERS = Resource(GROUP, VERSION, PLURAL, KIND)
"""The WebServer resource's REST coordinates, for the client and the informers."""

CAPABILITY_PATTERN = r"^[A-Z][A-Z0-9_]*$"
"""A Linux capability name as Kubernetes spells it (``NET_BIND_SERVICE``, ``ALL``)."""

MAX_REPLICAS = 1000
"""Upper bound on ``spec.replicas``: a typo such as 30000 is rejected by the API server instead of flooding a
cluster."""
NODE_PORT_MIN = 30000
NODE_PORT_MAX = 32767
"""Kubernetes' default ``--service-node-port-range``; clusters with another range reject the Service, which the
operator reports in the WebServer's Ready condition."""

NAME_MAX_LENGTH = 63
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""WebServer names must be DNS-1035 labels: the name becomes the Service's name (DNS-1035, at most 63 characters) and
the ``app.kubernetes.io/instance`` label value (at most 63 characters)."""

# Image references, after the grammar of the distribution/reference library used by container runtimes:
# [domain[:port]/]path-component[/path-component...][:tag][@algorithm:hex]. Only the domain may hold upper case.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_PATTERN = rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$"
IMAGE_MAX_LENGTH = 512

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""The pattern Kubernetes publishes for ``resource.Quantity`` in its own OpenAPI (``100m``, ``128Mi``, ``1``...)."""
QUANTITY_MAX_LENGTH = 64
"""Bound on a quantity string in the CRD schema: the API server estimates a CEL rule's cost from the longest value the
schema allows, and the requests <= limits rule parses quantities, so they must be bounded (real ones are short)."""
MAX_RESOURCES = 16
"""Bound on the number of entries in resources.requests / resources.limits, for the same CEL cost reason."""

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

Quantity = Annotated[
    int | str,
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "maxLength": QUANTITY_MAX_LENGTH,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A Kubernetes resource quantity: an integer or a string such as ``250m`` / ``128Mi`` (int-or-string on the wire)."""


class _Model(BaseModel):
    """Base: camelCase on the wire, snake_case in Python, unknown fields ignored (newer CRD, older operator)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class ResourceRequirements(_Model):
    """Compute resources for the web server container, passed through to the pod template unchanged."""

    # A request above its limit is accepted by the Deployment but every pod creation fails; reject it at admission.
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": (
                        "!has(self.requests) || !has(self.limits) || self.requests.all(r, !(r in self.limits) || "
                        "quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)"
                    ),
                    "message": (
                        "resources.requests must not exceed resources.limits for the same resource (pods could not "
                        "be created): lower the request or raise the limit"
                    ),
                    "fieldPath": ".requests",
                    "reason": "FieldValueInvalid",
                }
            ]
        }
    )

    limits: dict[str, Quantity] | None = Field(
        default=None,
        max_length=MAX_RESOURCES,
        description="Maximum compute resources per pod, e.g. {cpu: 500m, memory: 256Mi}.",
    )
    requests: dict[str, Quantity] | None = Field(
        default=None,
        max_length=MAX_RESOURCES,
        description=(
            "Minimum compute resources per pod, used for scheduling, e.g. {cpu: 100m, memory: 64Mi}. "
            "Required in namespaces whose ResourceQuota covers cpu or memory."
        ),
    )


class LocalObjectReference(_Model):
    """A reference to a Secret in the WebServer's namespace."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="Name of a kubernetes.io/dockerconfigjson Secret in the same namespace.",
    )


Capability = Annotated[
    str,
    Field(pattern=CAPABILITY_PATTERN, max_length=64, description="A capability name, e.g. NET_BIND_SERVICE or ALL."),
]
"""A Linux capability name as Kubernetes spells it (``NET_BIND_SERVICE``, ``ALL``)."""


class Capabilities(_Model):
    """Linux capabilities to add to or drop from the container's defaults."""

    add: list[Capability] | None = Field(
        default=None,
        max_length=64,
        description=(
            "Capabilities to add, e.g. [NET_BIND_SERVICE]; only those the Pod Security baseline level allows: "
            + ", ".join(BASELINE_CAPABILITIES)
            + "."
        ),
    )
    drop: list[Capability] | None = Field(
        default=None,
        max_length=64,
        description="Capabilities to drop, e.g. [ALL] (required by the restricted Pod Security level).",
    )


class SeccompProfile(_Model):
    """The seccomp profile of the container."""

    type: Literal["RuntimeDefault", "Localhost", "Unconfined"] = Field(
        description=(
            "RuntimeDefault (required by the restricted level unless Localhost) or Localhost; Unconfined is beyond the "
            "baseline level and refused unless the operator's installation allows privileged WebServers."
        )
    )
    localhost_profile: str | None = Field(
        default=None,
        max_length=253,
        description="Path of the profile on the node, relative to the kubelet's seccomp directory (Localhost only).",
    )


_BASELINE_LIST = "[" + ", ".join(f"'{c}'" for c in BASELINE_CAPABILITIES) + "]"
BASELINE_RULE_MARKER = "Pod Security baseline level"
"""Every CEL rule that keeps a WebServer's pods within baseline says this in its message: the chart drops exactly
these rules when an installation opts into ``podSecurityLevel: privileged``, and the tests find them by it."""

POD_SECURITY_RULES: list[JsonValue] = [
    {
        "rule": f"!has(self.capabilities) || !has(self.capabilities.add) || self.capabilities.add.all(c, c in "
        f"{_BASELINE_LIST})",
        "message": (
            f"may only add capabilities the {BASELINE_RULE_MARKER} allows ({', '.join(BASELINE_CAPABILITIES)}): "
            "a WebServer cannot give its pods more than baseline; remove the others (ALL, SYS_ADMIN, NET_ADMIN...)"
        ),
        "fieldPath": ".capabilities.add",
        "reason": "FieldValueForbidden",
    },
    {
        "rule": "!has(self.seccompProfile) || self.seccompProfile.type != 'Unconfined'",
        "message": (
            f"Unconfined is beyond the {BASELINE_RULE_MARKER}: a WebServer's pods keep a seccomp profile; use "
            "RuntimeDefault or Localhost, or leave seccompProfile out"
        ),
        "fieldPath": ".seccompProfile.type",
        "reason": "FieldValueForbidden",
    },
]
"""CEL rules on ``spec.securityContext``: the admission half of the tenant boundary (``core.podsecurity`` is the
reconciler's half, from the same capability list)."""


class SecurityContext(_Model):
    """Security settings of the web server container, within the Pod Security baseline level.

    ``privileged`` is deliberately not offered: a web server never needs it. Capabilities beyond baseline's list and
    an ``Unconfined`` seccomp profile are refused at admission (``POD_SECURITY_RULES``) and by the reconciler, unless
    the installation opts in.
    """

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": POD_SECURITY_RULES})

    run_as_non_root: bool | None = Field(
        default=None, description="Refuse to start the container as root (the image must set a numeric non-root USER)."
    )
    run_as_user: int | None = Field(default=None, ge=0, le=2147483647, description="UID to run the container as.")
    run_as_group: int | None = Field(default=None, ge=0, le=2147483647, description="GID to run the container as.")
    allow_privilege_escalation: bool | None = Field(
        default=None, description="Whether a process may gain more privileges than its parent (false for restricted)."
    )
    read_only_root_filesystem: bool | None = Field(
        default=None, description="Mount the container's root filesystem read-only."
    )
    capabilities: Capabilities | None = Field(default=None, description="Capabilities to add or drop.")
    seccomp_profile: SeccompProfile | None = Field(default=None, description="The container's seccomp profile.")


PROBE_PATH_PATTERN = r"^/[A-Za-z0-9._~!$&'()*+,;=:@/%?-]*$"
"""An absolute URL path (and optional query) of printable characters, no spaces, no scheme or host: the kubelet sends
it to the pod's own IP, and nothing in it can point the probe anywhere else."""
PROBE_PATH_MAX_LENGTH = 1024


class Probe(_Model):
    """How often and how patiently one probe of the web container asks its HTTP path.

    Defaults: asked every 5 seconds, 2 seconds to answer, 3 failures in a row to fail (15 seconds): quick enough that
    a pod that stops serving leaves the Service within seconds, patient enough that one slow answer on a loaded node
    does not. The handler itself (an HTTP GET of ``spec.health.path`` on the ``http`` port of the pod's own IP) is
    not settable: no host, command, TCP or gRPC handler, so a WebServer's probes reach only its own pod.
    """

    initial_delay_seconds: int = Field(
        default=0,
        ge=0,
        le=3600,
        description="Seconds after the container starts before the first probe (0-3600). Default 0.",
    )
    period_seconds: int = Field(default=5, ge=1, le=300, description="Seconds between two probes (1-300). Default 5.")
    timeout_seconds: int = Field(
        default=2,
        ge=1,
        le=60,
        description="Seconds an answer may take before the probe counts as failed (1-60). Default 2.",
    )
    failure_threshold: int = Field(
        default=3,
        ge=1,
        le=120,
        description="Failed probes in a row that make the probe fail (1-120). Default 3.",
    )


class ReadinessProbe(Probe):
    """The readiness probe: a pod receives traffic from the Service only while it passes. On unless disabled."""

    enabled: bool = Field(
        default=True,
        description=(
            "Whether the pods are probed for readiness (default true). Without it a pod gets traffic, and counts as "
            "ready, as soon as its container starts, whether or not it serves."
        ),
    )


class Health(_Model):
    """How the operator checks that a web server pod serves: HTTP GETs of one path on the container's `http` port."""

    path: str = Field(
        default="/",
        min_length=1,
        max_length=PROBE_PATH_MAX_LENGTH,
        pattern=PROBE_PATH_PATTERN,
        description=(
            "Path every probe GETs on the pod's `http` port, e.g. /healthz (default /). An answer from 200 to 399 "
            "passes; a redirect is not followed to another host."
        ),
    )
    readiness: ReadinessProbe | None = Field(
        default=None,
        description=(
            "Readiness probe: on by default (every 5s, 2s timeout, 3 failures). A pod joins the Service, and the "
            "WebServer counts it as ready, only once it answers; a rollout replaces an old pod only then."
        ),
    )
    liveness: Probe | None = Field(
        default=None,
        description=(
            "Liveness probe, off unless set: the kubelet restarts a container that fails it. Set it only for servers "
            "that can hang without exiting; a path that also fails under load restarts busy pods."
        ),
    )
    startup: Probe | None = Field(
        default=None,
        description=(
            "Startup probe, off unless set: liveness and readiness wait until it passes once. For servers that take "
            "long to start: failureThreshold x periodSeconds is the time they get."
        ),
    )


class WebServerSpec(_Model):
    """Desired state: which image to run, how many copies, and how it is exposed."""

    image: str = Field(
        min_length=1,
        max_length=IMAGE_MAX_LENGTH,
        pattern=IMAGE_PATTERN,
        description=(
            "Container image of the web server, e.g. nginx:1.27 or registry.example.com/team/web@sha256:<digest>. "
            "Changing it rolls the Deployment."
        ),
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=MAX_REPLICAS,
        description=(
            f"Number of web server pods (0-{MAX_REPLICAS}). Also set by `kubectl scale webserver/<name>` and by a "
            "HorizontalPodAutoscaler targeting the WebServer; scaling the Deployment directly is reverted."
        ),
    )
    port: int = Field(
        default=80,
        ge=1,
        le=65535,
        description=(
            "Port the web server listens on inside the container (named `http`); the Service exposes the same port."
        ),
    )
    node_port: int | None = Field(
        default=None,
        ge=NODE_PORT_MIN,
        le=NODE_PORT_MAX,
        description=(
            f"Port opened on every node ({NODE_PORT_MIN}-{NODE_PORT_MAX}). Leave it out to let the API server "
            "allocate a free one; status.nodePort reports the port in use."
        ),
    )
    resources: ResourceRequirements | None = Field(
        default=None,
        description="Compute resource requests and limits of the web server container.",
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None,
        max_length=16,
        description="Secrets used to pull the image from a private registry.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    security_context: SecurityContext | None = Field(
        default=None,
        description=(
            "Security settings of the web server container, e.g. to pass the restricted Pod Security level: "
            "{runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, "
            "seccompProfile: {type: RuntimeDefault}}. Enforced while set; when absent the container's securityContext "
            "is left to others (an admission webhook that hardens pods keeps working)."
        ),
    )
    health: Health | None = Field(
        default=None,
        description=(
            "Health checks of the web server pods: HTTP GETs of a path on the `http` port. Leave it out for a "
            "readiness probe of / (a pod counts as ready, and gets traffic, only once it answers)."
        ),
    )


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(_Model):
    """A metav1.Condition: the standard shape `kubectl wait --for=condition=...` and dashboards understand."""

    type: str = Field(
        max_length=316,
        pattern=CONDITION_TYPE_PATTERN,
        description="Type of condition in CamelCase, e.g. Ready.",
    )
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
        description="Machine-readable CamelCase reason for the condition's last transition.",
    )
    message: str = Field(default="", max_length=32768, description="Human-readable details, what to do about it.")
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="metadata.generation of the WebServer the condition was computed from.",
    )
    last_transition_time: datetime = Field(description="Last time the condition's status changed.")


class WebServerStatus(_Model):
    """Observed state, written only by the operator through the status subresource."""

    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="metadata.generation of the WebServer the operator last acted on.",
    )
    replicas: int | None = Field(
        default=None,
        ge=0,
        description="Number of web server pods the Deployment has (scale subresource statusReplicasPath).",
    )
    ready_replicas: int | None = Field(default=None, ge=0, description="Number of web server pods that are ready.")
    selector: str | None = Field(
        default=None,
        description="Label selector of the web server pods in string form (scale subresource labelSelectorPath).",
    )
    node_port: int | None = Field(default=None, ge=1, le=65535, description="Node port the Service is reachable on.")
    conditions: list[Condition] | None = Field(
        default=None,
        description="Current state: Ready is True once the desired number of pods is available.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class WebServer(_Model):
    """A WebServer custom resource as the operator reads it (metadata kept as the raw dict the API returned)."""

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: WebServerSpec
    status: WebServerStatus | None = None

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", ""))

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid", ""))

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation", 0) or 0)
