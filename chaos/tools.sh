#!/usr/bin/env bash
# Build the fault-injection tools of the chaos harness (toxiproxy's server and CLI) from Go modules into a cache
# outside the repository, keyed by TOXIPROXY_VERSION in hack/versions.env and the Go toolchain, the way hack/tools.sh
# keys the control plane. Kept apart from hack/tools.sh's key so pinning or bumping toxiproxy never rebuilds
# Kubernetes.
#
# Usage:
#   chaos/tools.sh build    build what is missing (idempotent; instant when the cache is warm)
#   chaos/tools.sh bindir   print the bin directory of the current cache key
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../hack/versions.env
source "${ROOT}/hack/versions.env"
LOG_PREFIX=chaos-tools
# shellcheck source=../hack/lib.sh
source "${ROOT}/hack/lib.sh"

export GOTOOLCHAIN=local
export CGO_ENABLED=0

cache_root="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/tools"
KEY="$({
  grep -E '^TOXIPROXY_VERSION=' "${ROOT}/hack/versions.env"
  go env GOVERSION GOOS GOARCH
} | sha256sum | cut -c1-12)"
BASE="${cache_root}/chaos-${KEY}"
BIN="${BASE}/bin"

cmd_build() {
  command -v go >/dev/null || die "go is not on PATH: install Go >= 1.26 to build toxiproxy ${TOXIPROXY_VERSION}"
  if [[ -x "${BIN}/toxiproxy-server" && -x "${BIN}/toxiproxy-cli" ]]; then
    return 0
  fi
  mkdir -p "${BASE}/logs" "${BASE}/gobin"
  local start=${SECONDS} logfile="${BASE}/logs/toxiproxy-build.log"
  log "toxiproxy ${TOXIPROXY_VERSION}: go install (cache ${BASE})"
  # toxiproxy's commands are package main directories named server and cli: install them into a scratch GOBIN and
  # give them their usual names.
  if ! GOFLAGS="" GOBIN="${BASE}/gobin" go install -trimpath -ldflags "-s -w" \
    "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}" \
    "github.com/Shopify/toxiproxy/v2/cmd/cli@${TOXIPROXY_VERSION}" >"${logfile}" 2>&1; then
    tail -n 40 "${logfile}" >&2
    die "building toxiproxy failed after $((SECONDS - start))s; full log: ${logfile}"
  fi
  mkdir -p "${BIN}"
  mv "${BASE}/gobin/server" "${BIN}/toxiproxy-server"
  mv "${BASE}/gobin/cli" "${BIN}/toxiproxy-cli"
  log "toxiproxy ${TOXIPROXY_VERSION}: done in $((SECONDS - start))s: ${BIN}"
}

case "${1:-build}" in
build) cmd_build ;;
bindir) printf '%s\n' "${BIN}" ;;
*) die "unknown command '${1}': use build or bindir" ;;
esac
