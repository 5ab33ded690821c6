#!/usr/bin/env bash
# Run the Dockerfile's build recipe on the host, without a container engine, and check the result.
#
# Why: CI has no Docker engine, yet a broken image (a dependency missing from the wheels, a module that only
# imports from the source tree, bytecode written at run time on a read-only root filesystem) should fail CI, not a
# user's `helm install`. This script mirrors the Dockerfile step by step in a temporary directory:
#   builder stage  download the locked wheels (requirements.lock, --require-hashes) -> `pip wheel` the project alone
#   runtime stage  venv without pip -> install from those wheels only (--no-index, hash-checked) -> compileall
# then checks what the image's ENTRYPOINT relies on: every module imports, `webserver-operator version` answers
# with the project version, the installed dependencies are consistent, and nothing writes into the venv at run
# time (the image runs with readOnlyRootFilesystem). Keep it in step with the Dockerfile.
#
# Usage: hack/image-recipe.sh            (PYTHON=/path/to/python3.11 to choose the interpreter)
#        KEEP_TMP=1 hack/image-recipe.sh (keep the temporary directory for inspection)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKERFILE="${ROOT}/Dockerfile"

LOG_PREFIX=image-recipe
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# --- the Dockerfile's invariants (what this script mirrors) -------------------------------------------------------
py_minor="$(sed -n 's/^ARG PYTHON_VERSION=\([0-9][0-9.]*\)$/\1/p' "${DOCKERFILE}")"
[[ -n "${py_minor}" ]] || die "Dockerfile: no 'ARG PYTHON_VERSION=<major.minor>' line"
grep -qE '^USER 65532:65532$' "${DOCKERFILE}" || die "Dockerfile: the runtime user must be the numeric 65532:65532"
grep -qF 'ENTRYPOINT ["webserver-operator", "run"]' "${DOCKERFILE}" || die "Dockerfile: unexpected ENTRYPOINT"
grep -qF 'PYTHONDONTWRITEBYTECODE=1' "${DOCKERFILE}" || die "Dockerfile: PYTHONDONTWRITEBYTECODE=1 missing"
grep -qF -- '--no-index' "${DOCKERFILE}" || die "Dockerfile: the runtime stage must install from wheels only"
grep -qF -- '--require-hashes' "${DOCKERFILE}" || die "Dockerfile: dependencies must be installed hash-checked from the lock"
grep -qE '^ARG BASE_IMAGE=[^ ]+@sha256:[0-9a-f]{64}$' "${DOCKERFILE}" || die "Dockerfile: the base image must be pinned by digest"
grep -qF 'compileall' "${DOCKERFILE}" || die "Dockerfile: bytecode must be compiled at build time"

PYTHON="${PYTHON:-python${py_minor}}"
command -v "${PYTHON}" >/dev/null || die "${PYTHON} not found: the image uses Python ${py_minor}; set PYTHON=..."
host_minor="$("${PYTHON}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[[ "${host_minor}" == "${py_minor}" ]] || die "${PYTHON} is Python ${host_minor}, the image uses ${py_minor}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "${ROOT}/pyproject.toml" | head -n1)"
[[ -n "${version}" ]] || die "pyproject.toml: no version"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/image-recipe.XXXXXX")"
cleanup() {
  if [[ -n "${KEEP_TMP:-}" ]]; then
    log "kept ${WORK}"
  else
    rm -rf "${WORK}"
  fi
}
trap cleanup EXIT
start=${SECONDS}

# --- builder stage ------------------------------------------------------------------------------------------------
# COPY requirements.lock; pip download --require-hashes; COPY pyproject.toml README.md webserver_operator (the
# .dockerignore drops bytecode); pip wheel --no-deps.
log "builder: build context (Python ${host_minor}, ${PYTHON})"
mkdir -p "${WORK}/src"
cp "${ROOT}/requirements.lock" "${ROOT}/pyproject.toml" "${ROOT}/README.md" "${WORK}/src/"
tar -C "${ROOT}" --exclude='__pycache__' --exclude='*.py[cod]' -cf - webserver_operator | tar -C "${WORK}/src" -xf -

log "builder: pip download the locked dependencies (hash-checked), pip wheel the project"
(
  cd "${WORK}/src"
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
  # The host's find-links directory would offer wheels the lock did not choose: the recipe uses the index only.
  unset PIP_FIND_LINKS
  "${PYTHON}" -m pip download --quiet --require-hashes --only-binary=:all: --dest "${WORK}/wheels" -r requirements.lock
  "${PYTHON}" -m pip wheel --quiet --no-deps --wheel-dir "${WORK}/wheels/project" .
)
ls "${WORK}/wheels/project"/webserver_operator-"${version}"-*.whl >/dev/null 2>&1 \
  || die "no webserver_operator-${version} wheel was built"
log "builder: $(find "${WORK}/wheels" -name '*.whl' | wc -l) wheels"

# --- runtime stage ------------------------------------------------------------------------------------------------
VENV="${WORK}/venv"
log "runtime: venv without pip, install from the wheels only (--no-index, hash-checked), then the project"
"${PYTHON}" -m venv --without-pip "${VENV}"
PIP_DISABLE_PIP_VERSION_CHECK=1 "${PYTHON}" -m pip --python "${VENV}/bin/python" install --quiet --no-index \
  --find-links="${WORK}/wheels" --no-compile --require-hashes --only-binary=:all: -r "${ROOT}/requirements.lock"
PIP_DISABLE_PIP_VERSION_CHECK=1 "${PYTHON}" -m pip --python "${VENV}/bin/python" install --quiet --no-index \
  --no-deps --no-compile "${WORK}/wheels/project"/webserver_operator-"${version}"-*.whl
[[ ! -e "${VENV}/bin/pip" ]] || die "pip must not be installed into the runtime venv"
log "runtime: compileall"
"${PYTHON}" -m compileall -q -j 0 "${VENV}" >/dev/null

# --- checks: run like the image does ------------------------------------------------------------------------------
# Root ignores file modes, so a read-only filesystem is checked after the fact: nothing under the venv may be newer
# than this marker once the checks have run.
marker="${WORK}/installed.marker"
touch "${marker}"
sleep 1
mkdir -p "${WORK}/run"
run_env=(env -i "PATH=${VENV}/bin:/usr/bin:/bin" "HOME=/nonexistent" "TMPDIR=${WORK}/run"
  "PYTHONDONTWRITEBYTECODE=1" "PYTHONUNBUFFERED=1" "VIRTUAL_ENV=${VENV}")

log "check: dependencies consistent (pip check)"
"${PYTHON}" -m pip --python "${VENV}/bin/python" check >/dev/null || die "pip check failed in the runtime venv"

log "check: every module imports from the installed wheel (not from the source tree) and is precompiled"
(
  cd "${WORK}/run"
  "${run_env[@]}" "${VENV}/bin/python" -I - <<'PY'
import importlib
import importlib.util
import os
import pkgutil
import sys

import webserver_operator

where = os.path.dirname(webserver_operator.__file__)
if not where.startswith(sys.prefix):
    sys.exit(f"webserver_operator imported from {where}, not from the venv {sys.prefix}")
names = [webserver_operator.__name__]
names += [
    m.name
    for m in pkgutil.walk_packages(webserver_operator.__path__, prefix="webserver_operator.")
    if not m.name.endswith(".__main__")  # importing it runs the CLI
]
missing_pyc = []
for name in names:
    module = importlib.import_module(name)
    source = getattr(module, "__file__", None)
    if source and source.endswith(".py") and not os.path.exists(importlib.util.cache_from_source(source)):
        missing_pyc.append(name)
if missing_pyc:
    sys.exit(f"not precompiled: {missing_pyc}")
print(f"imported {len(names)} modules", file=sys.stderr)
PY
) || die "import check failed"

log "check: webserver-operator version"
out="$(cd "${WORK}/run" && "${run_env[@]}" webserver-operator version)" || die "webserver-operator version failed"
[[ "${out}" == "webserver-operator ${version}" ]] || die "webserver-operator version printed '${out}', expected ${version}"

log "check: the ENTRYPOINT's subcommand parses (webserver-operator run --help)"
(cd "${WORK}/run" && "${run_env[@]}" webserver-operator run --help >/dev/null) || die "webserver-operator run --help failed"

written="$(find "${VENV}" -newer "${marker}" | head -n 5)"
[[ -z "${written}" ]] || die "the runtime wrote into the venv (breaks readOnlyRootFilesystem): ${written}"

log "OK: ${out}; image recipe verified in $((SECONDS - start))s"
