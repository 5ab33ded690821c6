#!/usr/bin/env bash
# `make release VERSION=x.y.z REGISTRY=<registry>`: publish one version of the operator, the way the README's first
# screen installs it (helm install oci://$REGISTRY/charts/webserver-operator --version $VERSION). docs/releasing.md
# has the why of each step.
#
#   1. refuse: a dirty tree, a version that is not x.y.z or already has a CHANGELOG section, and a pod-template change
#      since the previous release that the CHANGELOG's upgrade notes do not list (tests/support/release_check.py);
#   2. bump Chart.yaml version/appVersion and every other statement of the version, and turn the CHANGELOG's
#      [Unreleased] section into [x.y.z] (tests/support/release_files.py);
#   3. build the image (hack/images.sh: docker or podman) as $REGISTRY/webserver-operator:x.y.z, push it, and read
#      the digest the registry stored (crane digest);
#   4. package a copy of the chart with that registry and digest in values.yaml and the Artifact Hub images
#      annotation, and push it: helm push dist/webserver-operator-x.y.z.tgz oci://$REGISTRY/charts;
#   5. write dist/install.yaml (the image by digest), dist/webserver-operator-x.y.z.spdx.json (syft: the image's
#      SBOM) and dist/SHA256SUMS;
#   6. commit the bump as "Release x.y.z" and tag it vx.y.z (local: push both yourself).
#
# A step that fails stops the release; before step 6 the bump is left uncommitted (`git checkout -- .` undoes it).
# A registry on localhost or 127.0.0.1 is spoken to over plain HTTP (hack/registry.sh runs one).
#
# Environment: VERSION, REGISTRY (required); PY (the project's Python, default .venv/bin/python), HELM and KUBECTL
# (default: yours when recent enough, else the project's build), ENGINE=docker|podman, DIST (default dist).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_PREFIX=release
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"
cd "${ROOT}"

VERSION="${VERSION:-}"
REGISTRY="${REGISTRY:-}"
REGISTRY="${REGISTRY%/}"
PY="${PY:-${ROOT}/.venv/bin/python}"
DIST="${DIST:-${ROOT}/dist}"

[[ "${VERSION}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "VERSION=${VERSION:-<unset>}: give the version to release as x.y.z, e.g. make release VERSION=0.2.0 REGISTRY=<registry>"
[[ -n "${REGISTRY}" ]] ||
  die "REGISTRY is unset: name the registry to publish to, e.g. make release VERSION=${VERSION} REGISTRY=ghcr.io/<owner> (hack/registry.sh up runs a local one)"
[[ -x "${PY}" ]] || die "${PY} not found: run \`make venv\` first (or pass PY=<python with the project installed>)"

# 1. Refusals, before anything is built or published.
if [[ -n "$(git status --porcelain)" ]]; then
  git status --short >&2
  die "the working tree has uncommitted changes (above): a release is built from a commit. Commit or stash them, then run make release again"
fi
if grep -q "^## \[${VERSION}\]" CHANGELOG.md; then
  die "CHANGELOG.md already has a section for ${VERSION}: pick the next version"
fi
"${PY}" -m tests.support.release_check

tool() {
  local bin
  bin="$("${ROOT}/hack/tools.sh" bindir)/$1"
  [[ -x "${bin}" ]] || "${ROOT}/hack/tools.sh" build "$1" >&2
  printf '%s\n' "${bin}"
}
HELM="${HELM:-$("${ROOT}/hack/tools.sh" ensure helm)}"
KUBECTL="${KUBECTL:-$("${ROOT}/hack/tools.sh" ensure kubectl)}"
CRANE="$(tool crane)"
SYFT="$(tool syft)"

plain_http=()
host="${REGISTRY%%/*}"
if [[ "${host%%:*}" == localhost || "${host%%:*}" == 127.0.0.1 ]]; then
  plain_http=(--plain-http)
  export SYFT_REGISTRY_INSECURE_USE_HTTP=true
fi
export SYFT_CHECK_FOR_APP_UPDATE=false # no call home from a release build

# 2. The bump.
log "releasing ${VERSION} to ${REGISTRY}"
"${PY}" -m tests.support.release_files bump "${VERSION}" >/dev/null

# 3. The image.
image="${REGISTRY}/webserver-operator:${VERSION}"
"${ROOT}/hack/images.sh" operator "${image}"
"${ROOT}/hack/images.sh" push "${image}"
digest="$("${CRANE}" digest "${image}")" || die "crane digest ${image} failed: did the push reach ${REGISTRY}?"
pinned="${REGISTRY}/webserver-operator@${digest}"
log "image ${pinned}"

# 4. The chart: a copy with the registry and digest, packaged and pushed.
rm -rf "${DIST}/chart"
mkdir -p "${DIST}/chart"
cp -R charts/webserver-operator "${DIST}/chart/"
"${PY}" -m tests.support.release_files record "${DIST}/chart/webserver-operator" "${REGISTRY}" "${digest}"
"${HELM}" lint --strict "${DIST}/chart/webserver-operator" >/dev/null
package="${DIST}/webserver-operator-${VERSION}.tgz"
rm -f "${package}"
"${HELM}" package "${DIST}/chart/webserver-operator" --destination "${DIST}" >/dev/null
"${HELM}" push "${package}" "oci://${REGISTRY}/charts" ${plain_http[@]+"${plain_http[@]}"}
rm -rf "${DIST}/chart"

# 5. install.yaml, the SBOM, the checksums.
IMG="${pinned}" DIST="${DIST}" KUBECTL="${KUBECTL}" "${ROOT}/hack/install.sh" build-installer
sbom="${DIST}/webserver-operator-${VERSION}.spdx.json"
"${SYFT}" scan "registry:${pinned}" -o "spdx-json=${sbom}" -q
(
  cd "${DIST}"
  files=("$(basename "${package}")" install.yaml "$(basename "${sbom}")")
  if command -v sha256sum >/dev/null; then sha256sum "${files[@]}"; else shasum -a 256 "${files[@]}"; fi >SHA256SUMS
)

# 6. Commit and tag.
git add -A -- CHANGELOG.md charts pyproject.toml webserver_operator/__init__.py Dockerfile config/manager Makefile hack/kind.sh hack/demo.sh
git commit -q -m "Release ${VERSION}" -m "Image ${pinned}; chart oci://${REGISTRY}/charts/webserver-operator ${VERSION}."
git tag -a "v${VERSION}" -m "webserver-operator ${VERSION} (${pinned})"
log "released ${VERSION}: oci://${REGISTRY}/charts/webserver-operator --version ${VERSION}, ${pinned}; files in ${DIST}: $(cd "${DIST}" && echo *.tgz install.yaml *.spdx.json SHA256SUMS)"
log "push the commit and the tag v${VERSION} yourself (git push --follow-tags)"
