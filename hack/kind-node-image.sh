#!/usr/bin/env bash
# The kind node image: the pinned kindest/node where it can be pulled, otherwise the same thing built offline.
#
# Offline recipe (no registry needed; Debian's mirror and the Go module proxy are):
#   1. binaries, built on the host from Go modules into a cache keyed by every input: containerd, runc (cgo, static,
#      with seccomp), crictl, the CNI plugins, coredns, etcd (the version kubeadm asks for), pause (kubeadm's own
#      pause.c from the k8s.io/kubernetes module); kubelet, kubeadm, kube-proxy and kubectl come from hack/tools.sh
#   2. a Debian base from debootstrap (hack/debian-base.sh)
#   3. the node stage: kind's images/base recipe from the kind Go module, hack/kind-node/node.Containerfile
#   4. the images kubeadm asks for (`kubeadm config images list`), tagged exactly as it names them: minimal images
#      holding the static binaries, and kube-proxy on Debian with iptables
#   5. those images imported into the node's containerd (pinned, as `kind build node-image` does), then committed
#      as the node image, tagged with the cache key: it is rebuilt only when an input changes.
#
# Usage: hack/kind-node-image.sh ensure   print the node image to use, building it first if needed
#        hack/kind-node-image.sh name     print the offline image's name (with its cache key), build nothing
#        hack/kind-node-image.sh key      print the cache key
# Environment: ENGINE (default: hack/engine.sh detect); KIND_NODE_IMAGE_SOURCE=auto|pull|build (default auto).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
LOG_PREFIX=node-image
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"

export GOTOOLCHAIN=local
export GOFLAGS="-mod=mod"
RECIPE="${ROOT}/hack/kind-node"
STEPS=6

# Two keys: the binaries depend on the pinned versions and the Go toolchain only; the image also on its recipe (this
# script, the node stage and its files, the Debian base recipe). Editing the recipe rebuilds the image, not the binaries.
versions_key() {
  {
    grep -E '^(KUBERNETES_VERSION|KUBERNETES_STAGING_VERSION|KIND_VERSION|CONTAINERD_VERSION|RUNC_VERSION|CRICTL_VERSION|CNI_PLUGINS_VERSION|KUBEADM_ETCD_VERSION|COREDNS_VERSION|PAUSE_VERSION|TOOLS_RECIPE|KIND_NODE_BINARIES_RECIPE)=' \
      "${ROOT}/hack/versions.env"
    go env GOVERSION GOOS GOARCH
  } | sha256sum | cut -c1-12
}

node_key() {
  {
    printf '%s\n' "${BIN_KEY}"
    grep -E '^KIND_NODE_(DEBIAN_RELEASE|RECIPE)=' "${ROOT}/hack/versions.env"
    (cd "${ROOT}" && find hack/kind-node hack/kind-node-image.sh hack/debian-base.sh -type f -print0 | sort -z |
      xargs -0 sha256sum)
  } | sha256sum | cut -c1-12
}

BIN_KEY="$(versions_key)"
KEY="$(node_key)"
NAME="localhost/webserver-operator/kind-node:${KUBERNETES_VERSION}-${KEY}"
CACHE_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/kind-node"
CACHE="${CACHE_ROOT}/${KEY}"
BIN="${CACHE_ROOT}/bin-${BIN_KEY}"
LOGS="${CACHE}/logs"
STAMPS="${BIN}/.stamps"

step() { log "[$1/${STEPS}] $2"; }

run_logged() {
  local name="$1" start=${SECONDS}
  shift
  if ! "$@" >"${LOGS}/${name}.log" 2>&1; then
    tail -n 40 "${LOGS}/${name}.log" >&2
    die "${name} failed after $((SECONDS - start))s; full log: ${LOGS}/${name}.log"
  fi
  log "    ${name}: done in $((SECONDS - start))s"
}

# gobuild NAME CMD...: a build step that runs once per cache key.
gobuild() {
  local name="$1"
  shift
  [[ -f "${STAMPS}/${name}" ]] && return 0
  run_logged "${name}" "$@"
  touch "${STAMPS}/${name}"
}

# Lean static binaries: no cgo unless required, no symbol tables, reproducible paths.
GO_LEAN=(-trimpath)
LDFLAGS_LEAN="-s -w"

build_binaries() {
  step 1 "binaries from Go modules (cache: ${BIN}; logs: ${LOGS})"
  command -v go >/dev/null || die "go is not on PATH: install Go >= 1.26"
  "${ROOT}/hack/tools.sh" build node
  local tools
  tools="$("${ROOT}/hack/tools.sh" bindir)"
  local c
  for c in kubelet kubeadm kube-proxy kubectl kube-apiserver kube-controller-manager kube-scheduler; do
    install -m 0755 "${tools}/${c}" "${BIN}/${c}"
  done

  CGO_ENABLED=0 GOBIN="${BIN}" gobuild containerd go install "${GO_LEAN[@]}" \
    -tags "no_aufs no_zfs no_btrfs no_devmapper" \
    -ldflags "${LDFLAGS_LEAN} -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/containerd@${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/ctr@${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${CONTAINERD_VERSION}"
  # runc needs cgo (its nsenter is C) and libseccomp; linked statically, as runc's own `make static` does.
  if [[ ! -f "${STAMPS}/runc" ]]; then
    [[ -f /usr/lib/x86_64-linux-gnu/libseccomp.a || -n "$(find /usr/lib -name libseccomp.a -print -quit)" ]] ||
      die "libseccomp.a not found: run \`make engine\` (installs libseccomp-dev for the runc build)"
  fi
  CGO_ENABLED=1 GOBIN="${BIN}" gobuild runc go install "${GO_LEAN[@]}" -buildmode=pie \
    -tags "seccomp urfave_cli_no_docs netgo osusergo" \
    -ldflags "${LDFLAGS_LEAN} -linkmode external -extldflags -static-pie" \
    "github.com/opencontainers/runc@${RUNC_VERSION}"
  # Built inside a module that requires it: `go install crictl@version` asks the proxy for the module's version list
  # (to report deprecations), which some proxies refuse.
  CGO_ENABLED=0 in_module crictl "sigs.k8s.io/cri-tools@${CRICTL_VERSION}" go build "${GO_LEAN[@]}" \
    -ldflags "${LDFLAGS_LEAN} -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION}" \
    -o "${BIN}/crictl" sigs.k8s.io/cri-tools/cmd/crictl
  local cni=github.com/containernetworking/plugins
  CGO_ENABLED=0 GOBIN="${BIN}/cni" gobuild cni-plugins go install "${GO_LEAN[@]}" \
    -ldflags "${LDFLAGS_LEAN} -X ${cni}/pkg/utils/buildversion.BuildVersion=${CNI_PLUGINS_VERSION}" \
    "${cni}/plugins/main/ptp@${CNI_PLUGINS_VERSION}" "${cni}/plugins/main/loopback@${CNI_PLUGINS_VERSION}" \
    "${cni}/plugins/ipam/host-local@${CNI_PLUGINS_VERSION}" "${cni}/plugins/meta/portmap@${CNI_PLUGINS_VERSION}"
  build_coredns
  build_etcd
  build_pause
}

# in_module NAME MODULE@VERSION CMD...: run a build step (once) in a throw-away module that requires MODULE@VERSION.
in_module() {
  local name="$1" requirement="$2"
  shift 2
  [[ -f "${STAMPS}/${name}" ]] && return 0
  local dir="${BIN}/.src/${name}"
  rm -rf "${dir}" && mkdir -p "${dir}"
  (
    cd "${dir}"
    go mod init "webserver-operator.local/kind-node/${name}" >/dev/null 2>&1
    go mod edit -require "${requirement}"
    gobuild "${name}" "$@"
  )
}

# CoreDNS with the plugins kubeadm's Corefile uses (errors, health, ready, kubernetes, prometheus, forward, cache,
# loop, reload, loadbalance) plus log: upstream's main compiles in every plugin, cloud SDKs included, which triples
# the build time for nothing a kind cluster uses. Plugins register themselves when imported.
build_coredns() {
  [[ -f "${STAMPS}/coredns" ]] && return 0
  local dir="${BIN}/.src/coredns" plugin
  rm -rf "${dir}" && mkdir -p "${dir}"
  {
    printf '// Command coredns is CoreDNS %s with the plugins a kubeadm cluster uses.\npackage main\n\nimport (\n' \
      "${COREDNS_VERSION}"
    printf '\t"github.com/coredns/coredns/coremain"\n\n'
    for plugin in cache errors forward health kubernetes loadbalance log loop metrics ready reload; do
      printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "${plugin}"
    done
    printf ')\n\nfunc main() { coremain.Run() }\n'
  } >"${dir}/main.go"
  (
    cd "${dir}"
    go mod init webserver-operator.local/kind-node/coredns >/dev/null 2>&1
    go mod edit -require "github.com/coredns/coredns@${COREDNS_VERSION}"
    CGO_ENABLED=0 gobuild coredns go build "${GO_LEAN[@]}" -ldflags "${LDFLAGS_LEAN}" -o "${BIN}/coredns" .
  )
}

# etcd's server module has replace directives, so `go install` refuses it: build its main from a tiny module.
build_etcd() {
  [[ -f "${STAMPS}/etcd" ]] && return 0
  local dir="${BIN}/.src/etcd"
  rm -rf "${dir}" && mkdir -p "${dir}"
  cat >"${dir}/main.go" <<'GO'
// Command etcd is etcd's own server main, built as a dependency (go.etcd.io/etcd/server/v3 has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "${dir}"
    go mod init webserver-operator.local/kind-node/etcd >/dev/null 2>&1
    go mod edit -require "go.etcd.io/etcd/server/v3@${KUBEADM_ETCD_VERSION}"
    CGO_ENABLED=0 gobuild etcd go build "${GO_LEAN[@]}" -ldflags "${LDFLAGS_LEAN}" -o "${BIN}/etcd" .
  )
}

# pause is C: kubeadm's own build/pause/linux/pause.c from the k8s.io/kubernetes module, linked statically.
build_pause() {
  [[ -f "${STAMPS}/pause" ]] && return 0
  command -v gcc >/dev/null || die "gcc not found: run \`make engine\` (installs the host build packages)"
  local src
  src="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/build/pause/linux/pause.c"
  gobuild pause gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_VERSION}-webserver-operator" -o "${BIN}/pause" "${src}"
  strip "${BIN}/pause"
}

kind_module_dir() {
  go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

# The node stage's build context: kind's files/ and ours, plus the binaries where kind's recipe puts them.
node_context() {
  local ctx="$1" kind_dir rootfs="$1/rootfs"
  kind_dir="$(kind_module_dir)"
  mkdir -p "${rootfs}"
  cp -r "${kind_dir}/images/base/files/." "${rootfs}/"
  chmod -R u+w "${rootfs}"
  # kind's modes: scripts and directories 0755, everything else 0644.
  find "${rootfs}" -type d -exec chmod 0755 {} +
  find "${rootfs}" -type f -exec chmod 0644 {} +
  chmod 0755 "${rootfs}"/usr/local/bin/* "${rootfs}"/kind/bin/*
  # kind's Dockerfile copies only files/etc/* top-level files and the listed sub-directories: same result here.
  cp -r "${RECIPE}/rootfs/." "${rootfs}/"
  # The sandbox image is the pause image kubeadm asks for (kind's config names an older one it pulls).
  sed -i "s|sandbox_image = .*|sandbox_image = \"registry.k8s.io/pause:${PAUSE_VERSION}\"|" \
    "${rootfs}/etc/containerd/config.toml"
  # containerd must not ask runc for an oom_score_adj below its own: lowering it needs CAP_SYS_RESOURCE, which some
  # hosts (sandboxes) withhold even from privileged containers ("runc init: failed to update /proc/self/oom_score_adj:
  # Permission denied" for every pod). kind sets the same for rootless nodes.
  sed -i "s|restrict_oom_score_adj = .*|restrict_oom_score_adj = true|" "${rootfs}/etc/containerd/config.toml"
  grep -q "pause:${PAUSE_VERSION}" "${rootfs}/etc/containerd/config.toml" &&
    grep -q "restrict_oom_score_adj = true" "${rootfs}/etc/containerd/config.toml" ||
    die "kind ${KIND_VERSION}'s containerd config lacks the sandbox_image or restrict_oom_score_adj line: update hack/kind-node-image.sh"
  printf '%s\n' "${KUBERNETES_VERSION}" >"${rootfs}/kind/version"
  mkdir -p "${rootfs}/usr/local/bin" "${rootfs}/usr/local/sbin" "${rootfs}/usr/bin" "${rootfs}/opt/cni/bin"
  install -m 0755 "${BIN}/containerd" "${BIN}/ctr" "${BIN}/containerd-shim-runc-v2" "${BIN}/crictl" \
    "${rootfs}/usr/local/bin/"
  install -m 0755 "${BIN}/runc" "${rootfs}/usr/local/sbin/runc"
  install -m 0755 "${BIN}/cni/"* "${rootfs}/opt/cni/bin/"
  install -m 0755 "${BIN}/kubelet" "${BIN}/kubeadm" "${BIN}/kubectl" "${rootfs}/usr/bin/"
}

# The images kubeadm asks for, as NAME=TAG lines; checked against the pinned versions so a Kubernetes bump cannot
# silently ship images under the wrong tags.
required_images() {
  local list
  list="$("${BIN}/kubeadm" config images list --kubernetes-version "${KUBERNETES_VERSION}" 2>/dev/null)"
  local expected=(
    "registry.k8s.io/kube-apiserver:${KUBERNETES_VERSION}"
    "registry.k8s.io/kube-controller-manager:${KUBERNETES_VERSION}"
    "registry.k8s.io/kube-scheduler:${KUBERNETES_VERSION}"
    "registry.k8s.io/kube-proxy:${KUBERNETES_VERSION}"
    "registry.k8s.io/coredns/coredns:${COREDNS_VERSION}"
    "registry.k8s.io/pause:${PAUSE_VERSION}"
    "registry.k8s.io/etcd:${KUBEADM_ETCD_VERSION#v}-0"
  )
  if [[ "$(sort <<<"${list}")" != "$(printf '%s\n' "${expected[@]}" | sort)" ]]; then
    die "kubeadm ${KUBERNETES_VERSION} asks for:
${list}
but hack/versions.env pins:
$(printf '%s\n' "${expected[@]}")
Update COREDNS_VERSION / PAUSE_VERSION / KUBEADM_ETCD_VERSION in hack/versions.env."
  fi
  printf '%s\n' "${expected[@]}"
}

# A minimal image (like upstream's distroless ones): passwd/group, /tmp, CA certificates and one static binary.
static_image() {
  local engine="$1" ctx="$2" tag="$3" binary="$4" entrypoint="$5"
  cat >"${ctx}/Containerfile.${binary}" <<EOF
FROM scratch
COPY static-base/ /
COPY bin/${binary} /usr/local/bin/${binary}
ENV PATH=/usr/local/bin:/usr/bin:/bin
${entrypoint}
EOF
  run_logged "image-${binary}" "${engine}" build -t "${tag}" -f "${ctx}/Containerfile.${binary}" "${ctx}"
}

component_images() {
  local engine="$1" ctx="$2" base="$3"
  local images
  mapfile -t images < <(required_images)
  mkdir -p "${ctx}/bin" "${ctx}/static-base/etc/ssl/certs" "${ctx}/static-base/tmp"
  chmod 1777 "${ctx}/static-base/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"${ctx}/static-base/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"${ctx}/static-base/etc/group"
  printf 'hosts: files dns\n' >"${ctx}/static-base/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "${ctx}/static-base/etc/ssl/certs/"
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause; do
    install -m 0755 "${BIN}/${b}" "${ctx}/bin/${b}"
  done
  local img
  for img in "${images[@]}"; do
    case "${img}" in
    */kube-proxy:*)
      # kube-proxy programs iptables: it needs the iptables and conntrack tools, so Debian, not scratch.
      cat >"${ctx}/Containerfile.kube-proxy" <<EOF
FROM ${base}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables conntrack \\
    && apt-get clean && rm -rf /var/lib/apt/lists/* /var/log/* /usr/share/doc/* /usr/share/man/*
COPY bin/kube-proxy /usr/local/bin/kube-proxy
EOF
      run_logged image-kube-proxy "${engine}" build -t "${img}" -f "${ctx}/Containerfile.kube-proxy" "${ctx}"
      ;;
    */coredns:*) static_image "${engine}" "${ctx}" "${img}" coredns 'ENTRYPOINT ["/usr/local/bin/coredns"]' ;;
    */pause:*) static_image "${engine}" "${ctx}" "${img}" pause 'ENTRYPOINT ["/usr/local/bin/pause"]' ;;
    */etcd:*) static_image "${engine}" "${ctx}" "${img}" etcd '' ;;
    *) static_image "${engine}" "${ctx}" "${img}" "$(basename "${img%%:*}")" '' ;;
    esac
  done
  printf '%s\n' "${images[@]}" >"${ctx}/images.txt"
  # One archive in Docker's format (what `ctr images import` reads); podman needs -m for more than one image.
  local multi=()
  [[ "${engine}" == podman ]] && multi=(--format docker-archive -m)
  run_logged save-images "${engine}" save "${multi[@]}" -o "${ctx}/images.tar" "${images[@]}"
}

# Import the images into the node's containerd (not unpacked: the snapshots are made on the node's /var volume) and
# commit the container as the node image, like kind's own node-image builder.
import_and_commit() {
  local engine="$1" ctx="$2" stage="$3"
  local box="webserver-operator-node-build-${KEY}"
  "${engine}" rm -f "${box}" >/dev/null 2>&1 || true
  "${engine}" run -d --name "${box}" --privileged --entrypoint sleep --tmpfs /run --tmpfs /tmp \
    -v "${ctx}/images.tar:/kind/images.tar:ro" "${stage}" infinity >/dev/null
  # shellcheck disable=SC2016
  if ! "${engine}" exec "${box}" bash -euc '
      nohup containerd >/tmp/containerd.log 2>&1 &
      for i in $(seq 1 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
      ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack \
        --digests /kind/images.tar >/dev/null
      ctr --namespace=k8s.io images list -q
      pkill containerd
      for i in $(seq 1 50); do pgrep containerd >/dev/null || break; sleep 0.2; done
    ' >"${LOGS}/import.log" 2>&1; then
    "${engine}" rm -f "${box}" >/dev/null 2>&1 || true
    tail -n 20 "${LOGS}/import.log" >&2
    die "importing the control-plane images into the node's containerd failed (log above)"
  fi
  local img
  while IFS= read -r img; do
    grep -qxF "${img}" "${LOGS}/import.log" || { "${engine}" rm -f "${box}" >/dev/null; die "${img} missing from the node's containerd after import"; }
  done <"${ctx}/images.txt"
  "${engine}" stop -t 1 "${box}" >/dev/null 2>&1 || true
  run_logged commit "${engine}" commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'CMD []' "${box}" "${NAME}"
  "${engine}" rm -f "${box}" >/dev/null
}

build_offline() {
  local engine="$1" start=${SECONDS}
  mkdir -p "${BIN}" "${LOGS}" "${STAMPS}"
  log "building ${NAME} offline (cold: about 15-25 minutes on 2 cores; cache ${CACHE})"
  build_binaries
  step 2 "Debian ${KIND_NODE_DEBIAN_RELEASE} base (debootstrap)"
  local base
  base="$(ENGINE="${engine}" "${ROOT}/hack/debian-base.sh" ensure)"
  local ctx="${CACHE}/context"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  step 3 "node stage from kind ${KIND_VERSION}'s base recipe (apt inside the build: a few minutes)"
  node_context "${ctx}"
  local stage="localhost/webserver-operator/kind-node-stage:${KEY}"
  run_logged node-stage "${engine}" build --build-arg "BASE_IMAGE=${base}" -t "${stage}" \
    -f "${RECIPE}/node.Containerfile" "${ctx}"
  step 4 "control-plane images, tagged as kubeadm ${KUBERNETES_VERSION} asks"
  component_images "${engine}" "${ctx}/images" "${base}"
  step 5 "importing them into the node's containerd"
  import_and_commit "${engine}" "${ctx}/images" "${stage}"
  step 6 "cleaning up build-only images and node images of other keys"
  "${engine}" rmi "${stage}" >/dev/null 2>&1 || true
  local old
  while IFS= read -r old; do
    [[ "${old}" == "${NAME}" ]] || "${engine}" rmi "${old}" >/dev/null 2>&1 || true
  done < <("${engine}" images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/webserver-operator/kind-node:')
  local img
  while IFS= read -r img; do "${engine}" rmi "${img}" >/dev/null 2>&1 || true; done <"${ctx}/images/images.txt"
  rm -rf "${ctx}"
  log "built ${NAME} in $((SECONDS - start))s"
}

cmd_ensure() {
  local engine="${ENGINE:-$("${ROOT}/hack/engine.sh" detect)}"
  local source="${KIND_NODE_IMAGE_SOURCE:-auto}" pinned="${KIND_NODE_IMAGE}"
  # Fully qualified: podman resolves no short names unless registries.conf says where.
  [[ "${pinned%%/*}" == *.* ]] || pinned="docker.io/${pinned}"
  if [[ "${source}" != build ]]; then
    if "${engine}" image inspect "${pinned}" >/dev/null 2>&1 ||
      "${engine}" pull "${pinned}" >/dev/null 2>"${TMPDIR:-/tmp}/node-image-pull.err"; then
      printf '%s\n' "${pinned}"
      return 0
    fi
    [[ "${source}" == pull ]] && die "cannot pull ${pinned}: $(tail -n 1 "${TMPDIR:-/tmp}/node-image-pull.err")"
    log "cannot pull ${pinned} ($(tail -n 1 "${TMPDIR:-/tmp}/node-image-pull.err")): using the offline build"
  fi
  if ! "${engine}" image inspect "${NAME}" >/dev/null 2>&1; then
    build_offline "${engine}"
  else
    log "${NAME} is up to date (key ${KEY})"
  fi
  printf '%s\n' "${NAME}"
}

case "${1:-}" in
ensure) cmd_ensure ;;
name) printf '%s\n' "${NAME}" ;;
key) printf '%s\n' "${KEY}" ;;
*) die "usage: hack/kind-node-image.sh ensure | name | key" ;;
esac
