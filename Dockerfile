# syntax=docker/dockerfile:1
#
# webserver-operator container image.
#
# Two stages: `builder` downloads the locked dependency wheels (requirements.lock, hash-checked) and builds the
# project's own wheel (the only stage with network access); `runtime` installs those wheels, offline and hash-checked
# again, into a venv on a clean base and nothing else. The resulting image runs as the numeric non-root user 65532
# and never writes outside /tmp, so it works with `readOnlyRootFilesystem: true` (the Helm chart mounts an emptyDir
# on /tmp).
#
# Reproducible: the base image is pinned by digest and every runtime dependency by version and sha256 hash
# (requirements.lock, generated from pyproject.toml by `make lock`; tests/unit/repo/test_requirements_lock.py fails when
# the two disagree). Rebuilding the same commit installs the same bytes.
#
# hack/image-recipe.sh runs the same steps on the host (CI checks them without an engine): keep the two in step.
#
#   make docker-build IMG=localhost/webserver-operator:dev        (Docker or podman, see hack/images.sh)
#
# Bumping the base image (README, "Reproducible image"): look up the digest the tag points to now, e.g.
#   docker buildx imagetools inspect python:3.11-slim-bookworm   (or: skopeo inspect docker://python:3.11-slim-bookworm)
# put `docker.io/library/python:3.11-slim-bookworm@sha256:<digest>` below (fully qualified: podman resolves no
# short names), run `make docker-build`, then `make e2e-kind`.

# The Python minor version of the base image (hack/image-recipe.sh checks its host Python against it).
ARG PYTHON_VERSION=3.11
# The base of both stages: a build ARG, so machines without registry access can substitute a stand-in with the same
# layout (hack/images.sh builds one from Debian's python3). The digest is the multi-architecture index of the tag.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${BASE_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PYTHONDONTWRITEBYTECODE=1
# Set only where PyPI is reached through a private CA: the bundle is passed as the build secret `pip-cert`
# (`--secret id=pip-cert,src=<bundle> --build-arg PIP_CERT=/run/secrets/pip-cert`); unset, pip uses its own.
ARG PIP_CERT

WORKDIR /src
# Dependencies first, from the lock alone: a source change does not download them again. --require-hashes makes pip
# refuse any file whose sha256 is not in the lock, and any dependency the lock does not pin.
COPY requirements.lock ./
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=pip-cert \
    python -m pip download --require-hashes --only-binary=:all: --dest /wheels -r requirements.lock \
    && cp requirements.lock /wheels/

# Only what the wheel needs (see .dockerignore).
COPY pyproject.toml README.md ./
COPY webserver_operator ./webserver_operator
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=pip-cert \
    python -m pip wheel --no-deps --wheel-dir /wheels/project .

FROM ${BASE_IMAGE} AS runtime

ARG VERSION=0.1.0
ARG REVISION=unknown

LABEL org.opencontainers.image.title="webserver-operator" \
      org.opencontainers.image.description="Kubernetes operator that runs a WebServer custom resource as a Deployment plus a NodePort Service." \
      org.opencontainers.image.source="https://github.com/webserver-operator/webserver-operator" \
      org.opencontainers.image.url="https://github.com/webserver-operator/webserver-operator" \
      org.opencontainers.image.documentation="https://github.com/webserver-operator/webserver-operator#readme" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="webserver-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# PYTHONDONTWRITEBYTECODE: the root filesystem is read-only at run time; everything is compiled below instead.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv

# Install from the builder's wheels only (--no-index: no network, no compiler), hash-checked against the lock, into a
# venv without pip; then the project's wheel without dependencies (the lock holds them all). Compile the venv and the
# interpreter's standard library (the official image ships it without .pyc files) so start-up never needs to write
# bytecode. The wheels are bind-mounted, so they never become an image layer. `python` is still the base image's
# interpreter here (the venv goes on PATH below), so `python -m pip` is the base image's pip.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m venv --without-pip "${VIRTUAL_ENV}" \
    && python -m pip --python "${VIRTUAL_ENV}/bin/python" install --no-index --find-links=/wheels --no-compile \
        --require-hashes --only-binary=:all: -r /wheels/requirements.lock \
    && python -m pip --python "${VIRTUAL_ENV}/bin/python" install --no-index --no-deps --no-compile \
        /wheels/project/webserver_operator-*.whl \
    && python -m compileall -q -j 0 "${VIRTUAL_ENV}" "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nonroot \
    && "${VIRTUAL_ENV}/bin/webserver-operator" version

ENV PATH=/opt/venv/bin:${PATH}

# Numeric, so `runAsNonRoot: true` can be verified by the kubelet without reading /etc/passwd.
USER 65532:65532
WORKDIR /tmp

# Metrics (/metrics, HTTPS by default) and health probes (/healthz, /readyz).
EXPOSE 8443 8081

ENTRYPOINT ["webserver-operator", "run"]
