#!/usr/bin/env bash
# The container engine behind the kind backend: which one works here, and `make engine` to install one.
#
# Why a script of its own: kind nodes are privileged containers running systemd, and a Docker engine that answers
# `docker info` may still refuse `--privileged` (a sandbox whose capability bounding set lacks CAP_SYS_RESOURCE:
# "runc create failed: unable to apply caps"). Rootful podman runs them there once its default ulimits fit the host's
# hard limits. hack/kind.sh, hack/kind-node-image.sh and the test suite (tests/support/engine.py) all ask
# `hack/engine.sh detect`, so they can never disagree about the engine kind runs on.
#
# Rule (detect, for kind): Docker when `docker info` succeeds AND a --privileged container starts; otherwise rootful
# podman (kind's KIND_EXPERIMENTAL_PROVIDER=podman) when `podman info` succeeds; otherwise none.
#
# Building, pushing and loading an image needs none of that: `make docker-build`, `make docker-push` and `make
# kind-load` ask `hack/engine.sh builder`, which starts no container and needs no Go, so rootless or locked-down
# Docker (and macOS) build the image with a plain `docker build` (issue 33).
# Rule (builder): ENGINE when set (docker or podman); else Docker when `docker info` succeeds; else podman when
# `podman info` succeeds; otherwise none.
#
# Usage:
#   hack/engine.sh detect    print "docker" or "podman"; exit 1 with what to do when neither works
#   hack/engine.sh install   `make engine`: install and configure podman from Debian's packages (only when Docker
#                            cannot run kind), plus the host packages the offline node image build needs; it prints
#                            every change it makes to the system
#   hack/engine.sh probe E   exit 0 when engine E starts a --privileged container
#   hack/engine.sh builder   print the engine that builds, pushes and loads images (rule above); exit 1 with what to
#                            do when none answers
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/engine"
CONTAINERS_CONF=/etc/containers/containers.conf
PROBE_IMAGE=localhost/webserver-operator-engine-probe:1

LOG_PREFIX=engine
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"

# Debian packages: the engine, and what the node image build runs on the host (debootstrap for the Debian root
# filesystem, gcc + static libseccomp for runc, which needs cgo).
# runc, not crun: crun refuses this cgroup v1 "hybrid" layout ("cgroups in hybrid mode not supported").
ENGINE_PACKAGES=(podman runc)
BUILD_PACKAGES=(debootstrap gcc libc6-dev libseccomp-dev)

answers() { "$1" info >/dev/null 2>&1; }

# probe_binary: a tiny static program (built with the Go toolchain the project needs anyway) as the only file of a
# throw-away image, so probing needs no registry and no base image.
probe_tar() {
  local tar="${STATE}/probe.tar"
  [[ -s "${tar}" ]] && { printf '%s\n' "${tar}"; return 0; }
  command -v go >/dev/null || die "go is not on PATH: it builds the probe container (install Go >= 1.26)"
  mkdir -p "${STATE}/probe"
  cat >"${STATE}/probe/main.go" <<'GO'
// Command probe exits 0: it only shows that a container started.
package main

func main() {}
GO
  (cd "${STATE}/probe" && [[ -f go.mod ]] || go mod init probe >/dev/null 2>&1)
  (cd "${STATE}/probe" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o probe .)
  tar -C "${STATE}/probe" -cf "${tar}.tmp" probe
  mv "${tar}.tmp" "${tar}"
  printf '%s\n' "${tar}"
}

# probe ENGINE: does ENGINE start a --privileged container?
probe() {
  local engine="$1"
  answers "${engine}" || return 1
  if ! "${engine}" image inspect "${PROBE_IMAGE}" >/dev/null 2>&1; then
    "${engine}" import --change 'ENTRYPOINT ["/probe"]' "$(probe_tar)" "${PROBE_IMAGE}" >/dev/null 2>&1 || return 1
  fi
  "${engine}" run --rm --privileged --network=none "${PROBE_IMAGE}" >/dev/null 2>"${STATE}/probe-${engine}.err"
}

cmd_detect() {
  mkdir -p "${STATE}"
  if command -v docker >/dev/null && probe docker; then
    echo docker
  elif command -v podman >/dev/null && answers podman; then
    echo podman
  else
    local why="no container engine is installed"
    if command -v docker >/dev/null; then
      if answers docker; then
        why="Docker answers but cannot start a --privileged container: $(tail -n 1 "${STATE}/probe-docker.err" 2>/dev/null)"
      else
        why="\`docker info\` fails (a docker client without an engine)"
      fi
    fi
    die "${why}; kind needs an engine that runs privileged containers: run \`make engine\` (installs rootful podman from Debian's packages), or use CLUSTER=local"
  fi
}

cmd_builder() {
  if [[ -n "${ENGINE:-}" ]]; then
    case "${ENGINE}" in
    docker | podman) ;;
    *) die "ENGINE=${ENGINE}: use ENGINE=docker or ENGINE=podman (or leave it unset to use whichever answers)" ;;
    esac
    command -v "${ENGINE}" >/dev/null || die "ENGINE=${ENGINE}, but ${ENGINE} is not on PATH: install it, or unset ENGINE"
    echo "${ENGINE}"
  elif command -v docker >/dev/null && answers docker; then
    echo docker
  elif command -v podman >/dev/null && answers podman; then
    echo podman
  else
    local why="neither docker nor podman is on PATH"
    if command -v docker >/dev/null || command -v podman >/dev/null; then
      why="neither \`docker info\` nor \`podman info\` answers (a client without a running engine)"
    fi
    die "${why}: install and start Docker or podman (or pass ENGINE=docker|podman), then run this again"
  fi
}

# --- make engine ----------------------------------------------------------------------------------------------------

missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q 'install ok installed' || printf '%s\n' "${p}"
  done
}

apt_install() {
  local missing=() p
  while IFS= read -r p; do missing+=("${p}"); done < <(missing_packages "$@")
  if ((${#missing[@]} == 0)); then
    log "Debian packages already installed: $*"
    return 0
  fi
  command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} with your system's package manager"
  [[ "$(id -u)" == 0 ]] || die "installing ${missing[*]} needs root: run \`sudo make engine\`"
  log "CHANGE: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Podman's default ulimits must not exceed the hard limits of the process that starts it, or runc fails with
# "error setting rlimits ... type 7" (nofile) / "type 6" (nproc). nproc at the host's own hard value still fails
# (the limit is counted per user across the host), a modest fixed value works.
configure_podman() {
  local nofile
  nofile="$(ulimit -Hn)"
  [[ "${nofile}" == unlimited || "${nofile}" -gt 1048576 ]] && nofile=1048576
  mkdir -p "$(dirname "${CONTAINERS_CONF}")"
  set_conf containers default_ulimits "[\"nofile=${nofile}:${nofile}\", \"nproc=1024:1024\"]"
  set_conf engine runtime '"runc"'
}

# set_conf SECTION KEY VALUE: one `KEY = VALUE` line under [SECTION] of containers.conf, said out loud when changed.
set_conf() {
  local section="$1" key="$2" value="$3" line
  line="${key} = ${value}"
  touch "${CONTAINERS_CONF}"
  if python3 - "${CONTAINERS_CONF}" "${section}" "${key}" "${line}" <<'PY'
import re, sys
path, section, key, line = sys.argv[1:]
text = open(path).read()
lines = text.splitlines()
out, current, done = [], None, False
for raw in lines:
    header = re.match(r"^\[([^]]+)\]\s*$", raw)
    if header:
        if current == section and not done:
            out.append(line)
            done = True
        current = header.group(1)
    elif current == section and re.match(rf"^\s*{re.escape(key)}\s*=", raw):
        if not done:
            out.append(line)
            done = True
        continue
    out.append(raw)
if not done:
    if current != section:
        out += ["", f"[{section}]"]
    out.append(line)
new = "\n".join(out) + "\n"
if new == text:
    sys.exit(1)
open(path, "w").write(new)
PY
  then
    log "CHANGE: ${CONTAINERS_CONF}: [${section}] ${line}"
  else
    log "${CONTAINERS_CONF}: [${section}] ${line} (already set)"
  fi
}

# kind bind-mounts /lib/modules read-only into its nodes; some hosts have none ("statfs /lib/modules: no such file").
ensure_lib_modules() {
  if [[ ! -d /lib/modules ]]; then
    log "CHANGE: mkdir /lib/modules (kind mounts it into its nodes; this host has none)"
    mkdir -p /lib/modules
  fi
}

cmd_install() {
  mkdir -p "${STATE}"
  if command -v docker >/dev/null && probe docker; then
    log "Docker runs privileged containers here: kind uses it, podman is not needed"
  else
    if command -v docker >/dev/null && answers docker; then
      log "Docker answers but refuses --privileged ($(tail -n 1 "${STATE}/probe-docker.err" 2>/dev/null)): using podman"
    fi
    apt_install "${ENGINE_PACKAGES[@]}"
    configure_podman
    ensure_lib_modules
    probe podman || die "podman cannot start a --privileged container: $(cat "${STATE}/probe-podman.err")"
    log "podman $(podman version --format '{{.Client.Version}}') runs privileged containers: kind will use it"
  fi
  ensure_lib_modules
  apt_install "${BUILD_PACKAGES[@]}"
  log "engine ready: $(cmd_detect)"
}

case "${1:-}" in
detect) cmd_detect ;;
install) cmd_install ;;
probe) mkdir -p "${STATE}" && probe "${2:?engine}" ;;
builder) cmd_builder ;;
*) die "usage: hack/engine.sh detect | install | probe ENGINE | builder" ;;
esac
