# syntax=docker/dockerfile:1
#
# webserver-operator container image.
#
# Two stages: `builder` turns the project and every dependency into wheels (the only stage with build tools and
# network access); `runtime` installs those wheels, offline, into a venv on a clean base and nothing else. The
# resulting image runs as the numeric non-root user 65532 and never writes outside /tmp, so it works with
# `readOnlyRootFilesystem: true` (the Helm chart mounts an emptyDir on /tmp).
#
# hack/image-recipe.sh runs the same steps on the host (CI has no Docker engine): keep the two in step.
#
#   docker build -t ghcr.io/webserver-operator/webserver-operator:0.1.0 .

# The minor version is pinned; rebuilds pick up Python patch releases and Debian security fixes.
ARG PYTHON_VERSION=3.11
ARG DEBIAN_RELEASE=bookworm

FROM python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the wheel needs (see .dockerignore): source changes do not invalidate more than this stage.
COPY pyproject.toml README.md ./
COPY webserver_operator ./webserver_operator

# One wheel per distribution: the project's and all its dependencies' (binary wheels where PyPI has them).
RUN --mount=type=cache,target=/root/.cache/pip \
    python -m pip wheel --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE} AS runtime

# Re-declared: a global ARG is only visible in FROM lines unless a stage names it again.
ARG PYTHON_VERSION
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
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

# Install from the builder's wheels only (--no-index: no network, no compiler), into a venv without pip, then
# compile the venv and the standard library (the official image ships the stdlib without .pyc files) so start-up
# never needs to write bytecode. The wheels are bind-mounted, so they never become an image layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m venv --without-pip "${VIRTUAL_ENV}" \
    && python -m pip --python "${VIRTUAL_ENV}/bin/python" install --no-index --find-links=/wheels --no-compile \
        webserver-operator \
    && python -m compileall -q -j 0 "${VIRTUAL_ENV}" "/usr/local/lib/python${PYTHON_VERSION}" \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nonroot \
    && webserver-operator version

# Numeric, so `runAsNonRoot: true` can be verified by the kubelet without reading /etc/passwd.
USER 65532:65532
WORKDIR /tmp

# Metrics (/metrics) and health probes (/healthz, /readyz).
EXPOSE 8080 8081

ENTRYPOINT ["webserver-operator", "run"]
