#!/usr/bin/env bash
# Build the controller-runtime peer (webserver-peer-go) into a cache outside the repository, keyed like
# hack/tools.sh: a hash of this module's sources (go.mod, go.sum, *.go) and the Go toolchain. A warm cache costs
# nothing; a source change builds into a new key. Prints the binary's path on stdout (logs go to stderr).
#
# Usage: bench/peers/go/build.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_PREFIX=bench-peer-go
# shellcheck source=../../../hack/lib.sh
source "${HERE}/../../../hack/lib.sh"

command -v go >/dev/null || die "go is not on PATH: install Go >= 1.26 (controller-runtime v0.24 declares it)"
export GOTOOLCHAIN=local CGO_ENABLED=0

key="$(cd "${HERE}" && {
  cat go.mod go.sum ./*.go
  go env GOVERSION GOOS GOARCH
} | sha256sum | cut -c1-12)"
out="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/bench/peer-go/${key}"
bin="${out}/webserver-peer-go"
if [[ ! -x "${bin}" ]]; then
  mkdir -p "${out}"
  log "building the controller-runtime peer into ${out} (a minute or two cold)"
  start=${SECONDS}
  if ! (cd "${HERE}" && go build -trimpath -ldflags "-s -w" -o "${bin}.tmp" .) >"${out}/build.log" 2>&1; then
    tail -n 30 "${out}/build.log" >&2
    die "go build failed; full log: ${out}/build.log"
  fi
  mv "${bin}.tmp" "${bin}"
  log "built in $((SECONDS - start))s"
fi
printf '%s\n' "${bin}"
