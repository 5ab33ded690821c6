#!/usr/bin/env bash
# The kind backend: a real one-node cluster whose pods are real containers, with the operator image built from the
# Dockerfile and the e2e web images loaded into it. Used by `make e2e-kind`, `make kind-up/kind-down/kind-load` and
# CLUSTER=kind for the test suites and `make demo`.
#
# The engine is whatever hack/engine.sh detects (Docker that runs privileged containers, else rootful podman through
# kind's KIND_EXPERIMENTAL_PROVIDER=podman); the node image is the pinned kindest/node or its offline build
# (hack/kind-node-image.sh). With the offline image the cluster uses the node's static ptp CNI config
# (networking.disableDefaultCNI); on a cgroup v1 host the kubelet is told to accept cgroup v1 (failCgroupV1: false).
#
# Two nodes, both running pods (the control plane's NoSchedule taint is removed): a node can be drained while the
# other serves (tests/e2e/test_availability.py). With the offline node image the static ptp CNI config is rewritten
# on each node for the pod CIDR kube-controller-manager gave it, and each node gets a route to the others' pod CIDRs
# (what kindnetd does); pods started before that on a node with another CIDR are deleted, to come back with an
# address of the right range.
#
# Usage: hack/kind.sh up | down | status | kubeconfig | load-image | load-web | web-images | config | registry-hosts
#   KIND_REGISTRY=<host:port> a registry on this machine (hack/registry.sh) the nodes pull from over HTTP (up, and
#                           registry-hosts for a running cluster); `config` prints the cluster config up uses
#   IMG=<name:tag>          the operator image (default localhost/webserver-operator:<the chart appVersion>)
#   KIND_CLUSTER_NAME=<name> the kind cluster. up, down, status, kubeconfig and load-web: default webserver-operator
#                           (the project's own, which e2e-kind creates and deletes). load-image (`make kind-load`,
#                           for your cluster): default your only kind cluster, else the one your kubectl context
#                           points at (kind-<name>), else webserver-operator if it exists.
#   KIND_WORKERS=<n>        worker nodes besides the control plane (default 1; 0: the one-node cluster of before)
#   KIND=<path>             the kind binary (default: kind from PATH when >= the pinned KIND_VERSION, else the
#                           project's build; hack/tools.sh pick says which). load-image takes any kind on PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
DEFAULT_CLUSTER_NAME=webserver-operator
CLUSTER_NAME="${KIND_CLUSTER_NAME:-${DEFAULT_CLUSTER_NAME}}"
IMG="${IMG:-localhost/webserver-operator:0.1.0}"
KIND_WORKERS="${KIND_WORKERS:-1}"
STATE="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/kind"
KUBECONFIG_PATH="${STATE}/${CLUSTER_NAME}.kubeconfig"
# kind's node subnets; the offline node image's CNI config allocates from the first node's /24 of POD_SUBNET.
POD_SUBNET=10.244.0.0/16
SERVICE_SUBNET=10.96.0.0/16

LOG_PREFIX=kind
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"

use_engine() {
  ENGINE="${ENGINE:-$("${ROOT}/hack/engine.sh" detect)}"
  export ENGINE
  if [[ "${ENGINE}" == podman ]]; then
    export KIND_EXPERIMENTAL_PROVIDER=podman
  fi
}

# kind_bin: the kind to run, picked once (yours from PATH when recent enough, else the project's build, built now if
# missing).
kind_bin() {
  if [[ -z "${KIND:-}" ]]; then
    KIND="$("${ROOT}/hack/tools.sh" ensure kind)"
    export KIND
  fi
  printf '%s\n' "${KIND}"
}

# load_cluster_name: the cluster `load-image` loads into, by the rule in the header; dies listing the clusters when
# the choice is not clear.
load_cluster_name() {
  if [[ -n "${KIND_CLUSTER_NAME:-}" ]]; then
    printf '%s\n' "${KIND_CLUSTER_NAME}"
    return
  fi
  local kind clusters=() current line
  kind="$(kind_bin)"
  while IFS= read -r line; do
    [[ -n "${line}" && "${line}" != "No kind clusters found"* ]] && clusters+=("${line}")
  done < <("${kind}" get clusters 2>/dev/null || true)
  if ((${#clusters[@]} == 0)); then
    die "no kind cluster exists: create one (\`kind create cluster\`, or \`make kind-up\` for the project's), then run this again"
  fi
  if ((${#clusters[@]} == 1)); then
    log "loading into the only kind cluster, ${clusters[0]} (KIND_CLUSTER_NAME=<name> picks another)"
    printf '%s\n' "${clusters[0]}"
    return
  fi
  current="$(kubectl config current-context 2>/dev/null || true)"
  if [[ "${current}" == kind-* ]] && printf '%s\n' "${clusters[@]}" | grep -qxF "${current#kind-}"; then
    log "loading into ${current#kind-}, the kind cluster of your kubectl context (KIND_CLUSTER_NAME=<name> picks another)"
    printf '%s\n' "${current#kind-}"
    return
  fi
  if printf '%s\n' "${clusters[@]}" | grep -qxF "${DEFAULT_CLUSTER_NAME}"; then
    log "loading into the project's kind cluster ${DEFAULT_CLUSTER_NAME} (KIND_CLUSTER_NAME=<name> picks another)"
    printf '%s\n' "${DEFAULT_CLUSTER_NAME}"
    return
  fi
  die "several kind clusters exist (${clusters[*]}) and none is the current kubectl context: pass KIND_CLUSTER_NAME=<name>"
}

cluster_exists() { "$1" get clusters 2>/dev/null | grep -qxF "${CLUSTER_NAME}"; }

cluster_config() {
  local image="$1"
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  podSubnet: ${POD_SUBNET}
  serviceSubnet: ${SERVICE_SUBNET}
EOF
  if [[ "${image}" != *"${KIND_NODE_IMAGE}" ]]; then
    printf '  disableDefaultCNI: true\n'
  fi
  printf 'nodes:\n  - role: control-plane\n'
  local i
  for ((i = 0; i < KIND_WORKERS; i++)); do
    printf '  - role: worker\n'
  done
  # containerd reads per-registry hosts from config_path (kind's default for containerd 2, set here so that it holds on
  # every node image, with or without KIND_REGISTRY): registry_hosts writes the one for a registry there, at `up` or
  # later on the running cluster (`KIND_REGISTRY=... hack/kind.sh registry-hosts`, as tests/e2e/test_release_install.py
  # does on the cluster of `make e2e-kind`).
  cat <<'EOF'
containerdConfigPatches:
  - |-
    [plugins."io.containerd.cri.v1.images".registry]
      config_path = "/etc/containerd/certs.d"
EOF
  if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
    cat <<'EOF'
kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
EOF
  fi
}

cmd_up() {
  use_engine
  local kind image
  kind="$(kind_bin)"
  mkdir -p "${STATE}"
  if cluster_exists "${kind}"; then
    log "kind cluster ${CLUSTER_NAME} exists (${ENGINE})"
  else
    image="$("${ROOT}/hack/kind-node-image.sh" ensure)"
    cluster_config "${image}" >"${STATE}/${CLUSTER_NAME}.yaml"
    log "creating kind cluster ${CLUSTER_NAME} with ${ENGINE} (${image})"
    "${kind}" create cluster --name "${CLUSTER_NAME}" --image "${image}" --config "${STATE}/${CLUSTER_NAME}.yaml" \
      --kubeconfig "${KUBECONFIG_PATH}" --wait 180s
    if [[ "${image}" != *"${KIND_NODE_IMAGE}" ]]; then
      node_networks
    fi
    if ((KIND_WORKERS > 0)); then
      # Every node runs pods, so draining one leaves another to run them.
      kube taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null 2>&1 || true
    fi
  fi
  "${kind}" get kubeconfig --name "${CLUSTER_NAME}" >"${KUBECONFIG_PATH}"
  if [[ -n "${KIND_REGISTRY:-}" ]]; then registry_hosts; fi
  "${ROOT}/hack/images.sh" operator "${IMG}"
  cmd_load_image
  cmd_load_web
}

# registry_hosts: let every node pull KIND_REGISTRY (host:port of a registry on this machine, e.g. hack/registry.sh
# with REGISTRY_ADDRESS=0.0.0.0:5001, named 127.0.0.1:5001 in image references) over plain HTTP at the kind network's
# gateway, which is this machine seen from the nodes: a hosts.toml under containerd's config_path.
registry_hosts() {
  local registry="${KIND_REGISTRY}" port gateway node
  port="${registry##*:}"
  [[ "${port}" =~ ^[0-9]+$ ]] || die "KIND_REGISTRY=${registry}: give host:port of the registry (hack/registry.sh address)"
  if [[ "${ENGINE}" == podman ]]; then
    gateway="$(podman network inspect kind --format '{{range .Subnets}}{{if .Gateway.To4}}{{.Gateway}}{{end}}{{end}}')"
  else
    gateway="$(docker network inspect kind --format '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' |
      tr ' ' '\n' | grep -m 1 -E '^[0-9]+\.' || true)"
  fi
  [[ -n "${gateway}" ]] || die "cannot find the IPv4 gateway of the ${ENGINE} network kind: the nodes cannot reach ${registry}"
  for node in $("$(kind_bin)" get nodes --name "${CLUSTER_NAME}"); do
    printf 'server = "http://%s"\n\n[host."http://%s:%s"]\n  capabilities = ["pull", "resolve"]\n' \
      "${registry}" "${gateway}" "${port}" |
      "${ENGINE}" exec -i "${node}" sh -c "mkdir -p '/etc/containerd/certs.d/${registry}' && cat >'/etc/containerd/certs.d/${registry}/hosts.toml'"
  done
  log "nodes of ${CLUSTER_NAME} pull ${registry} from http://${gateway}:${port}"
}

kube() { "$("${ROOT}/hack/tools.sh" ensure kubectl)" --kubeconfig "${KUBECONFIG_PATH}" "$@"; }

# node_networks: the static ptp CNI config of each node set to the node's pod CIDR, and routes between the nodes'
# pod CIDRs (the offline node image has no kindnetd).
node_networks() {
  local rows=() row name cidr ip other oname ocidr oip
  while IFS= read -r row; do
    [[ -n "${row}" ]] && rows+=("${row}")
  done < <(kube get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
  ((${#rows[@]} > 1)) || return 0
  for row in "${rows[@]}"; do
    read -r name cidr ip <<<"${row}"
    [[ -n "${cidr}" && -n "${ip}" ]] || die "node ${name} has no pod CIDR or address yet (${row})"
    log "node ${name}: pods in ${cidr}"
    sed "s#10.244.0.0/24#${cidr}#" "${ROOT}/hack/kind-node/rootfs/etc/cni/net.d/10-kind-ptp.conflist" |
      "${ENGINE}" exec -i "${name}" sh -c 'cat >/etc/cni/net.d/10-kind-ptp.conflist'
    for other in "${rows[@]}"; do
      read -r oname ocidr oip <<<"${other}"
      [[ "${oname}" == "${name}" ]] || "${ENGINE}" exec "${name}" ip route replace "${ocidr}" via "${oip}"
    done
    if [[ "${cidr}" != 10.244.0.0/24 ]]; then
      kube delete pods -A --field-selector "spec.nodeName=${name},spec.hostNetwork=false" --wait=false >/dev/null
    fi
  done
}

# load ARCHIVE-OR-IMAGE...: images from the engine's store into the cluster's containerd.
load_images() {
  local kind
  kind="$(kind_bin)"
  if [[ "${ENGINE}" == docker ]]; then
    "${kind}" load docker-image --name "${CLUSTER_NAME}" "$@"
  else
    # kind's `load docker-image` calls the docker CLI; with podman, save an archive and load that. The archive is
    # this run's own file (`podman save` will not write over one a killed or concurrent run left), removed on exit.
    mkdir -p "${STATE}"
    rm -f "${STATE}/load.tar" # the fixed name older versions used; a killed run could leave it (330 MB)
    LOAD_ARCHIVE="$(mktemp "${STATE}/load.XXXXXX.tar")"
    trap 'rm -f "${LOAD_ARCHIVE}"' EXIT
    rm -f "${LOAD_ARCHIVE}"
    podman save --format docker-archive -m -o "${LOAD_ARCHIVE}" "$@" >/dev/null
    "${kind}" load image-archive --name "${CLUSTER_NAME}" "${LOAD_ARCHIVE}"
    rm -f "${LOAD_ARCHIVE}"
  fi
}

# load-image: IMG as `make docker-build` left it in the engine's store; never rebuilt here.
cmd_load_image() {
  use_engine
  "${ENGINE}" image inspect "${IMG}" >/dev/null 2>&1 ||
    die "${IMG} is not in ${ENGINE}'s images: build it first (\`make docker-build kind-load\`, or \`make docker-build IMG=${IMG}\`)"
  log "loading ${IMG} into ${CLUSTER_NAME}"
  load_images "${IMG}"
}

cmd_load_web() {
  use_engine
  local images=() line
  while IFS= read -r line; do images+=("${line}"); done < <("${ROOT}/hack/images.sh" web)
  log "loading the e2e web images into ${CLUSTER_NAME}: ${images[*]}"
  load_images "${images[@]}"
}

cmd_down() {
  use_engine
  local kind
  kind="$(kind_bin)"
  if cluster_exists "${kind}"; then
    "${kind}" delete cluster --name "${CLUSTER_NAME}"
  fi
  rm -f "${KUBECONFIG_PATH}" "${STATE}/${CLUSTER_NAME}.yaml"
  # kind leaves its network behind (shared by all kind clusters): remove it once no container uses it.
  if "${ENGINE}" network inspect kind >/dev/null 2>&1 &&
    [[ -z "$("${ENGINE}" ps -aq --filter network=kind)" ]]; then
    "${ENGINE}" network rm kind >/dev/null && log "removed the unused ${ENGINE} network kind"
  fi
  local left
  left="$("${ENGINE}" ps -aq --filter "label=io.x-k8s.kind.cluster=${CLUSTER_NAME}")"
  [[ -z "${left}" ]] || die "containers of ${CLUSTER_NAME} are still there: ${left}"
}

# status: exit 0 when the cluster exists and its API server answers.
cmd_status() {
  use_engine
  local kind
  kind="$(kind_bin)"
  cluster_exists "${kind}" || { log "kind cluster ${CLUSTER_NAME} does not exist"; return 1; }
  "${kind}" get kubeconfig --name "${CLUSTER_NAME}" >"${KUBECONFIG_PATH}"
  "$("${ROOT}/hack/tools.sh" ensure kubectl)" --kubeconfig "${KUBECONFIG_PATH}" get nodes -o wide
}

case "${1:-}" in
up) cmd_up ;;
status) cmd_status ;;
down) cmd_down ;;
load-image)
  # Loading needs neither a privileged container nor a recent kind: the engine that built the image (`hack/engine.sh
  # builder`, as `make docker-build` picks it) and any kind on PATH (`kind load docker-image` and `load image-archive`
  # are in every release); the project's kind is built only when none is on PATH.
  ENGINE="$("${ROOT}/hack/engine.sh" builder)"
  export ENGINE
  [[ "${ENGINE}" == podman ]] && export KIND_EXPERIMENTAL_PROVIDER=podman
  if [[ -z "${KIND:-}" ]] && command -v kind >/dev/null; then
    KIND="$(command -v kind)"
    log "kind: $("${KIND}" version 2>/dev/null | grep -oE 'v[0-9]+\.[0-9]+\.[0-9]+' | head -n 1 || true) from PATH (${KIND}); any version loads images (KIND=<path> picks another)"
    export KIND
  fi
  CLUSTER_NAME="$(load_cluster_name)"
  cmd_load_image
  ;;
load-web) cmd_load_web ;;
kubeconfig) printf '%s\n' "${KUBECONFIG_PATH}" ;;
config) cluster_config "${2:-${KIND_NODE_IMAGE}}" ;;
registry-hosts)
  use_engine
  registry_hosts
  ;;
web-images) "${ROOT}/hack/images.sh" web-names ;;
*) die "usage: hack/kind.sh up | down | status | kubeconfig | load-image | load-web | web-images | config [IMAGE] | registry-hosts" ;;
esac
