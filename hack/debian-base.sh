#!/usr/bin/env bash
# A Debian base image made with debootstrap and imported into the container engine, for machines where no registry
# can be reached. The offline kind node image, the stand-in Python base of the operator image and the stand-in
# nginx web image all start FROM it (hack/kind-node-image.sh, hack/images.sh); packages are then added with apt
# inside ordinary `build` steps, which reach Debian's mirror as usual.
#
# Built once per Debian release and recipe (the image tag carries a key of both), and reused while it exists in the
# engine's store.
#
# Usage: hack/debian-base.sh ensure | name      (ENGINE=docker|podman, default: hack/engine.sh detect)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
LOG_PREFIX=debian-base
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"

MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
key() {
  { echo "${KIND_NODE_DEBIAN_RELEASE}"; sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1; } | sha256sum | cut -c1-12
}
NAME="localhost/webserver-operator/debian:${KIND_NODE_DEBIAN_RELEASE}-$(key)"

ensure() {
  local engine="${ENGINE:-$("${ROOT}/hack/engine.sh" detect)}"
  if "${engine}" image inspect "${NAME}" >/dev/null 2>&1; then
    printf '%s\n' "${NAME}"
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed: run \`make engine\` (it installs the host packages the offline image builds need)"
  [[ "$(id -u)" == 0 ]] || die "debootstrap needs root: run as root (or sudo)"
  local work start=${SECONDS}
  work="$(mktemp -d "${TMPDIR:-/tmp}/debian-base.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '${work}'" EXIT
  log "debootstrap --variant=minbase ${KIND_NODE_DEBIAN_RELEASE} (about a minute)"
  if ! debootstrap --variant=minbase "${KIND_NODE_DEBIAN_RELEASE}" "${work}/rootfs" "${MIRROR}" >"${work}/debootstrap.log" 2>&1; then
    tail -n 30 "${work}/debootstrap.log" >&2
    die "debootstrap failed (log above): check that ${MIRROR} is reachable"
  fi
  # What a container image does not need: package lists and caches (apt-get update runs again in later steps).
  rm -rf "${work}/rootfs/var/lib/apt/lists/"* "${work}/rootfs/var/cache/apt/"*.bin "${work}/rootfs/var/log/"*
  printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
    "${MIRROR}" "${KIND_NODE_DEBIAN_RELEASE}" "${MIRROR}" "${KIND_NODE_DEBIAN_RELEASE}" "${KIND_NODE_DEBIAN_RELEASE}" \
    >"${work}/rootfs/etc/apt/sources.list"
  if ! tar --numeric-owner -C "${work}/rootfs" -c . |
    "${engine}" import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "${NAME}" >/dev/null 2>"${work}/import.log"; then
    cat "${work}/import.log" >&2
    die "${engine} import of the Debian root filesystem failed (above)"
  fi
  log "imported ${NAME} in $((SECONDS - start))s"
  printf '%s\n' "${NAME}"
}

case "${1:-}" in
ensure) ensure ;;
name) printf '%s\n' "${NAME}" ;;
*) die "usage: hack/debian-base.sh ensure | name" ;;
esac
