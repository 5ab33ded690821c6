#!/usr/bin/env bash
# A local OCI registry for releases and the e2e suite: go-containerregistry's `crane registry serve`, built from Go
# modules into the tools cache (hack/tools.sh build crane), run as a background process of this machine.
#
# Why crane's and not distribution's `registry`: one `go install` of a module the release needs anyway (`crane digest`
# reads what a push stored), no configuration file, and it serves both what `make release` pushes: the image and the
# chart (an OCI artifact, `helm push`). Blobs are kept on disk under the state folder; manifests live in the
# process, so `down` forgets what was pushed (the registry is for a session, not a store), and removes the local
# engine's tags of images pushed to it.
#
# Plain HTTP: push with docker (localhost is insecure by default), podman --tls-verify=false and helm --plain-http;
# hack/images.sh and hack/release.sh do so for a registry on localhost or 127.0.0.1.
#
# Usage: hack/registry.sh up | down | address
#   REGISTRY_NAME=<name>      which registry (state folder, default webserver-operator); one process per name
#   REGISTRY_ADDRESS=<h:port> where it listens (default 127.0.0.1:5001; 0.0.0.0:<port> for kind nodes to reach it)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_PREFIX=registry
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"

NAME="${REGISTRY_NAME:-webserver-operator}"
ADDRESS="${REGISTRY_ADDRESS:-127.0.0.1:5001}"
STATE="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/registry/${NAME}"
PIDFILE="${STATE}/pid"

# address: host:port clients push to (0.0.0.0 is reached as 127.0.0.1 from this machine).
address() {
  local a
  a="$(cat "${STATE}/address" 2>/dev/null || printf '%s' "${ADDRESS}")"
  printf '%s\n' "${a/#0.0.0.0:/127.0.0.1:}"
}

running() { [[ -f "${PIDFILE}" ]] && kill -0 "$(cat "${PIDFILE}")" 2>/dev/null; }

answers() { curl -fsS -o /dev/null --max-time 2 "http://$(address)/v2/" 2>/dev/null; }

cmd_up() {
  if running && answers; then
    address
    return 0
  fi
  local crane
  crane="$("${ROOT}/hack/tools.sh" bindir)/crane"
  [[ -x "${crane}" ]] || "${ROOT}/hack/tools.sh" build crane >&2
  mkdir -p "${STATE}/blobs"
  printf '%s\n' "${ADDRESS}" >"${STATE}/address"
  nohup "${crane}" registry serve --address "${ADDRESS}" --disk "${STATE}/blobs" >"${STATE}/registry.log" 2>&1 &
  echo $! >"${PIDFILE}"
  local i
  for ((i = 0; i < 100; i++)); do
    answers && break
    running || die "crane registry serve exited: $(tail -n 5 "${STATE}/registry.log") (is ${ADDRESS} in use? REGISTRY_ADDRESS=<host:port> picks another)"
    sleep 0.1
  done
  answers || die "the registry on ${ADDRESS} does not answer /v2/ after 10 s; log: ${STATE}/registry.log"
  log "registry ${NAME} serves on ${ADDRESS} (pid $(cat "${PIDFILE}"), log ${STATE}/registry.log)"
  address
}

# forget_images: remove the local engine's tags that name this registry (what `make release` built and pushed to it).
# Once the registry is down its manifests are gone, so those tags name images nobody can pull again; left behind,
# every release run kept one more image of about 325 MB in the engine's storage.
forget_images() {
  local engine prefix tag tags=()
  engine="$("${ROOT}/hack/engine.sh" builder 2>/dev/null)" || return 0
  prefix="$(address)/"
  while read -r tag; do
    if [[ "${tag}" == "${prefix}"* ]]; then tags+=("${tag}"); fi
  done < <("${engine}" images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null || true)
  ((${#tags[@]} > 0)) || return 0
  if "${engine}" rmi "${tags[@]}" >/dev/null 2>&1; then
    log "removed ${#tags[@]} local image tag(s) of ${prefix%/} from ${engine}: ${tags[*]}"
  else
    log "could not remove the local image tag(s) of ${prefix%/} from ${engine}: ${tags[*]} (remove them with \`${engine} rmi\`)"
  fi
}

cmd_down() {
  if running; then
    kill "$(cat "${PIDFILE}")"
    log "stopped registry ${NAME} (pid $(cat "${PIDFILE}"))"
  fi
  forget_images
  rm -rf "${STATE}"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
address) address ;;
*) die "usage: hack/registry.sh up | down | address" ;;
esac
