"""Pod specs on both sides of the Pod Security baseline level, shared by the unit and the integration tests.

The unit tests check ``core.podsecurity`` on them; the integration tests send the same pods to the real API server in
a namespace that enforces baseline, so the operator's own check is held against Kubernetes' admission plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webserver_operator.core.podsecurity import BASELINE_CAPABILITIES


def pod_spec(container: dict[str, Any] | None = None, **pod_fields: Any) -> dict[str, Any]:
    """A pod spec with one ``web`` container, plus ``container`` fields and ``pod_fields``."""
    return {"containers": [{"name": "web", "image": "nginx", **(container or {})}], **pod_fields}


ALLOWED = pod_spec(
    {
        "securityContext": {
            "capabilities": {"add": list(BASELINE_CAPABILITIES), "drop": ["ALL"]},
            "seccompProfile": {"type": "Localhost", "localhostProfile": "web.json"},
            "appArmorProfile": {"type": "RuntimeDefault"},
            "runAsUser": 0,  # root in the container is baseline (restricted forbids it)
            "allowPrivilegeEscalation": True,
            "seLinuxOptions": {"type": "container_t", "level": "s0:c1"},
            "procMount": "Default",
        },
        "ports": [{"containerPort": 80}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
        "livenessProbe": {"tcpSocket": {"port": 80}},
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
    },
    securityContext={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
)
"""Everything baseline allows at once."""

_APPARMOR_WEB = "container.apparmor.security.beta.kubernetes.io/web"


@dataclass(frozen=True)
class Allowed:
    """A pod at the edge of baseline that both the operator's check and PodSecurity admission allow."""

    id: str
    spec: dict[str, Any]
    annotations: dict[str, str] = field(default_factory=dict)
    #: The first Kubernetes minor whose admission allows it (the check follows 1.36); an older API server refuses it.
    since_minor: int = 0


@dataclass(frozen=True)
class Beyond:
    """A pod spec beyond baseline and the text the operator's check names it by.

    ``annotations``: the pod's annotations (the AppArmor ones are checked). ``admission``: the API server's own
    validation accepts the pod otherwise, so PodSecurity admission is what refuses it (false where the pod is invalid
    anyway, e.g. a host process on Linux).
    """

    id: str
    spec: dict[str, Any]
    named: str
    admission: bool = True
    annotations: dict[str, str] = field(default_factory=dict)


def _context(**fields: Any) -> dict[str, Any]:
    return pod_spec({"securityContext": fields})


def _probe(host: str, *, handler: str = "httpGet") -> dict[str, Any]:
    return {handler: {"host": host, "port": 80, **({"path": "/"} if handler == "httpGet" else {})}}


ALLOWED_EDGES: tuple[Allowed, ...] = (
    Allowed("everything", ALLOWED),
    Allowed("plain", pod_spec()),
    Allowed("apparmor-annotation-runtime-default", pod_spec(), {_APPARMOR_WEB: "runtime/default"}),
    Allowed("apparmor-annotation-localhost", pod_spec(), {_APPARMOR_WEB: "localhost/web"}),
    Allowed(
        "apparmor-pod-localhost",
        pod_spec(securityContext={"appArmorProfile": {"type": "Localhost", "localhostProfile": "web"}}),
    ),
    Allowed("selinux-container-engine", _context(seLinuxOptions={"type": "container_engine_t"})),
    Allowed("seccomp-runtime-default", pod_spec(securityContext={"seccompProfile": {"type": "RuntimeDefault"}})),
    Allowed("probe-empty-host", pod_spec({"readinessProbe": {"httpGet": {"host": "", "port": 80}}})),
    Allowed(
        "sysctl-1-32",
        pod_spec(securityContext={"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]}),
    ),
    # Kubernetes 1.35 allowed an unmasked /proc in a user namespace at baseline; 1.34's admission still refuses it.
    Allowed("proc-mount-in-user-namespace", {**_context(procMount="Unmasked"), "hostUsers": False}, since_minor=35),
)
"""Pods at the edge of baseline, allowed by both (Kubernetes 1.36)."""


BEYOND: tuple[Beyond, ...] = (
    Beyond("cap-all", _context(capabilities={"add": ["CHOWN", "ALL"]}), '"ALL" in securityContext'),
    Beyond("cap-sys-admin", _context(capabilities={"add": ["SYS_ADMIN"]}), '"SYS_ADMIN"'),
    Beyond("cap-prefixed", _context(capabilities={"add": ["CAP_CHOWN"]}), '"CAP_CHOWN"'),
    Beyond("seccomp-container", _context(seccompProfile={"type": "Unconfined"}), 'container "web" must not set'),
    Beyond("seccomp-pod", pod_spec(securityContext={"seccompProfile": {"type": "Unconfined"}}), "pod must not set"),
    Beyond("privileged", _context(privileged=True), "privileged"),
    Beyond("proc-mount", _context(procMount="Unmasked"), "procMount", admission=False),
    Beyond("apparmor", _context(appArmorProfile={"type": "Unconfined"}), 'AppArmor profile type to "Unconfined"'),
    Beyond(
        "apparmor-pod",
        pod_spec(securityContext={"appArmorProfile": {"type": "Unconfined"}}),
        "pod must not set AppArmor profile type",
    ),
    # The API server copies the beta annotation into the container's field before admission sees the pod (the
    # pod strategy's AppArmor version skew), so the case carries both, as admission then reads it.
    Beyond(
        "apparmor-annotation",
        _context(appArmorProfile={"type": "Unconfined"}),
        f'"Unconfined", "{_APPARMOR_WEB}="unconfined""',
        annotations={_APPARMOR_WEB: "unconfined"},
    ),
    Beyond("selinux-type", _context(seLinuxOptions={"type": "spc_t"}), "seLinuxOptions"),
    Beyond("selinux-user", _context(seLinuxOptions={"user": "system_u"}), "user may not be set"),
    Beyond(
        "selinux-pod-role", pod_spec(securityContext={"seLinuxOptions": {"role": "sysadm_r"}}), "role may not be set"
    ),
    Beyond("host-process", _context(windowsOptions={"hostProcess": True}), "hostProcess", admission=False),
    Beyond("host-port", pod_spec({"ports": [{"containerPort": 80, "hostPort": 80}]}), "hostPort 80"),
    Beyond("host-network", pod_spec(hostNetwork=True), "hostNetwork=true"),
    Beyond("host-pid", pod_spec(hostPID=True), "hostPID=true"),
    Beyond("host-ipc", pod_spec(hostIPC=True), "hostIPC=true"),
    Beyond("host-path", pod_spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), 'volume "root"'),
    Beyond("sysctl", pod_spec(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}), "kernel.msgmax"),
    Beyond("probe-http-host", pod_spec({"readinessProbe": _probe("10.0.0.1")}), 'probe or lifecycle host "10.0.0.1"'),
    Beyond("probe-tcp-host", pod_spec({"livenessProbe": _probe("metadata", handler="tcpSocket")}), '"metadata"'),
    Beyond("startup-probe-host", pod_spec({"startupProbe": _probe("node")}), '"node"'),
    Beyond(
        "lifecycle-host",
        pod_spec({"lifecycle": {"preStop": _probe("169.254.169.254"), "postStart": _probe("10.0.0.2")}}),
        'probe or lifecycle hosts "10.0.0.2", "169.254.169.254"',
    ),
    Beyond(
        "init-container",
        {
            **pod_spec(),
            "initContainers": [{"name": "init", "image": "busybox", "securityContext": {"privileged": True}}],
        },
        'container "init"',
    ),
)
