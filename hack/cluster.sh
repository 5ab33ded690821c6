#!/usr/bin/env bash
# Run the project's local Kubernetes control plane: real etcd, kube-apiserver (RBAC, default admission plugins incl.
# PodSecurity), kube-controller-manager and kube-scheduler built from Go modules by hack/tools.sh, plus kwok, which
# simulates nodes and pods (no container runtime needed). kwokctl's `binary` runtime supervises the processes.
#
# Usage: hack/cluster.sh up | down | kubeconfig | status | audit-log
#
# Environment: NODES (kwok nodes, default 1; each advertises 110 pods), CLUSTER_NAME, KWOK_WORKDIR, AUDIT_POLICY (an
# audit policy file instead of hack/audit-policy.yaml, applied when the cluster is created), NODE_READY_TIMEOUT
# (seconds to wait for every node to be Ready, default 60 + 2 per node), NODE_PORT_RANGE (kube-apiserver's
# --service-node-port-range for a new cluster, e.g. 30000-35999 for the benchmark's 5000 NodePort Services; default
# Kubernetes' own 30000-32767, which the tests and the CRD's nodePort bounds assume), SHARDED_LIST_WATCH (1, the
# default: kube-apiserver runs with the ShardedListAndWatch feature gate and filters lists and watches that carry a
# shardSelector; 0: the gate is off and the server ignores the parameter, which exercises the operator's client-side
# fallback; applied when the cluster is created), KCM_API_QPS (the client QPS of kube-controller-manager for a new
# cluster, burst twice that; default Kubernetes' own 20, burst 30: the benchmark raises it so that making 1000
# Deployments available is not paced by the controller-manager's client).
#
# State lives outside the repository (KWOK_WORKDIR under the tools cache), so clones share one cluster and
# `git clean` never strands running processes. `up` is idempotent: it reuses a healthy cluster and wipes a stale one
# (for example after a killed run) before creating a new one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER_NAME="${CLUSTER_NAME:-webserver-operator}"
NODES="${NODES:-1}"
AUDIT_POLICY="${AUDIT_POLICY:-${ROOT}/hack/audit-policy.yaml}"
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
  # Only what this script runs (no helm, promtool or kind).
  [[ -x "${bin}/kwokctl" && -x "${bin}/kwok" && -x "${bin}/etcd" && -x "${bin}/kube-apiserver" ]] ||
    "${ROOT}/hack/tools.sh" build cluster
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
  if [[ -d "${CLUSTER_DIR}" ]]; then
    use_tools # only when there is a cluster to delete: stopping nothing must never build the tools
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

# nodes_ready N: at least N nodes report Ready=True. One list per check, so the cost does not grow with the number of
# nodes the way `kubectl wait --all --timeout` does (its timeout is shared by all nodes).
nodes_ready() {
  local ready
  ready="$("${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get nodes --request-timeout=10s \
    -o jsonpath='{range .items[*]}{range .status.conditions[?(@.type=="Ready")]}{.status}{"\n"}{end}{end}' |
    grep -c '^True$')" || return 1
  ((ready >= $1))
}

# The kwokctl configuration for a new cluster: hack/kwokctl.yaml as it is when none of NODE_PORT_RANGE,
# SHARDED_LIST_WATCH=0 and KCM_API_QPS asks for a change, else a copy written next to the cluster's state (never into
# the repository) with --service-node-port-range added, the ShardedListAndWatch gate turned off and/or
# --kube-api-qps/--kube-api-burst added for kube-controller-manager.
kwokctl_config() {
  local base="${ROOT}/hack/kwokctl.yaml"
  local gate
  gate="$(sharded_list_watch)"
  if [[ -z "${NODE_PORT_RANGE:-}" && "${gate}" == 1 && -z "${KCM_API_QPS:-}" ]]; then
    echo "${base}"
    return
  fi
  [[ -z "${NODE_PORT_RANGE:-}" || "${NODE_PORT_RANGE}" =~ ^[0-9]+-[0-9]+$ ]] ||
    die "NODE_PORT_RANGE=${NODE_PORT_RANGE}: expected <first>-<last>, e.g. 30000-35999"
  [[ -z "${KCM_API_QPS:-}" || "${KCM_API_QPS}" =~ ^[1-9][0-9]*$ ]] ||
    die "KCM_API_QPS=${KCM_API_QPS}: expected a whole number of requests per second, e.g. 200"
  local out="${KWOK_WORKDIR}/kwokctl-${CLUSTER_NAME}.yaml"
  awk -v range="${NODE_PORT_RANGE:-}" -v gate="${gate}" -v qps="${KCM_API_QPS:-}" '
    gate == 0 && /^        value: ShardedListAndWatch=true$/ { print "        value: ShardedListAndWatch=false"; next }
    gate == "none" && /^      - key: feature-gates$/ { held = $0; next }
    gate == "none" && held != "" && /^        value: ShardedListAndWatch=true$/ { held = ""; next }
    held != "" { print held; held = "" }
    { print }
    /^  - name: / { component = $3 }
    component == "kube-apiserver" && range != "" && /^    extraArgs:$/ {
      print "      - key: service-node-port-range"; print "        value: " range
    }
    component == "kube-controller-manager" && qps != "" && /^    extraArgs:$/ {
      print "      - key: kube-api-qps"; print "        value: \"" qps "\""
      print "      - key: kube-api-burst"; print "        value: \"" qps * 2 "\""
    }
  ' "${base}" >"${out}"
  [[ -z "${NODE_PORT_RANGE:-}" ]] || grep -q "value: ${NODE_PORT_RANGE}\$" "${out}" ||
    die "could not add service-node-port-range to ${out}: the kube-apiserver section of ${base} no longer has extraArgs"
  [[ "${gate}" != none ]] || ! grep -q "value: ShardedListAndWatch=" "${out}" ||
    die "could not take the ShardedListAndWatch gate out of ${out} for Kubernetes line ${KUBERNETES_LINE}: ${base} sets it in a form hack/cluster.sh does not know"
  [[ "${gate}" != 0 ]] || grep -q "value: ShardedListAndWatch=false\$" "${out}" ||
    die "could not turn the ShardedListAndWatch gate off in ${out}: ${base} no longer sets feature-gates ShardedListAndWatch=true for kube-apiserver"
  [[ -z "${KCM_API_QPS:-}" ]] || grep -q "key: kube-api-qps\$" "${out}" ||
    die "could not add kube-api-qps to ${out}: the kube-controller-manager section of ${base} no longer has extraArgs"
  echo "${out}"
}

# sharded_list_watch_on: this cluster's kube-apiserver filters by shardSelector (it echoes metadata.shardInfo on a
# list that carries one; with the gate off it ignores the parameter and omits shardInfo).
SHARD_PROBE="/api/v1/namespaces?limit=1&shardSelector=shardRange%28object.metadata.namespace%2C%20%270x0000000000000000%27%2C%20%270x10000000000000000%27%29"
sharded_list_watch_on() {
  "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get --raw "${SHARD_PROBE}" --request-timeout=10s | grep -q '"shardInfo"'
}

# sharded_list_watch: how a new cluster's kube-apiserver gets the ShardedListAndWatch gate: 1 (on), 0 (off), or none
# on the oldest Kubernetes line, whose kube-apiserver does not know the gate (it is new in 1.36) and would refuse to
# start with it named at all.
sharded_list_watch() {
  if [[ "${KUBERNETES_LINE:-newest}" == oldest ]]; then
    [[ "${SHARDED_LIST_WATCH:-0}" == 0 ]] ||
      die "SHARDED_LIST_WATCH=${SHARDED_LIST_WATCH}: the oldest Kubernetes line has no ShardedListAndWatch gate (it is new in 1.36); leave it unset or 0"
    echo none
  else
    echo "${SHARDED_LIST_WATCH:-1}"
  fi
}

cmd_up() {
  [[ "${SHARDED_LIST_WATCH:-1}" == 0 || "${SHARDED_LIST_WATCH:-1}" == 1 ]] ||
    die "SHARDED_LIST_WATCH=${SHARDED_LIST_WATCH}: expected 1 (the ShardedListAndWatch gate on, the default) or 0 (off)"
  sharded_list_watch >/dev/null
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
    local config
    config="$(kwokctl_config)"
    log "creating cluster ${CLUSTER_NAME} (binary runtime, Kubernetes $("${BIN}/kube-apiserver" --version | awk '{print $2}')${NODE_PORT_RANGE:+, nodePorts ${NODE_PORT_RANGE}}${KCM_API_QPS:+, controller-manager QPS ${KCM_API_QPS}}, ShardedListAndWatch $(case "$(sharded_list_watch)" in 1) echo on ;; 0) echo off ;; *) echo "not in this version" ;; esac))"
    if ! kwokctl create cluster \
      --name "${CLUSTER_NAME}" \
      --runtime binary \
      --config "${config}" \
      --kubeconfig "" \
      --etcd-binary "${BIN}/etcd" \
      --kube-apiserver-binary "${BIN}/kube-apiserver" \
      --kube-controller-manager-binary "${BIN}/kube-controller-manager" \
      --kube-scheduler-binary "${BIN}/kube-scheduler" \
      --kwok-controller-binary "${BIN}/kwok" \
      --kube-audit-policy "${AUDIT_POLICY}" \
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
    log "scaling to ${NODES} kwok node(s) (${have} now)"
    # kwokctl logs JSON lines on stderr: they go to a file, so callers (the demo) print only their own lines.
    local scale_log="${KWOK_WORKDIR}/scale-${CLUSTER_NAME}.log"
    if ! kwokctl scale node --name "${CLUSTER_NAME}" --replicas "${NODES}" >"${scale_log}" 2>&1; then
      tail -n 20 "${scale_log}" >&2
      die "kwokctl scale node failed; full log: ${scale_log}"
    fi
  fi
  wait_for "${NODES} Ready node(s)" "${NODE_READY_TIMEOUT:-$((60 + 2 * NODES))}" nodes_ready "${NODES}"
  local range
  range="$("${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" get servicecidr kubernetes -o jsonpath='{.spec.cidrs[0]}' 2>/dev/null || true)"
  # The ServiceCIDR API answers from Kubernetes 1.33 (GA; beta and off by default before): an older control plane
  # (KUBERNETES_LINE=oldest) cannot say, and gets the range hack/kwokctl.yaml asks for anyway.
  if [[ -n "${range}" && "${range}" != "10.96.0.0/16" ]]; then
    log "WARNING: this cluster's Service range is ${range:-unknown}, not 10.96.0.0/16 (it was created with an older hack/kwokctl.yaml): run 'make cluster-down cluster-up' for room for 65k Services"
  fi
  local want_gate have_gate=0
  want_gate="$(sharded_list_watch)"
  [[ "${want_gate}" != none ]] || want_gate=0
  sharded_list_watch_on && have_gate=1
  if [[ "${have_gate}" != "${want_gate}" ]]; then
    log "WARNING: this cluster's kube-apiserver runs with the ShardedListAndWatch gate $( ((have_gate)) && echo on || echo off), but SHARDED_LIST_WATCH=${want_gate} asks for it $( ((want_gate)) && echo on || echo off) (the gate is set when a cluster is created): run 'SHARDED_LIST_WATCH=${want_gate} make cluster-down cluster-up', or use another CLUSTER_NAME"
  fi
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
