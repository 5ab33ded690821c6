#!/usr/bin/env bash
# The kind backend (machines with a Docker engine): a real cluster with real containers, the operator image built
# from the Dockerfile and loaded into it. Used by `make e2e-kind` and CLUSTER=kind for `make test` / `make demo`.
#
# Usage: hack/kind.sh up | down | kubeconfig | load-image
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
CLUSTER_NAME="${KIND_CLUSTER_NAME:-webserver-operator}"
IMG="${IMG:-ghcr.io/webserver-operator/webserver-operator:0.1.0}"
STATE="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/kind"
KUBECONFIG_PATH="${STATE}/${CLUSTER_NAME}.kubeconfig"

LOG_PREFIX=kind
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_engine() {
  command -v docker >/dev/null || die "docker is not installed: the kind backend needs a Docker engine (use CLUSTER=local)"
  docker info >/dev/null 2>&1 || die "no Docker engine answers (\`docker info\` fails): the kind backend needs one (use CLUSTER=local)"
}

kind_bin() {
  "${ROOT}/hack/tools.sh" build kind >&2
  printf '%s/kind\n' "$("${ROOT}/hack/tools.sh" bindir)"
}

cmd_up() {
  require_engine
  local kind
  kind="$(kind_bin)"
  mkdir -p "${STATE}"
  if "${kind}" get clusters 2>/dev/null | grep -qx "${CLUSTER_NAME}"; then
    log "kind cluster ${CLUSTER_NAME} exists"
  else
    log "creating kind cluster ${CLUSTER_NAME} (${KIND_NODE_IMAGE})"
    "${kind}" create cluster --name "${CLUSTER_NAME}" --image "${KIND_NODE_IMAGE}" --kubeconfig "${KUBECONFIG_PATH}" --wait 120s
  fi
  "${kind}" get kubeconfig --name "${CLUSTER_NAME}" >"${KUBECONFIG_PATH}"
  cmd_load_image
}

cmd_load_image() {
  require_engine
  log "building ${IMG}"
  docker build -t "${IMG}" "${ROOT}"
  log "loading ${IMG} into ${CLUSTER_NAME}"
  "$(kind_bin)" load docker-image "${IMG}" --name "${CLUSTER_NAME}"
}

cmd_down() {
  require_engine
  "$(kind_bin)" delete cluster --name "${CLUSTER_NAME}" || true
  rm -f "${KUBECONFIG_PATH}"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
load-image) cmd_load_image ;;
kubeconfig) printf '%s\n' "${KUBECONFIG_PATH}" ;;
*) die "usage: hack/kind.sh up | down | kubeconfig | load-image" ;;
esac
