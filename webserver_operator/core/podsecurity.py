"""The Pod Security Standards' baseline level, checked on a pod spec before the operator writes it.

Why the operator checks at all: the operator is a deputy of whoever may edit a WebServer. A platform team grants
tenants WebServers (the aggregated ``edit`` role) without granting pods, and in a namespace without a Pod Security
label (the cluster default) the API server would start any pod the operator writes. So nothing a WebServer says may
put a pod beyond the baseline level unless the installation opts in (``--pod-security-level privileged``). The CRD
refuses such WebServers at admission (``api.models``, from the same capability list); this check refuses them again
for objects stored before that CRD, and guards every field a future spec adds to the pod template, because it reads
the rendered pod spec rather than the WebServer.

The rules and their wording follow Kubernetes' own admission plugin (k8s.io/pod-security-admission, ``policy/
check_*.go``, baseline level, latest version), so a message here reads like the one PodSecurity admission would give
in a namespace labelled ``pod-security.kubernetes.io/enforce: baseline``: host namespaces, privileged containers,
capabilities beyond baseline's list, hostPath volumes, host ports, AppArmor and seccomp ``Unconfined``, SELinux
types, users and roles, ``/proc`` mount type and unsafe sysctls. Windows host processes are refused as well.

Pure: called by ``reconcile.reconciler`` with the desired pod spec; hands back the violations, empty when allowed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

PodSecurityLevel = Literal["baseline", "privileged"]
"""How far a pod the operator writes may go: ``baseline`` (the default) or ``privileged`` (no check: opt-in)."""

BASELINE_CAPABILITIES: Final = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
"""The capabilities a container may add at the baseline level (the container runtime's default set)."""

_SELINUX_TYPES: Final = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_SAFE_SYSCTLS: Final = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
_CONTAINER_LISTS: Final = ("initContainers", "containers", "ephemeralContainers")


def baseline_violations(pod_spec: Mapping[str, Any]) -> list[str]:
    """What in ``pod_spec`` (a PodSpec as JSON) the baseline level forbids, one readable line each; [] if nothing."""
    return list(_pod_violations(pod_spec)) + [
        problem for name, container in _containers(pod_spec) for problem in _container_violations(name, container)
    ]


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in _CONTAINER_LISTS:
        for container in pod_spec.get(field) or ():
            yield str(container.get("name", "")), container


def _pod_violations(pod_spec: Mapping[str, Any]) -> Iterator[str]:
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(field):
            yield f"host namespaces ({field}=true)"
    for volume in pod_spec.get("volumes") or ():
        if "hostPath" in volume:
            yield f'hostPath volumes (volume "{volume.get("name", "")}")'
    context = pod_spec.get("securityContext") or {}
    yield from _context_violations("pod", context)
    sysctls = [str(s.get("name")) for s in context.get("sysctls") or () if s.get("name") not in _SAFE_SYSCTLS]
    if sysctls:
        yield f"forbidden sysctls ({', '.join(sysctls)})"


def _container_violations(name: str, container: Mapping[str, Any]) -> Iterator[str]:
    who = f'container "{name}"'
    context = container.get("securityContext") or {}
    if context.get("privileged"):
        yield f"privileged ({who} must not set securityContext.privileged=true)"
    added = [str(c) for c in (context.get("capabilities") or {}).get("add") or () if c not in BASELINE_CAPABILITIES]
    if added:
        listed = ", ".join(f'"{c}"' for c in added)
        yield f"non-default capabilities ({who} must not include {listed} in securityContext.capabilities.add)"
    ports = [str(p.get("hostPort")) for p in container.get("ports") or () if p.get("hostPort")]
    if ports:
        yield f"hostPort ({who} uses hostPort {', '.join(ports)})"
    if context.get("procMount") not in (None, "Default"):
        yield f"procMount ({who} must not set securityContext.procMount={context.get('procMount')})"
    yield from _context_violations(who, context)


def _context_violations(who: str, context: Mapping[str, Any]) -> Iterator[str]:
    """Rules that apply alike to the pod's and to a container's securityContext."""
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield f"seccompProfile ({who} must not set securityContext.seccompProfile.type to Unconfined)"
    if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
        yield f"appArmorProfile ({who} must not set securityContext.appArmorProfile.type to Unconfined)"
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in _SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        yield f"seLinuxOptions ({who} must not set securityContext.seLinuxOptions type, user or role beyond baseline)"
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        yield f"hostProcess ({who} must not set securityContext.windowsOptions.hostProcess=true)"
