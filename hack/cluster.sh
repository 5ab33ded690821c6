#!/usr/bin/env bash
# Run the project's local Kubernetes control plane: real etcd, kube-apiserver (RBAC, default admission plugins incl.
# PodSecurity), kube-controller-manager and kube-scheduler built from Go modules by hack/tools.sh, plus kwok, which
# simulates nodes and pods (no container runtime needed). kwokctl's `binary` runtime supervises the processes.
#
# Usage: hack/cluster.sh up | down | kubeconfig | status | audit-log
#
# State lives outside the repository (KWOK_WORKDIR under the tools cache), so clones share one cluster and
# `git clean` never strands running processes. `up` is idempotent: it reuses a healthy cluster and wipes a stale one
# (for example after a killed run) before creating a new one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER_NAME="${CLUSTER_NAME:-webserver-operator}"
NODES="${NODES:-1}"
export KWOK_WORKDIR="${KWOK_WORKDIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/kwok}"
CLUSTER_DIR="${KWOK_WORKDIR}/clusters/${CLUSTER_NAME}"
KUBECONFIG_PATH="${CLUSTER_DIR}/kubeconfig.yaml"

LOG_PREFIX=cluster
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin_dir() { "${ROOT}/hack/tools.sh" bindir; }

use_tools() {
  local bin
  bin="$(bin_dir)"
  [[ -x "${bin}/kwokctl" && -x "${bin}/kube-apiserver" ]] || "${ROOT}/hack/tools.sh" build
  # The built tools go first: kwokctl runs `kubectl` from PATH for its health checks, and the machine may ship an
  # older kubectl.
  export PATH="${bin}:${PATH}"
  BIN="${bin}"
}

healthy() {
  [[ -f "${KUBECONFIG_PATH}" ]] || return 1
  "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get --raw /readyz --request-timeout=5s >/dev/null 2>&1
}

# Kill whatever still runs from this cluster's folder: every component is started with paths inside it.
kill_leftovers() {
  local pids
  pids="$(pgrep -f -- "${CLUSTER_DIR}/" || true)"
  if [[ -n "${pids}" ]]; then
    log "stopping leftover processes: $(echo "${pids}" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    kill ${pids} 2>/dev/null || true
    for _ in $(seq 1 50); do
      pgrep -f -- "${CLUSTER_DIR}/" >/dev/null || return 0
      sleep 0.1
    done
    # shellcheck disable=SC2046
    kill -9 $(pgrep -f -- "${CLUSTER_DIR}/") 2>/dev/null || true
  fi
}

cmd_down() {
  use_tools
  if [[ -d "${CLUSTER_DIR}" ]]; then
    log "deleting cluster ${CLUSTER_NAME}"
    kwokctl delete cluster --name "${CLUSTER_NAME}" >/dev/null 2>&1 || true
  fi
  kill_leftovers
  rm -rf "${CLUSTER_DIR}"
  log "cluster ${CLUSTER_NAME} is down"
}

wait_for() {
  # wait_for DESCRIPTION TIMEOUT_SECONDS CMD...
  local what="$1" timeout="$2"
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for ${what}; component logs: ${CLUSTER_DIR}/logs"
    sleep 0.5
  done
}

cmd_up() {
  use_tools
  mkdir -p "${KWOK_WORKDIR}"
  local start=${SECONDS}
  if healthy; then
    log "cluster ${CLUSTER_NAME} is already up"
  else
    if [[ -d "${CLUSTER_DIR}" ]] || pgrep -f -- "${CLUSTER_DIR}/" >/dev/null; then
      log "found a stale cluster ${CLUSTER_NAME} (not answering); removing it"
      cmd_down
    fi
    log "creating cluster ${CLUSTER_NAME} (binary runtime, Kubernetes $("${BIN}/kube-apiserver" --version | awk '{print $2}'))"
    if ! kwokctl create cluster \
      --name "${CLUSTER_NAME}" \
      --runtime binary \
      --config "${ROOT}/hack/kwokctl.yaml" \
      --kubeconfig "" \
      --etcd-binary "${BIN}/etcd" \
      --kube-apiserver-binary "${BIN}/kube-apiserver" \
      --kube-controller-manager-binary "${BIN}/kube-controller-manager" \
      --kube-scheduler-binary "${BIN}/kube-scheduler" \
      --kwok-controller-binary "${BIN}/kwok" \
      --kube-audit-policy "${ROOT}/hack/audit-policy.yaml" \
      --kube-authorization=true \
      --kube-admission=true \
      --wait 120s >"${KWOK_WORKDIR}/create-${CLUSTER_NAME}.log" 2>&1; then
      tail -n 30 "${KWOK_WORKDIR}/create-${CLUSTER_NAME}.log" >&2
      die "kwokctl create cluster failed; full log: ${KWOK_WORKDIR}/create-${CLUSTER_NAME}.log"
    fi
  fi
  local have
  have="$("${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get nodes -o name 2>/dev/null | wc -l)"
  if ((have < NODES)); then
    log "adding ${NODES} kwok node(s)"
    kwokctl scale node --name "${CLUSTER_NAME}" --replicas "${NODES}" >/dev/null
  fi
  wait_for "a Ready node" 60 "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" wait --for=condition=Ready node --all --timeout=2s
  wait_for "the default ServiceAccount" 60 "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get serviceaccount default -n default
  log "cluster ${CLUSTER_NAME} ready in $((SECONDS - start))s; kubeconfig: ${KUBECONFIG_PATH}"
}

cmd_status() {
  use_tools
  if healthy; then
    "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get nodes
  else
    log "cluster ${CLUSTER_NAME} is not running (make cluster-up starts it)"
    return 1
  fi
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
kubeconfig) printf '%s\n' "${KUBECONFIG_PATH}" ;;
audit-log) printf '%s\n' "${CLUSTER_DIR}/logs/audit.log" ;;
*) die "usage: hack/cluster.sh up | down | status | kubeconfig | audit-log" ;;
esac
