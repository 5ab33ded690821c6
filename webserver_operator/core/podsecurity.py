"""The Pod Security Standards' baseline level, checked on a pod spec before the operator writes it.

Why the operator checks at all: the operator is a deputy of whoever may edit a WebServer. A platform team grants
tenants WebServers (the aggregated ``edit`` role) without granting pods, and in a namespace without a Pod Security
label (the cluster default) the API server would start any pod the operator writes. So nothing a WebServer says may
put a pod beyond the baseline level unless the installation opts in (``--pod-security-level privileged``). The CRD
refuses such WebServers at admission (``api.models``, from the same capability list); this check refuses them again
for objects stored before that CRD, and guards every field a future spec adds to the pod template, because it reads
the rendered pod spec rather than the WebServer.

The rules and their wording follow Kubernetes' own admission plugin, k8s.io/pod-security-admission **v0.36.3**
(Kubernetes 1.36), ``policy/check_*.go``, every check of the baseline level at version ``latest``, one function
here per Go check and in the same order of fields, so a line here is exactly the ``reason (detail)`` that PodSecurity
admission gives in a namespace labelled ``pod-security.kubernetes.io/enforce: baseline``:
``windowsHostProcess``, ``hostNamespaces``, ``privileged``, ``capabilities_baseline``, ``hostPathVolumes``,
``hostPorts``, ``hostProbesAndHostLifecycle`` (1.34: no ``host`` in probes and lifecycle handlers), ``appArmorProfile``
(pod and container profiles other than RuntimeDefault/Localhost, and the beta annotations
``container.apparmor.security.beta.kubernetes.io/*`` other than ``runtime/default``/``localhost/*``),
``seLinuxOptions`` (1.31 types), ``procMount`` (1.35: any value in a user namespace, ``hostUsers: false``),
``seccompProfile_baseline`` (1.19+: profile types other than RuntimeDefault/Localhost) and ``sysctls`` (1.32 list).
When a Kubernetes release changes a check, change it here and in ``tests/support/pod_security.py``; the
integration test holds every case against the real admission of the local control plane.

Pure: called by ``reconcile.reconciler`` with the desired pod spec; hands back the violations, empty when allowed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Literal

__all__ = ["BASELINE_CAPABILITIES", "Finding", "Json", "PodSecurityLevel", "baseline_violations", "template_violations"]

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
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
_ALLOWED_PROFILE_TYPES: Final = frozenset({"RuntimeDefault", "Localhost"})
_APPARMOR_ANNOTATION_PREFIX: Final = "container.apparmor.security.beta.kubernetes.io/"
_CONTAINER_LISTS: Final = ("initContainers", "containers", "ephemeralContainers")
_PROBES: Final = ("livenessProbe", "readinessProbe", "startupProbe")
_LIFECYCLE_HANDLERS: Final = ("postStart", "preStop")

Json = Mapping[str, Any]


def baseline_violations(pod_spec: Json, *, annotations: Mapping[str, str] | None = None) -> list[str]:
    """What in ``pod_spec`` (a PodSpec as JSON) the baseline level forbids, one ``reason (detail)`` line per check.

    ``annotations``: the pod's (or pod template's) ``metadata.annotations``, read for the AppArmor annotations.
    [] when the pod is allowed.
    """
    checks = (
        _windows_host_process(pod_spec),
        _host_namespaces(pod_spec),
        _privileged(pod_spec),
        _capabilities(pod_spec),
        _host_path_volumes(pod_spec),
        _host_ports(pod_spec),
        _host_probes_and_lifecycle(pod_spec),
        _app_armor(pod_spec, annotations or {}),
        _selinux(pod_spec),
        _proc_mount(pod_spec),
        _seccomp(pod_spec),
        _sysctls(pod_spec),
    )
    return [f"{reason} ({detail})" for reason, detail in (c for c in checks if c is not None)]


def template_violations(template: Json) -> list[str]:
    """``baseline_violations`` of a pod template (``spec.template`` of a Deployment): its spec and annotations."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return baseline_violations(template.get("spec") or {}, annotations=annotations)


# -- helpers, as policy/helpers.go and visitor.go --------------------------------------------------------------------


def _containers(pod_spec: Json) -> Iterator[Json]:
    for field in _CONTAINER_LISTS:
        yield from pod_spec.get(field) or ()


def _context(obj: Json) -> Json:
    return obj.get("securityContext") or {}


def _join_quote(items: Iterable[str]) -> str:
    items = list(items)
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers_phrase(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_join_quote(names)}"


Finding = tuple[str, str] | None
"""``(reason, detail)`` of one failed check, None when it passes."""


# -- the checks ------------------------------------------------------------------------------------------------------


def _windows_host_process(pod_spec: Json) -> Finding:
    bad = [
        str(c.get("name", ""))
        for c in _containers(pod_spec)
        if (_context(c).get("windowsOptions") or {}).get("hostProcess") is True
    ]
    setters = ["pod"] if (_context(pod_spec).get("windowsOptions") or {}).get("hostProcess") is True else []
    if bad:
        setters.append(_containers_phrase(bad))
    if not setters:
        return None
    return "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"


def _host_namespaces(pod_spec: Json) -> Finding:
    shared = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if pod_spec.get(field) is True]
    return ("host namespaces", ", ".join(shared)) if shared else None


def _privileged(pod_spec: Json) -> Finding:
    bad = [str(c.get("name", "")) for c in _containers(pod_spec) if _context(c).get("privileged") is True]
    if not bad:
        return None
    return "privileged", f"{_containers_phrase(bad)} must not set securityContext.privileged=true"


def _capabilities(pod_spec: Json) -> Finding:
    bad: list[str] = []
    added: set[str] = set()
    for container in _containers(pod_spec):
        extra = {str(c) for c in (_context(container).get("capabilities") or {}).get("add") or ()}
        extra -= set(BASELINE_CAPABILITIES)
        if extra:
            bad.append(str(container.get("name", "")))
            added |= extra
    if not bad:
        return None
    return (
        "non-default capabilities",
        f"{_containers_phrase(bad)} must not include {_join_quote(sorted(added))} in securityContext.capabilities.add",
    )


def _host_path_volumes(pod_spec: Json) -> Finding:
    bad = [str(v.get("name", "")) for v in pod_spec.get("volumes") or () if v.get("hostPath") is not None]
    if not bad:
        return None
    return "hostPath volumes", f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)}"


def _host_ports(pod_spec: Json) -> Finding:
    bad: list[str] = []
    ports: set[int] = set()
    for container in _containers(pod_spec):
        used = {int(p["hostPort"]) for p in container.get("ports") or () if p.get("hostPort")}
        if used:
            bad.append(str(container.get("name", "")))
            ports |= used
    if not bad:
        return None
    # Go sorts the ports as strings (sets.String).
    listed = ", ".join(sorted(str(p) for p in ports))
    return (
        "hostPort",
        f"{_containers_phrase(bad)} {_plural('uses', 'use', len(bad))} {_plural('hostPort', 'hostPorts', len(ports))} "
        f"{listed}",
    )


def _handler_hosts(handler: Json | None) -> list[str]:
    """The ``host`` of a probe's or lifecycle handler's httpGet and tcpSocket, where set."""
    if not handler:
        return []
    return [str(h) for h in ((handler.get(a) or {}).get("host") for a in ("httpGet", "tcpSocket")) if h]


def _host_probes_and_lifecycle(pod_spec: Json) -> Finding:
    bad: set[str] = set()
    hosts: set[str] = set()
    for container in _containers(pod_spec):
        lifecycle = container.get("lifecycle") or {}
        found = [h for probe in _PROBES for h in _handler_hosts(container.get(probe))]
        found += [h for handler in _LIFECYCLE_HANDLERS for h in _handler_hosts(lifecycle.get(handler))]
        if found:
            bad.add(str(container.get("name", "")))
            hosts.update(found)
    if not bad:
        return None
    return (
        "probe or lifecycle host",
        f"{_containers_phrase(sorted(bad))} {_plural('uses', 'use', len(bad))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} {_join_quote(sorted(hosts))}",
    )


def _allowed_apparmor_annotation(value: str) -> bool:
    return value in ("", "runtime/default") or value.startswith("localhost/")


def _disallowed_profiles(pod_spec: Json, field: str) -> tuple[list[str], set[str]]:
    """Who sets the profile ``field`` to a type other than RuntimeDefault or Localhost, and the types they set.

    ``field`` is ``seccompProfile`` or ``appArmorProfile``; who is ``pod`` and/or the containers, in admission's phrase.
    """
    setters: list[str] = []
    values: set[str] = set()
    pod_profile = _context(pod_spec).get(field)
    if pod_profile is not None and pod_profile.get("type") not in _ALLOWED_PROFILE_TYPES:
        setters.append("pod")
        values.add(str(pod_profile.get("type") or ""))
    bad: list[str] = []
    for container in _containers(pod_spec):
        profile = _context(container).get(field)
        if profile is not None and profile.get("type") not in _ALLOWED_PROFILE_TYPES:
            bad.append(str(container.get("name", "")))
            values.add(str(profile.get("type") or ""))
    if bad:
        setters.append(_containers_phrase(bad))
    return setters, values


def _app_armor(pod_spec: Json, annotations: Mapping[str, str]) -> Finding:
    setters, values = _disallowed_profiles(pod_spec, "appArmorProfile")
    forbidden = sorted(
        f"{key}={json.dumps(str(value))}"
        for key, value in annotations.items()
        if key.startswith(_APPARMOR_ANNOTATION_PREFIX) and not _allowed_apparmor_annotation(str(value))
    )
    listed = sorted(values) + forbidden
    if forbidden:
        setters.append(_plural("annotation", "annotations", len(forbidden)))
    if not setters:
        return None
    return (
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(listed)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(listed)}",
    )


def _selinux(pod_spec: Json) -> Finding:
    types: set[str] = set()
    user = role = False

    def valid(options: Json) -> bool:
        nonlocal user, role
        ok = True
        if str(options.get("type") or "") not in _SELINUX_TYPES:
            types.add(str(options.get("type") or ""))
            ok = False
        if options.get("user"):
            user, ok = True, False
        if options.get("role"):
            role, ok = True, False
        return ok

    setters: list[str] = []
    pod_options = _context(pod_spec).get("seLinuxOptions")
    if pod_options is not None and not valid(pod_options):
        setters.append("pod")
    bad = [
        str(c.get("name", ""))
        for c in _containers(pod_spec)
        if _context(c).get("seLinuxOptions") is not None and not valid(_context(c)["seLinuxOptions"])
    ]
    if bad:
        setters.append(_containers_phrase(bad))
    if not setters:
        return None
    data = [f"{_plural('type', 'types', len(types))} {_join_quote(sorted(types))}"] if types else []
    data += ["user may not be set"] if user else []
    data += ["role may not be set"] if role else []
    return "seLinuxOptions", f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}"


def _proc_mount(pod_spec: Json) -> Finding:
    if pod_spec.get("hostUsers") is False:
        return None  # 1.35: a pod in a user namespace may unmask /proc
    bad: list[str] = []
    types: set[str] = set()
    for container in _containers(pod_spec):
        mount = _context(container).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(str(container.get("name", "")))
            types.add(str(mount))
    if not bad:
        return None
    return (
        "procMount",
        f"{_containers_phrase(bad)} must not set securityContext.procMount to {_join_quote(sorted(types))}",
    )


def _seccomp(pod_spec: Json) -> Finding:
    setters, values = _disallowed_profiles(pod_spec, "seccompProfile")
    if not setters:
        return None
    return (
        "seccompProfile",
        f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to {_join_quote(sorted(values))}",
    )


def _sysctls(pod_spec: Json) -> Finding:
    bad = [str(s.get("name")) for s in _context(pod_spec).get("sysctls") or () if s.get("name") not in _SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None
