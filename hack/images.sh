#!/usr/bin/env bash
# Container images built by the engine (Docker or podman, see hack/engine.sh): the operator image from the
# project's Dockerfile, and the web server images the e2e suite runs in WebServers.
#
# Where a base image cannot be pulled (no registry reachable), a stand-in is built from Debian packages instead, and
# only the base changes: the operator image is still built from the real Dockerfile, whose base is a build ARG.
# - operator: BASE_IMAGE from the Dockerfile (pinned by digest), or hack/images/python-base.Containerfile
# - web:      nginx:1.27 and nginx:1.28, or two builds of hack/images/nginx.Containerfile (Debian's nginx, non-root)
#
# The Dockerfile's builder stage downloads the locked wheels from PyPI. Some machines reach PyPI only through host
# name entries and a CA bundle of their own, which a container lacks: the build gets both from the host at run time
# (--add-host with the addresses the host resolves, the CA bundle as a build secret named pip-cert).
#
# Usage: hack/images.sh operator IMG    build IMG from the Dockerfile (`make docker-build`)
#        hack/images.sh push IMG        push IMG (`make docker-push`)
#        hack/images.sh web             build or pull the e2e web images; print their names (two lines)
#        hack/images.sh web-names       print the names the last `web` chose
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_PREFIX=images
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"
STATE="${XDG_CACHE_HOME:-${HOME}/.cache}/webserver-operator/images"
mkdir -p "${STATE}"

# The engine, picked once per run: ENGINE when set (hack/kind.sh sets the one kind runs on), else whichever of docker
# and podman answers (`hack/engine.sh builder`: no privileged probe, no Go; building needs neither).
use_engine() {
  ENGINE="$("${ROOT}/hack/engine.sh" builder)"
  export ENGINE
}

# sha256 FILE...: sha256sum's output where it exists, else shasum's (macOS has only `shasum -a 256`).
sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}
engine() { printf '%s\n' "${ENGINE}"; }

# available IMAGE: present in the engine's store, or pulled now.
available() {
  local e
  e="$(engine)"
  "${e}" image inspect "$1" >/dev/null 2>&1 && return 0
  log "pulling $1"
  "${e}" pull "$1" >/dev/null 2>"${STATE}/pull.err" && return 0
  log "cannot pull $1: $(tail -n 1 "${STATE}/pull.err")"
  return 1
}

# build ARGS...: `build` with BuildKit for Docker (the Dockerfile uses RUN --mount).
build() {
  local e
  e="$(engine)"
  if [[ "${e}" == docker ]]; then
    DOCKER_BUILDKIT=1 docker build "$@"
  else
    # No layer cache: with a cached builder stage, podman 4.3 (buildah 1.28) bind-mounts a wrong layer of it for
    # `RUN --mount=type=bind,from=builder` (the runtime stage then sees an empty or partial /wheels). The pip cache
    # mount still spares the downloads; --layers=false also leaves no intermediate images behind.
    podman build --layers=false "$@"
  fi
}

# The host's way to PyPI, handed to the build: host entries and the CA bundle pip trusts on the host.
pypi_args() {
  local hosts=(pypi.org files.pythonhosted.org) h addr
  if [[ -n "${PIP_INDEX_URL:-}" ]]; then
    h="${PIP_INDEX_URL#*://}"
    h="${h%%/*}"
    hosts+=("${h##*@}")
  fi
  for h in "${hosts[@]}"; do
    addr="$(getent hosts "${h}" | awk 'NR == 1 {print $1}')" || true
    [[ -n "${addr}" ]] && printf '%s\n' "--add-host=${h}:${addr}"
  done
  local ca="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
  if [[ -f "${ca}" ]]; then
    printf '%s\n' "--secret=id=pip-cert,src=${ca}" "--build-arg=PIP_CERT=/run/secrets/pip-cert"
  fi
}

KEY_LABEL=dev.webserver-operator.build-key

# build_key BASE REVISION ARGS...: a hash of everything the operator image is built from.
build_key() {
  local base="$1"
  shift
  {
    "$(engine)" image inspect --format '{{.Id}}' "${base}" 2>/dev/null || echo "${base}"
    printf '%s\n' "$@"
    (
      cd "${ROOT}"
      {
        printf '%s\n' Dockerfile .dockerignore requirements.lock pyproject.toml README.md LICENSE
        find webserver_operator -type f ! -path '*/__pycache__/*' ! -name '*.py[cod]'
      } | sort | while IFS= read -r f; do if [[ -f "${f}" ]]; then sha256 "${f}"; fi; done
    )
  } | sha256 | cut -c1-16
}

dockerfile_base() {
  sed -n 's/^ARG BASE_IMAGE=//p' "${ROOT}/Dockerfile" | head -n 1
}

# The stand-in Python base: Debian bookworm's python3 (3.11, as the Dockerfile's PYTHON_VERSION).
python_standin() {
  local debian key name
  debian="$(ENGINE="$(engine)" "${ROOT}/hack/debian-base.sh" ensure)"
  key="$({ echo "${debian}"; sha256 "${ROOT}/hack/images/python-base.Containerfile"; } | sha256 | cut -c1-12)"
  name="localhost/webserver-operator/python-standin:3.11-bookworm-${key}"
  if ! "$(engine)" image inspect "${name}" >/dev/null 2>&1; then
    log "building the stand-in Python base ${name} (Debian's python3)"
    build -q --build-arg "BASE_IMAGE=${debian}" -t "${name}" -f "${ROOT}/hack/images/python-base.Containerfile" \
      "${ROOT}/hack/images" >/dev/null
  fi
  printf '%s\n' "${name}"
}

cmd_operator() {
  local img="${1:?usage: hack/images.sh operator IMG}" base args=()
  use_engine
  base="$(dockerfile_base)"
  [[ -n "${base}" ]] || die "Dockerfile: no 'ARG BASE_IMAGE=<image>@sha256:<digest>' line"
  if ! available "${base}"; then
    base="$(python_standin)"
    log "using the stand-in base ${base} for ${img}"
    args+=(--build-arg "BASE_IMAGE=${base}")
  fi
  local revision
  revision="$(git -C "${ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  # Rebuilt only when an input changes: the build context the .dockerignore lets through, the Dockerfile, the base
  # image (by ID) and the build arguments (not the host's way to PyPI, which does not change what is installed).
  # The key travels as a label on the image.
  local key
  key="$(build_key "${base}" "${revision}" ${args[@]+"${args[@]}"})"
  local arg
  while IFS= read -r arg; do args+=("${arg}"); done < <(pypi_args)
  if [[ "$("$(engine)" image inspect --format "{{index .Config.Labels \"${KEY_LABEL}\"}}" "${img}" 2>/dev/null)" == "${key}" ]]; then
    log "${img} is up to date (build key ${key})"
    return 0
  fi
  args+=(--label "${KEY_LABEL}=${key}")
  log "building ${img} from the Dockerfile ($(engine))"
  local start=${SECONDS} previous
  previous="$("$(engine)" image inspect --format '{{.Id}}' "${img}" 2>/dev/null || true)"
  if ! build ${args[@]+"${args[@]}"} --build-arg "REVISION=${revision}" -t "${img}" "${ROOT}" >"${STATE}/operator-build.log" 2>&1; then
    tail -n 30 "${STATE}/operator-build.log" >&2
    die "building ${img} failed; full log: ${STATE}/operator-build.log"
  fi
  # The image the tag pointed to before is now untagged: remove it unless a container still uses it.
  if [[ -n "${previous}" && "${previous}" != "$("$(engine)" image inspect --format '{{.Id}}' "${img}")" ]]; then
    "$(engine)" rmi "${previous}" >/dev/null 2>&1 || true
  fi
  log "built ${img} in $((SECONDS - start))s"
}

# push IMG: `make docker-push`, with the same engine rule as the build.
cmd_push() {
  local img="${1:?usage: hack/images.sh push IMG}"
  use_engine
  local args=() host="${img%%/*}"
  # A registry on this machine speaks plain HTTP (hack/registry.sh); docker already treats localhost so.
  if [[ "$(engine)" == podman && ("${host%%:*}" == localhost || "${host%%:*}" == 127.0.0.1) ]]; then
    args=(--tls-verify=false)
  fi
  log "pushing ${img} ($(engine))"
  "$(engine)" push ${args[@]+"${args[@]}"} "${img}"
}

cmd_web() {
  local first=nginx:1.27 second=nginx:1.28
  use_engine
  if available "docker.io/library/${first}" && available "docker.io/library/${second}"; then
    printf '%s\n%s\n' "docker.io/library/${first}" "docker.io/library/${second}" >"${STATE}/web-images"
  else
    local debian key
    debian="$(ENGINE="$(engine)" "${ROOT}/hack/debian-base.sh" ensure)"
    key="$({ echo "${debian}"; cat "${ROOT}"/hack/images/nginx.*; } | sha256 | cut -c1-8)"
    first="localhost/webserver-operator/nginx-debian:${key}-1"
    second="localhost/webserver-operator/nginx-debian:${key}-2"
    local revision name
    for revision in 1 2; do
      name="localhost/webserver-operator/nginx-debian:${key}-${revision}"
      if ! "$(engine)" image inspect "${name}" >/dev/null 2>&1; then
        log "building the stand-in web image ${name} (Debian's nginx, non-root)"
        build -q --build-arg "BASE_IMAGE=${debian}" --build-arg "REVISION=${revision}" -t "${name}" \
          -f "${ROOT}/hack/images/nginx.Containerfile" "${ROOT}/hack/images" >/dev/null
      fi
    done
    printf '%s\n%s\n' "${first}" "${second}" >"${STATE}/web-images"
  fi
  cat "${STATE}/web-images"
}

case "${1:-}" in
operator) cmd_operator "${2:-}" ;;
push) cmd_push "${2:-}" ;;
web) cmd_web ;;
web-names)
  [[ -s "${STATE}/web-images" ]] || die "no web images chosen yet: run hack/images.sh web (hack/kind.sh up does)"
  cat "${STATE}/web-images"
  ;;
*) die "usage: hack/images.sh operator IMG | push IMG | web | web-names" ;;
esac
