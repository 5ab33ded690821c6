# webserver-operator: the front door. `make help` lists every target.
include hack/versions.env

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TOOLS_BIN = $(shell hack/tools.sh bindir)
KUBECTL = $(TOOLS_BIN)/kubectl
HELM = $(TOOLS_BIN)/helm
# Test backends: local (the control plane built here, started on demand), existing (KUBE_CONTEXT=<name> of a
# cluster you own; the suites install cluster-scoped objects), kind (needs a container engine: `make engine`).
CLUSTER ?= local
export CLUSTER
PYTEST_ARGS ?=
# The operator image: a local name by default (no release is published to a registry yet). For a cluster that pulls
# from a registry: make docker-build docker-push IMG=<registry>/<repository>:<tag>.
IMG ?= localhost/webserver-operator:dev
export IMG

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create .venv with the package and its dev tools.

.PHONY: fmt
fmt: venv ## Format the code (ruff format + import sorting).
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --select I --fix .

.PHONY: lint
lint: venv ## Lint: ruff (style + format check), mypy --strict, import-linter layer contracts.
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

.PHONY: lock
lock: venv ## Regenerate requirements.lock (hashes of every runtime dependency) from pyproject.toml.
	$(VENV)/bin/uv pip compile pyproject.toml --generate-hashes --universal --python-version 3.11 --native-tls \
		--quiet --custom-compile-command "make lock" -o requirements.lock

.PHONY: manifests
manifests: venv ## Generate the CRD (config/crd, chart) from the pydantic models.
	$(VENV)/bin/webserver-operator manifests

##@ Tests

.PHONY: test-unit
test-unit: venv ## Unit tests only (pure, no cluster).
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: venv tools ## Integration tests against the local control plane (started on demand).
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

.PHONY: test-e2e
test-e2e: venv tools ## End-to-end tests (installed Helm chart) on CLUSTER=local|existing|kind.
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

.PHONY: e2e-kind
e2e-kind: venv tools ## e2e suite on a kind cluster: real containers, the image from the Dockerfile (see `make engine`).
	hack/kind.sh up
	status=0; CLUSTER=kind $(PY) -m pytest tests/e2e $(PYTEST_ARGS) || status=$$?; \
	if [[ -z "$${KEEP_CLUSTER:-}" ]]; then hack/kind.sh down; fi; exit $$status

.PHONY: test
test: lint tools ## Everything CI runs: lint, unit, integration and e2e tests on the local control plane.
	$(PY) -m pytest tests $(PYTEST_ARGS)

##@ Local control plane

.PHONY: tools
tools: ## Build kube-apiserver/-controller-manager/-scheduler, kubectl, etcd, kwok, helm into the tools cache.
	hack/tools.sh build

.PHONY: kind-tools
kind-tools: ## Also build kind (only useful where a container engine runs).
	hack/tools.sh build kind

.PHONY: cluster-up
cluster-up: tools ## Start the local control plane with a Ready kwok node (reuses a running one).
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane and remove its state.
	hack/cluster.sh down

.PHONY: cluster-status
cluster-status: ## Show the local cluster's nodes.
	hack/cluster.sh status

.PHONY: kubeconfig
kubeconfig: ## Print the admin kubeconfig path of the local cluster (use with make -s).
	@hack/cluster.sh kubeconfig

##@ kind (real containers)

.PHONY: engine
engine: ## Install + configure a container engine kind can use (podman from Debian's packages); says what it changes.
	hack/engine.sh install

.PHONY: kind-node-image
kind-node-image: ## The kind node image: pull the pinned kindest/node, or build it offline (cached by its inputs).
	hack/kind-node-image.sh ensure

.PHONY: kind-up
kind-up: tools ## Start the kind cluster, build the image (IMG) and the e2e web images and load them into it.
	hack/kind.sh up

.PHONY: kind-load
kind-load: ## Build IMG from the Dockerfile and load it into the running kind cluster.
	hack/kind.sh load-image

.PHONY: kind-down
kind-down: ## Delete the kind cluster (its containers, volumes and, once unused, the kind network).
	hack/kind.sh down

##@ Build

.PHONY: image-recipe
image-recipe: venv ## Run the Dockerfile's steps on the host (wheel, clean venv, import check): CI does, no Docker needed.
	hack/image-recipe.sh

.PHONY: docker-build
docker-build: ## Build IMG from the Dockerfile with the detected engine (docker or podman).
	hack/images.sh operator $(IMG)

.PHONY: docker-push
docker-push: ## Push IMG to its registry with the detected engine.
	$$(hack/engine.sh detect) push $(IMG)

##@ Run

.PHONY: run
run: venv ## Run the operator on this machine against the current kubeconfig.
	$(VENV)/bin/webserver-operator run

.PHONY: demo
demo: venv tools ## Local cluster + CRD + operator + a Ready sample WebServer, then how to play with it.
	hack/demo.sh
