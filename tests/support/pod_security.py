"""Pod specs on both sides of the Pod Security baseline level, shared by the unit and the integration tests.

The unit tests check ``core.podsecurity`` on them; the integration tests send the same pods to the real API server in
a namespace that enforces baseline, so the operator's own check is held against Kubernetes' admission plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
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
            "runAsUser": 0,  # root in the container is baseline (restricted forbids it)
            "allowPrivilegeEscalation": True,
            "seLinuxOptions": {"type": "container_t", "level": "s0:c1"},
            "procMount": "Default",
        },
        "ports": [{"containerPort": 80}],
    },
    securityContext={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
)
"""Everything baseline allows at once."""


@dataclass(frozen=True)
class Beyond:
    """A pod spec beyond baseline and the text the operator's check names it by.

    ``admission``: the API server's own validation accepts the pod otherwise, so PodSecurity admission is what
    refuses it (false where the pod is invalid anyway, e.g. a host process on Linux).
    """

    id: str
    spec: dict[str, Any]
    named: str
    admission: bool = True


def _context(**fields: Any) -> dict[str, Any]:
    return pod_spec({"securityContext": fields})


BEYOND: tuple[Beyond, ...] = (
    Beyond("cap-all", _context(capabilities={"add": ["CHOWN", "ALL"]}), '"ALL" in securityContext'),
    Beyond("cap-sys-admin", _context(capabilities={"add": ["SYS_ADMIN"]}), '"SYS_ADMIN"'),
    Beyond("cap-prefixed", _context(capabilities={"add": ["CAP_CHOWN"]}), '"CAP_CHOWN"'),
    Beyond("seccomp-container", _context(seccompProfile={"type": "Unconfined"}), 'container "web" must not set'),
    Beyond("seccomp-pod", pod_spec(securityContext={"seccompProfile": {"type": "Unconfined"}}), "pod must not set"),
    Beyond("privileged", _context(privileged=True), "privileged"),
    Beyond("proc-mount", _context(procMount="Unmasked"), "procMount", admission=False),
    Beyond("apparmor", _context(appArmorProfile={"type": "Unconfined"}), "appArmorProfile"),
    Beyond("selinux-type", _context(seLinuxOptions={"type": "spc_t"}), "seLinuxOptions"),
    Beyond("selinux-user", _context(seLinuxOptions={"user": "system_u"}), "seLinuxOptions"),
    Beyond("host-process", _context(windowsOptions={"hostProcess": True}), "hostProcess", admission=False),
    Beyond("host-port", pod_spec({"ports": [{"containerPort": 80, "hostPort": 80}]}), "hostPort 80"),
    Beyond("host-network", pod_spec(hostNetwork=True), "hostNetwork=true"),
    Beyond("host-pid", pod_spec(hostPID=True), "hostPID=true"),
    Beyond("host-path", pod_spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), 'volume "root"'),
    Beyond("sysctl", pod_spec(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}), "kernel.msgmax"),
    Beyond(
        "init-container",
        {
            **pod_spec(),
            "initContainers": [{"name": "init", "image": "busybox", "securityContext": {"privileged": True}}],
        },
        'container "init"',
    ),
)
