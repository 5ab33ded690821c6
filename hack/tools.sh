#!/usr/bin/env bash
# Build the project's Go tools (Kubernetes control plane + kubectl, etcd, kwok/kwokctl, helm, promtool, kind) from Go
# modules into a cache outside the repository, keyed by the pinned versions in hack/versions.env; and pick, for the
# user-facing targets, the kubectl, helm and kind already on PATH when they are recent enough.
#
# Why a script and not `go install`: k8s.io/kubernetes replaces every staging module with a local path, and
# etcd's server module does the same, so `go install pkg@version` refuses both. Each is built from a small
# throw-away tools module that requires it and pins the replaced modules to their published versions.
#
# Why per-tool targets: a cold build of everything takes 15 to 25 minutes on 2 cores; each make target asks only for
# what it runs (the demo needs no helm or promtool, `make deploy` with your kubectl needs nothing).
#
# Usage:
#   hack/tools.sh build [TOOL...]  build what is missing (idempotent; seconds when the cache is warm). TOOL is one of
#                                  kubectl, helm, kind, promtool, prometheus (the server, only for the dashboard
#                                  test), etcd, kwok, control-plane (kube-apiserver,
#                                  -controller-manager, -scheduler and kubectl), cluster (what hack/cluster.sh runs:
#                                  control-plane, etcd, kwok), node (control-plane plus the kind node's kubelet,
#                                  kubeadm, kube-proxy), all (default: cluster, helm and promtool), or the release
#                                  tools crane and syft (on demand only)
#   hack/tools.sh pick TOOL        print the path of the kubectl, helm or kind to use: the one on PATH when it is at
#                                  least the minimum version below, else the project's build (which may not be built
#                                  yet); says on stderr which one and why
#   hack/tools.sh ensure TOOL      pick, and build the project's one when that is the choice and it is missing
#   hack/tools.sh bindir           print the bin directory of the current cache key
#   hack/tools.sh key              print the cache key
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-mod=mod"

cache_root="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/tools"

# Which Kubernetes the control plane (kube-apiserver, -controller-manager, -scheduler, kubectl) is: newest (default:
# KUBERNETES_VERSION) or oldest (KUBERNETES_OLDEST_VERSION, the oldest minor the chart claims; CI runs the integration
# suite on both). The oldest line has its own cache folder holding only its control plane; every other tool (etcd,
# kwok, helm, promtool, kind) is the newest line's build, linked into that folder, so hack/cluster.sh and the tests
# find everything in one bin directory either way.
KUBERNETES_LINE="${KUBERNETES_LINE:-newest}"
case "${KUBERNETES_LINE}" in
newest) ;;
oldest)
  KUBERNETES_VERSION="${KUBERNETES_OLDEST_VERSION}"
  KUBERNETES_STAGING_VERSION="${KUBERNETES_OLDEST_STAGING_VERSION}"
  ;;
*)
  printf 'KUBERNETES_LINE=%s: use newest (Kubernetes %s) or oldest (%s)\n' "${KUBERNETES_LINE}" \
    "${KUBERNETES_VERSION}" "${KUBERNETES_OLDEST_VERSION}" >&2
  exit 1
  ;;
esac

tools_key() {
  # The key covers the pinned versions of what is built, the recipe revision and the Go toolchain (not runtime-only
  # settings such as KIND_NODE_IMAGE, which would otherwise force a rebuild for nothing).
  {
    if [[ "${KUBERNETES_LINE}" == newest ]]; then
      grep -E '^(KUBERNETES_VERSION|KUBERNETES_STAGING_VERSION|ETCD_VERSION|KWOK_VERSION|HELM_VERSION|PROMETHEUS_VERSION|KIND_VERSION|TOOLS_RECIPE)=' \
        "${ROOT}/hack/versions.env"
    else
      # Only the control plane is built in the oldest line's folder.
      printf 'KUBERNETES_LINE=oldest\nKUBERNETES_VERSION=%s\nKUBERNETES_STAGING_VERSION=%s\n' \
        "${KUBERNETES_VERSION}" "${KUBERNETES_STAGING_VERSION}"
      grep -E '^TOOLS_RECIPE=' "${ROOT}/hack/versions.env"
    fi
    # Without Go there is nothing built: the key then names an empty folder, and `build` says how to install Go.
    go env GOVERSION GOOS GOARCH 2>/dev/null || echo "go: not installed"
  } | sha256sum | cut -c1-12
}

# The oldest kubectl, helm and kind taken from PATH. kubectl: the oldest Kubernetes minor the chart claims
# (Chart.yaml kubeVersion; kubectl supports one minor of skew either way, so pass KUBECTL=<path> for an older
# cluster); helm: 3.17 brought --take-ownership, which the README's upgrade notes use; kind: the release whose node
# image hack/versions.env pins (KIND_NODE_IMAGE).
KUBECTL_MIN_VERSION=v1.34.0
HELM_MIN_VERSION=v3.17.0
KIND_MIN_VERSION="${KIND_VERSION}"

KEY="$(tools_key)"
BASE="${cache_root}/${KEY}"
BIN="${BASE}/bin"
STAMPS="${BASE}/stamps"
SRC="${BASE}/src"
LOGS="${BASE}/logs"

LOG_PREFIX=tools
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# run_logged NAME CMD... : run a build step with its output in a log file; on failure show the log's tail.
run_logged() {
  local name="$1"
  shift
  local logfile="${LOGS}/${name}.log"
  local start=${SECONDS}
  if ! "$@" >"${logfile}" 2>&1; then
    tail -n 40 "${logfile}" >&2
    die "${name} failed after $((SECONDS - start))s; full log: ${logfile}"
  fi
  log "${name}: done in $((SECONDS - start))s"
}

ensure_dirs() { mkdir -p "${BIN}" "${STAMPS}" "${SRC}" "${LOGS}"; }

have() { [[ -f "${STAMPS}/$1" ]]; }

mark() { printf '%s\n' "$2" >"${STAMPS}/$1"; }

new_module() {
  # new_module DIR NAME: an empty module with its own go.mod, the Go version of the local toolchain.
  rm -rf "$1"
  mkdir -p "$1"
  (cd "$1" && go mod init "$2" >/dev/null 2>&1)
}

k8s_ldflags() {
  local v="${KUBERNETES_VERSION}" major minor
  major="$(echo "${v#v}" | cut -d. -f1)"
  minor="$(echo "${v#v}" | cut -d. -f2)"
  local date
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${v} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${date}"
  done
  printf '%s' "${flags}"
}

# The tools module for Kubernetes commands: requires k8s.io/kubernetes and pins each replaced staging module to its
# published version. Shared by the control-plane tools and the node binaries (kubelet, kubeadm, kube-proxy), so the
# second build reuses every package the first one compiled.
prepare_kubernetes_module() {
  local dir="${SRC}/kubernetes"
  [[ -f "${dir}/.ready" ]] && return 0
  log "kubernetes ${KUBERNETES_VERSION}: preparing tools module (staging modules -> ${KUBERNETES_STAGING_VERSION})"
  new_module "${dir}" webserver-operator.local/tools/kubernetes
  (
    cd "${dir}"
    go mod edit -require "k8s.io/kubernetes@${KUBERNETES_VERSION}"
    local gomod
    gomod="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
    # Every replace in k8s.io/kubernetes' go.mod must be a staging module (./staging/src/...); anything else
    # would silently be lost in a dependent module, so it stops the build instead.
    python3 - "${gomod}" "${KUBERNETES_STAGING_VERSION}" >replaces.txt <<'PY'
import json, subprocess, sys
gomod, staging_version = sys.argv[1], sys.argv[2]
data = json.loads(subprocess.check_output(["go", "mod", "edit", "-json", gomod]))
bad = []
for rep in data.get("Replace") or []:
    old, new = rep["Old"]["Path"], rep["New"]["Path"]
    if new.startswith("./staging/src/"):
        print(f"{old}={old}@{staging_version}")
    else:
        bad.append(f"{old} => {new} {rep['New'].get('Version', '')}")
if bad:
    sys.exit("k8s.io/kubernetes has non-staging replace directives, mirror them in hack/tools.sh: " + "; ".join(bad))
PY
    local n=0
    while IFS= read -r rep; do
      go mod edit -replace "${rep}"
      n=$((n + 1))
    done <replaces.txt
    log "kubernetes: ${n} staging modules pinned"
  )
  touch "${dir}/.ready"
}

# build_kubernetes_cmds STAMP NOTE CMD...: one `go build` of k8s.io/kubernetes/cmd/<CMD> into the bin directory.
build_kubernetes_cmds() {
  local stamp="$1" note="$2"
  shift 2
  have "${stamp}" && return 0
  prepare_kubernetes_module
  local pkgs=() c
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/${c}"); done
  log "kubernetes: go build $* (${note})"
  (cd "${SRC}/kubernetes" && run_logged "${stamp}-build" go build -trimpath -ldflags "$(k8s_ldflags)" -o "${BIN}/" "${pkgs[@]}")
  mark "${stamp}" "${KUBERNETES_VERSION}"
}

build_kubernetes() {
  build_kubernetes_cmds kubernetes "the long pole: about 5 minutes cold on 2 cores" \
    kube-apiserver kube-controller-manager kube-scheduler kubectl
}

# kubectl alone (the install targets, helm-less users); the control-plane build includes it.
build_kubectl() {
  have kubernetes && return 0
  build_kubernetes_cmds kubectl "kubectl only" kubectl
}

# The node binaries of the offline kind node image (hack/kind-node-image.sh); kubectl comes from build_kubernetes.
build_kubernetes_node() {
  build_kubernetes_cmds kubernetes-node "for the kind node image; a few minutes cold" kubelet kubeadm kube-proxy
}

build_etcd() {
  have etcd && return 0
  local dir="${SRC}/etcd"
  log "etcd ${ETCD_VERSION}: building from a tools module (server/v3 has replace directives)"
  new_module "${dir}" webserver-operator.local/tools/etcd
  mkdir -p "${dir}/cmd/etcd" "${dir}/cmd/etcdctl"
  cat >"${dir}/cmd/etcd/main.go" <<'GO'
// Command etcd is etcd's own server main, built as a dependency because go.etcd.io/etcd/server/v3 cannot be
// go-installed (its go.mod has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  cat >"${dir}/cmd/etcdctl/main.go" <<'GO'
// Command etcdctl is etcd's client CLI, used for debugging the local cluster's store.
package main

import (
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"
)

func main() { _ = ctlv3.Start() }
GO
  (
    cd "${dir}"
    go mod edit -require "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" -require "go.etcd.io/etcd/etcdctl/v3@${ETCD_VERSION}"
    run_logged etcd-build go build -trimpath -ldflags "-s -w" -o "${BIN}/" ./cmd/etcd ./cmd/etcdctl
  )
  mark etcd "${ETCD_VERSION}"
}

build_kwok() {
  have kwok && return 0
  log "kwok ${KWOK_VERSION}: go install kwok + kwokctl"
  # kwok's consts carry versions without the leading "v" (it prefixes one itself where it needs it).
  local flags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  flags+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBERNETES_VERSION#v}"
  GOFLAGS="" GOBIN="${BIN}" run_logged kwok-build go install -trimpath -ldflags "${flags}" \
    "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" "sigs.k8s.io/kwok/cmd/kwokctl@${KWOK_VERSION}"
  mark kwok "${KWOK_VERSION}"
}

build_helm() {
  have helm && return 0
  # helm v4 derives the Kubernetes version it assumes offline (lint, template) from the k8s.io/client-go version
  # recorded in its build info (client-go v0.36.x -> Kubernetes 1.36), which `go install` keeps; helm v3's
  # k8sVersion ldflags variables no longer exist. Only helm's own version needs stamping.
  log "helm ${HELM_VERSION}: go install"
  local flags="-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}"
  flags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean -X helm.sh/helm/v4/internal/version.metadata="
  GOFLAGS="" GOBIN="${BIN}" run_logged helm-build go install -trimpath -ldflags "${flags}" \
    "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"
  mark helm "${HELM_VERSION}"
}

# Prometheus v3.X.Y is tagged as Go module version v0.3XX.Y; its go.mod has no replace or exclude directives, so
# `go install` works.
prometheus_module_version() {
  local v="${PROMETHEUS_VERSION#v}" major minor patch
  IFS=. read -r major minor patch <<<"${v}"
  [[ "${major}" == 3 ]] || die "PROMETHEUS_VERSION=${PROMETHEUS_VERSION}: only Prometheus 3.x maps to Go module versions v0.3XX.Y"
  printf 'v0.%s.%s\n' "$((300 + minor))" "${patch}"
}

# The version variables make `promtool --version` and `prometheus --version` tell the truth.
prometheus_ldflags() {
  local flags="-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}"
  flags+=" -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.Revision=$1"
  printf '%s' "${flags}"
}

build_promtool() {
  have promtool && return 0
  # remove_all_sd leaves out the service discovery plugins: checking and testing rules needs none, and one of their
  # dependencies (github.com/hashicorp/nomad/api at the version v0.316.0 pins) is refused by the Go module proxy (403).
  local module_version
  module_version="$(prometheus_module_version)"
  log "promtool ${PROMETHEUS_VERSION} (module ${module_version}): go install"
  GOFLAGS="" GOBIN="${BIN}" run_logged promtool-build go install -trimpath -tags remove_all_sd \
    -ldflags "$(prometheus_ldflags "${module_version}")" "github.com/prometheus/prometheus/cmd/promtool@${module_version}"
  mark promtool "${PROMETHEUS_VERSION}"
}

# The Prometheus server, for the test that evaluates every dashboard panel and alert on real scraped series
# (tests/e2e/test_dashboard_prometheus.py). Same module and tags as promtool, so a build after promtool's reuses most
# compiled packages. Without the builtinassets tag the web UI is served from files that are not there: the HTTP API,
# which the test uses, does not need them.
build_prometheus() {
  have prometheus && return 0
  local module_version
  module_version="$(prometheus_module_version)"
  log "prometheus ${PROMETHEUS_VERSION} (module ${module_version}): go install"
  GOFLAGS="" GOBIN="${BIN}" run_logged prometheus-build go install -trimpath -tags remove_all_sd \
    -ldflags "$(prometheus_ldflags "${module_version}")" "github.com/prometheus/prometheus/cmd/prometheus@${module_version}"
  mark prometheus "${PROMETHEUS_VERSION}"
}

build_kind() {
  have kind && return 0
  log "kind ${KIND_VERSION}: go install"
  GOFLAGS="" GOBIN="${BIN}" run_logged kind-build go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@${KIND_VERSION}"
  mark kind "${KIND_VERSION}"
}

# has_version TOOL VERSION: built at exactly VERSION (the release tools are outside the cache key, so their stamp
# holds the version and a bump rebuilds them alone).
has_version() { [[ -f "${STAMPS}/$1" && "$(cat "${STAMPS}/$1")" == "$2" ]]; }

# crane (go-containerregistry): `crane registry serve` is the local OCI registry (hack/registry.sh) that `make
# release` can publish to and kind pulls from in the e2e suite; `crane digest` reads what a push stored.
build_crane() {
  has_version crane "${CRANE_VERSION}" && return 0
  log "crane ${CRANE_VERSION}: go install"
  GOFLAGS="" GOBIN="${BIN}" run_logged crane-build go install -trimpath -ldflags "-s -w" \
    "github.com/google/go-containerregistry/cmd/crane@${CRANE_VERSION}"
  mark crane "${CRANE_VERSION}"
}

# syft (anchore): the image's SBOM that `make release` publishes (SPDX JSON).
build_syft() {
  has_version syft "${SYFT_VERSION}" && return 0
  log "syft ${SYFT_VERSION}: go install"
  GOFLAGS="" GOBIN="${BIN}" run_logged syft-build go install -trimpath \
    -ldflags "-s -w -X main.version=${SYFT_VERSION#v}" "github.com/anchore/syft/cmd/syft@${SYFT_VERSION}"
  mark syft "${SYFT_VERSION}"
}

need_go() {
  local t hint=""
  for t in "$@"; do
    case "${t}" in
    kubectl) hint+="; or put kubectl >= ${KUBECTL_MIN_VERSION} on PATH (or pass KUBECTL=<path>) and nothing is built" ;;
    helm) hint+="; or put helm >= ${HELM_MIN_VERSION} on PATH (or pass HELM=<path>) and nothing is built" ;;
    kind) hint+="; or put kind >= ${KIND_MIN_VERSION} on PATH (or pass KIND=<path>) and nothing is built" ;;
    esac
  done
  command -v go >/dev/null ||
    die "go is not on PATH: install Go >= 1.26 (https://go.dev/doc/install; the Kubernetes ${KUBERNETES_VERSION} modules declare it), then run this again${hint}"
}

need_python() {
  command -v python3 >/dev/null ||
    die "python3 is not on PATH: install Python >= 3.11 (it reads k8s.io/kubernetes' go.mod), then run this again"
}

TOOLS="kubectl helm kind promtool prometheus etcd kwok control-plane cluster node all crane syft"

# link_newest TOOL...: in the oldest line, build TOOL in the newest line's cache and link its binaries here.
link_newest() {
  local t b newest_bin bins
  newest_bin="$(KUBERNETES_LINE=newest "${ROOT}/hack/tools.sh" bindir)"
  KUBERNETES_LINE=newest "${ROOT}/hack/tools.sh" build "$@"
  for t in "$@"; do
    case "${t}" in
    etcd) bins=(etcd etcdctl) ;;
    kwok) bins=(kwok kwokctl) ;;
    *) bins=("${t}") ;;
    esac
    for b in "${bins[@]}"; do ln -sfn "${newest_bin}/${b}" "${BIN}/${b}"; done
  done
}

build_one() {
  local t
  if [[ "${KUBERNETES_LINE}" == oldest ]]; then
    case "$1" in
    helm | kind | promtool | prometheus | etcd | kwok | crane | syft)
      link_newest "$1"
      return
      ;;
    cluster)
      need_python
      link_newest kwok etcd
      build_kubernetes
      return
      ;;
    all)
      need_python
      link_newest kwok helm promtool etcd
      build_kubernetes
      return
      ;;
    node) die "KUBERNETES_LINE=oldest has no kind node image: kind runs the newest line (KIND_NODE_IMAGE)" ;;
    esac
  fi
  case "$1" in
  kubectl) need_python && build_kubectl ;;
  helm) build_helm ;;
  kind) build_kind ;;
  crane) build_crane ;;
  syft) build_syft ;;
  promtool) build_promtool ;;
  prometheus) build_prometheus ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  control-plane) need_python && build_kubernetes ;;
  cluster)
    need_python
    # Small tools first: they are quick and let cluster scripts fail fast on a broken proxy.
    build_kwok
    build_etcd
    build_kubernetes
    ;;
  node)
    need_python
    build_kubernetes
    build_kubernetes_node
    ;;
  all) for t in kwok helm promtool etcd control-plane; do build_one "${t}"; done ;;
  esac
}

cmd_build() {
  (($# > 0)) || set -- all
  local t
  # Names first, so a typo fails before a long build.
  for t in "$@"; do
    [[ " ${TOOLS} " == *" ${t} "* ]] ||
      die "unknown tool '${t}': use kubectl, helm, kind, promtool, prometheus, etcd, kwok, control-plane, cluster, node, all, crane or syft"
  done
  need_go "$@"
  ensure_dirs
  local start=${SECONDS}
  log "cache ${BASE}: $*"
  for t in "$@"; do build_one "${t}"; done
  log "ready in $((SECONDS - start))s: ${BIN}"
}

# version_of TOOL PATH: the tool's version (vX.Y.Z), or nothing when it does not answer.
version_of() {
  local out=""
  case "$1" in
  kubectl) out="$("$2" version --client 2>/dev/null)" ;;
  helm) out="$("$2" version --short 2>/dev/null)" ;;
  kind) out="$("$2" version 2>/dev/null)" ;;
  esac
  grep -oE 'v[0-9]+\.[0-9]+\.[0-9]+' <<<"${out}" | head -n 1
}

# at_least VERSION MINIMUM: VERSION >= MINIMUM (both vX.Y.Z).
at_least() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

# pick TOOL: sets PICKED (path) and BUILT (1 when it is the project's build).
pick() {
  local tool="$1" min found version var
  var="$(printf '%s' "${tool}" | tr '[:lower:]' '[:upper:]')" # bash 3.2 (macOS) has no case operators
  case "${tool}" in
  kubectl) min="${KUBECTL_MIN_VERSION}" ;;
  helm) min="${HELM_MIN_VERSION}" ;;
  kind) min="${KIND_MIN_VERSION}" ;;
  *) die "pick: unknown tool '${tool}': use kubectl, helm or kind" ;;
  esac
  found="$(command -v "${tool}" || true)"
  if [[ -n "${found}" ]]; then
    version="$(version_of "${tool}" "${found}")"
    if [[ -n "${version}" ]] && at_least "${version}" "${min}"; then
      PICKED="${found}"
      BUILT=0
      log "${tool}: ${version} from PATH (${found}); ${var}=<path> picks another"
      return
    fi
    log "${tool}: ${found} is ${version:-of an unknown version}, older than ${min}: using the project's build instead"
  fi
  PICKED="${BIN}/${tool}"
  BUILT=1
  local note="built by \`hack/tools.sh build ${tool}\`"
  [[ -x "${PICKED}" ]] && note="already built"
  log "${tool}: the project's build ${PICKED} (${note}); ${var}=<path> picks another"
}

case "${1:-build}" in
build)
  shift || true
  cmd_build "$@"
  ;;
pick)
  pick "${2:?usage: hack/tools.sh pick kubectl|helm|kind}"
  printf '%s\n' "${PICKED}"
  ;;
ensure)
  pick "${2:?usage: hack/tools.sh ensure kubectl|helm|kind}"
  if ((BUILT)) && [[ ! -x "${PICKED}" ]]; then cmd_build "$2" >&2; fi
  printf '%s\n' "${PICKED}"
  ;;
bindir) printf '%s\n' "${BIN}" ;;
key) printf '%s\n' "${KEY}" ;;
*) die "unknown command '${1}': use build [TOOL...], pick TOOL, ensure TOOL, bindir or key" ;;
esac
