# webserver-operator: the front door. `make help` lists every target.
include hack/versions.env

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TOOLS_BIN := $(shell hack/tools.sh bindir)
# kubectl and helm for the targets that act on your cluster: yours from PATH when recent enough, else the project's
# build (`hack/tools.sh pick` says on stderr which one, and why); KUBECTL=<path>, HELM=<path> choose. Picked once, and
# only when a goal uses them.
ifneq ($(filter install uninstall deploy undeploy build-installer,$(MAKECMDGOALS)),)
ifeq ($(origin KUBECTL),undefined)
KUBECTL := $(shell hack/tools.sh pick kubectl)
endif
endif
ifneq ($(filter chart-package,$(MAKECMDGOALS)),)
ifeq ($(origin HELM),undefined)
HELM := $(shell hack/tools.sh pick helm)
endif
endif
# Every target builds only the tools it runs: $(call built,VAR,tool) is the build of `tool` when VAR points into the
# tools cache, nothing when it is yours.
built = $(if $(filter $(TOOLS_BIN)/%,$($(1))),tools-$(2))
# Test backends: local (the control plane built here, started on demand), existing (KUBE_CONTEXT=<name> of a
# cluster you own; the suites install cluster-scoped objects), kind (needs a container engine: `make engine`).
CLUSTER ?= local
export CLUSTER
PYTEST_ARGS ?=
# The operator image. No public image is published yet: the default is a local name (docker-build builds it,
# kind-load loads it into kind, the chart and config/ default to it); set IMG=<registry>/webserver-operator:<tag>
# to push it and to deploy from your registry.
IMG ?= localhost/webserver-operator:0.1.0
export IMG

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9 -]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is not on PATH: install Python >= 3.11 (with its venv module, e.g. apt-get install python3 python3-venv), or pass PYTHON=<path to python3.11 or newer>" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "$(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); the project needs >= 3.11: install it and pass PYTHON=<path to python3.11 or newer>" >&2; exit 1; }
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { echo "$(PYTHON) has no venv/ensurepip module: install it (e.g. apt-get install python3-venv) and run this again" >&2; exit 1; }
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
test-unit: venv ## Unit tests only (pure: no cluster, no built tools, no matplotlib; tests marked `tools` or `plots` are deselected).
	$(PY) -m pytest tests/unit -m "not tools and not plots" $(PYTEST_ARGS)

.PHONY: fuzz-http1
fuzz-http1: venv ## Long differential fuzz of the API client's HTTP/1.1 parser against h11 (FUZZ_EXAMPLES=20000, fresh draws).
	HTTP1_FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),20000) $(PY) -m pytest tests/unit/kube/test_http1_fuzz.py -o timeout=0 $(PYTEST_ARGS)

.PHONY: test-tools
test-tools: venv tools-kubectl tools-helm tools-promtool ## The unit tests test-unit leaves out: chart, manifests and rules through helm/kubectl/promtool.
	$(PY) -m pytest tests/unit -m tools $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: venv tools tools-release ## Integration tests against the local control plane (started on demand).
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

.PHONY: test-e2e
test-e2e: venv tools tools-prometheus ## End-to-end tests (installed Helm chart) on CLUSTER=local|existing|kind.
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

# The `plots` extra (matplotlib): only the targets that draw pictures install it.
$(VENV)/.plots-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[plots]'
	touch $@

.PHONY: monitoring-panels
monitoring-panels: venv tools tools-prometheus $(VENV)/.plots-installed ## Redraw docs/images/panel-*.png (docs/monitoring.md) from a real Prometheus scraping the operator.
	RENDER_PANELS=$(CURDIR)/docs/images $(PY) -m pytest tests/e2e/test_dashboard_prometheus.py $(PYTEST_ARGS)

.PHONY: e2e-kind
e2e-kind: venv tools-kubectl tools-helm tools-prometheus ## e2e suite on a kind cluster: real containers, the image from the Dockerfile (see `make engine`).
	status=0; hack/kind.sh up || status=$$?; \
	if ((status == 0)); then CLUSTER=kind $(PY) -m pytest tests/e2e $(PYTEST_ARGS) || status=$$?; fi; \
	if [[ -z "$${KEEP_CLUSTER:-}" ]]; then hack/kind.sh down; fi; exit $$status

# The integration suite on the oldest Kubernetes the chart claims (KUBERNETES_OLDEST_VERSION in hack/versions.env),
# on a local control plane of its own: KUBERNETES_LINE=oldest makes hack/tools.sh, hack/cluster.sh and the tests use
# that version's kube-apiserver, controller-manager, scheduler and kubectl.
OLDEST_CLUSTER_NAME ?= $(or $(CLUSTER_NAME),webserver-operator)-oldest

.PHONY: test-integration-oldest
test-integration-oldest: venv tools-oldest ## Integration tests on the oldest Kubernetes the chart claims (Chart.yaml kubeVersion), own cluster.
	chaos/tools.sh build
	KUBERNETES_LINE=oldest CLUSTER_NAME=$(OLDEST_CLUSTER_NAME) $(PY) -m pytest tests/integration $(PYTEST_ARGS)

# `make test` builds the oldest line's control plane (`tools-oldest`, about 7 minutes of Go compiles cold, a cache hit
# warm) in the background at the lowest CPU priority while the suite runs on the newest line, which does not need it:
# cold, that takes it off the critical path; its log is shown only if it fails.
OLDEST_TOOLS_LOG := _out/tools-oldest.log

.PHONY: test
test: lint tools tools-prometheus tools-release $(VENV)/.plots-installed ## Everything CI runs: lint, unit, integration (the short chaos run included) and e2e on the local control plane, then integration on the oldest Kubernetes.
	chaos/tools.sh build
	mkdir -p $(dir $(OLDEST_TOOLS_LOG))
	echo "== building the Kubernetes $(KUBERNETES_OLDEST_VERSION) control plane in the background (log: $(OLDEST_TOOLS_LOG))"
	KUBERNETES_LINE=oldest nice -n 19 hack/tools.sh build all >$(OLDEST_TOOLS_LOG) 2>&1 & oldest=$$!; \
	status=0; $(PY) -m pytest tests $(PYTEST_ARGS) || status=$$?; \
	if ! wait $$oldest; then \
	  cat $(OLDEST_TOOLS_LOG); echo "== the oldest line's tools (make tools-oldest) failed to build, log above: run \`make tools-oldest\` to retry"; exit 1; \
	fi; \
	echo "== integration tests on Kubernetes $(KUBERNETES_OLDEST_VERSION) (cluster $(OLDEST_CLUSTER_NAME))"; \
	KUBERNETES_LINE=oldest CLUSTER_NAME=$(OLDEST_CLUSTER_NAME) $(PY) -m pytest tests/integration $(PYTEST_ARGS) || status=$$?; \
	exit $$status

.PHONY: chaos-short
chaos-short: venv tools ## Only the short chaos run of `make test` (20 WebServers, etcd frozen, API server restarted, leader reset), ~2 min.
	chaos/tools.sh build
	$(PY) -m pytest tests -m chaos $(PYTEST_ARGS)

##@ Reliability

CHAOS_ARGS ?=

.PHONY: chaos
chaos: venv tools ## Chaos run (not in `make test`): 200 WebServers under churn while etcd, the API server, the network and the operator fail; writes docs/reliability.md. CHAOS_ARGS="--faults a,b" for a subset; CHAOS_ARGS="--preset sharded" for 3 replicas with --shards 8 (shard-kill, shard-freeze, shard-apiserver-restart, shard-scale).
	chaos/tools.sh build
	$(PY) -m chaos $(CHAOS_ARGS)

##@ Local control plane

.PHONY: tools
tools: ## Build every tool the tests use (control plane, kubectl, etcd, kwok, helm, promtool) into the tools cache.
	hack/tools.sh build

.PHONY: tools-kubectl tools-helm tools-kind tools-promtool tools-prometheus tools-cluster
tools-kubectl tools-helm tools-kind tools-promtool tools-prometheus tools-cluster: ## Build one tool only (tools-cluster: control plane, etcd, kwok; tools-prometheus: the server, for the dashboard test).
	hack/tools.sh build $(@:tools-%=%)

.PHONY: tools-release
tools-release: ## Build the release tools: crane (the local OCI registry, image digests) and syft (SBOM), for make release and its test.
	hack/tools.sh build crane syft

.PHONY: tools-oldest
tools-oldest: ## Build the control plane of the oldest Kubernetes the chart claims (KUBERNETES_OLDEST_VERSION); other tools are shared.
	KUBERNETES_LINE=oldest hack/tools.sh build all

.PHONY: kind-tools
kind-tools: tools-kind ## Build kind (only useful where a container engine runs).

.PHONY: cluster-up
cluster-up: tools-cluster ## Start the local control plane with a Ready kwok node (reuses a running one).
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

# kind-up, kind-down and e2e-kind use the kind cluster KIND_CLUSTER_NAME (default webserver-operator); kind-load loads
# into KIND_CLUSTER_NAME, default your only kind cluster (or the one your kubectl context points at). kind itself:
# yours from PATH when recent enough, else the project's build (KIND=<path> chooses); kind-load takes any kind on
# PATH and builds one only when there is none.
.PHONY: kind-up
kind-up: ## Start the kind cluster, build the image (IMG) and the e2e web images and load them into it.
	hack/kind.sh up

.PHONY: kind-load
kind-load: ## Load IMG (built by docker-build, not rebuilt) into KIND_CLUSTER_NAME (default: your only kind cluster).
	hack/kind.sh load-image

.PHONY: kind-down
kind-down: ## Delete the kind cluster (its containers, volumes and, once unused, the kind network).
	hack/kind.sh down

##@ Benchmark

BENCH_ARGS ?=

$(VENV)/.bench-installed: $(VENV)/.plots-installed bench/requirements.txt
	$(PY) -m pip install --quiet -r bench/requirements.txt
	touch $@

.PHONY: bench
bench: venv tools $(VENV)/.bench-installed ## Benchmark vs the raw API limit, a Go and a kopf peer (N=1000, 1 round, within an hour; BENCH_ARGS="--n 100" for a quick look). Not in make test.
	bench/peers/go/build.sh >/dev/null
	$(PY) -m bench run $(BENCH_ARGS)

.PHONY: bench-profile
bench-profile: venv tools $(VENV)/.bench-installed ## Profile the operator (py-spy, tracemalloc) during a bulk create of 1000 WebServers.
	$(PY) -m bench profile $(BENCH_ARGS)

.PHONY: bench-sharded
bench-sharded: venv tools $(VENV)/.bench-installed ## Sharded replicas: 10000 WebServers under 1, 2, 4 replicas, 8 shards (BENCH_ARGS="--n 500 --replicas 1,2" for a quick look; --client-side-too adds the gate-off run). Not in make test.
	$(PY) -m bench sharded $(BENCH_ARGS)

##@ Build

.PHONY: image-recipe
image-recipe: venv ## Run the Dockerfile's steps on the host (wheel, clean venv, import check): CI does, no Docker needed.
	hack/image-recipe.sh

# docker-build and docker-push need only a container engine: docker when `docker info` answers, else podman;
# ENGINE=docker|podman chooses. No Go and no privileged container (that probe is for kind only: hack/engine.sh).
.PHONY: docker-build
docker-build: ## Build IMG from the Dockerfile with docker (or podman; ENGINE=docker|podman chooses).
	hack/images.sh operator $(IMG)

.PHONY: docker-push
docker-push: ## Push IMG to its registry with docker (or podman; ENGINE=docker|podman chooses).
	hack/images.sh push $(IMG)

##@ Deployment (kubebuilder style; on the cluster of the current kubeconfig)

# Where `make deploy` puts the operator; DRY_RUN=server|client checks without changing anything; DIST receives the
# installer and the chart archive.
DEPLOY_NAMESPACE ?= webserver-operator-system
DRY_RUN ?= none
DIST ?= dist
INSTALL_ENV = IMG='$(IMG)' DEPLOY_NAMESPACE='$(DEPLOY_NAMESPACE)' DRY_RUN='$(DRY_RUN)' DIST='$(DIST)' KUBECTL='$(KUBECTL)'

.PHONY: install
install: $(call built,KUBECTL,kubectl) ## Install the WebServer CRD (server-side apply; also upgrades it).
	$(INSTALL_ENV) hack/install.sh install

.PHONY: uninstall
uninstall: $(call built,KUBECTL,kubectl) ## Delete the WebServer CRD: EVERY WebServer and its Deployment and Service go with it.
	$(INSTALL_ENV) hack/install.sh uninstall

.PHONY: deploy
deploy: $(call built,KUBECTL,kubectl) ## Deploy config/default (CRD, RBAC, operator) with IMG into DEPLOY_NAMESPACE.
	$(INSTALL_ENV) hack/install.sh deploy

.PHONY: undeploy
undeploy: $(call built,KUBECTL,kubectl) ## Delete what deploy created, the CRD included (so every WebServer too); needs no IMG.
	DEPLOY_NAMESPACE='$(DEPLOY_NAMESPACE)' DRY_RUN='$(DRY_RUN)' KUBECTL='$(KUBECTL)' hack/install.sh undeploy

.PHONY: build-installer
build-installer: $(call built,KUBECTL,kubectl) ## Write dist/install.yaml (DIST=...): CRD, RBAC and Deployment (IMG) in one file.
	$(INSTALL_ENV) hack/install.sh build-installer

# make release VERSION=x.y.z REGISTRY=<registry>: the image and the chart (OCI) published, dist/ written, the bump
# committed and tagged (docs/releasing.md). Refuses a dirty tree and an unlisted pod-template change.
.PHONY: release
release: ## Publish VERSION=x.y.z to REGISTRY=<registry>: image + OCI chart (by digest), dist/install.yaml, SBOM, SHA256SUMS.
	VERSION='$(VERSION)' REGISTRY='$(REGISTRY)' PY='$(abspath $(PY))' DIST='$(abspath $(DIST))' hack/release.sh

.PHONY: registry-up registry-down
registry-up: ## Start a local OCI registry (crane registry serve, built from Go modules) and print its address.
	@hack/registry.sh up
registry-down: ## Stop the local OCI registry and forget what was pushed to it.
	hack/registry.sh down

.PHONY: chart-package
chart-package: $(call built,HELM,helm) ## Lint (--strict) and package the Helm chart into dist/webserver-operator-<version>.tgz.
	$(HELM) lint --strict charts/webserver-operator
	$(HELM) package charts/webserver-operator --destination $(DIST)

##@ Run

.PHONY: run
run: venv ## Run the operator on this machine against the current kubeconfig.
	$(VENV)/bin/webserver-operator run

.PHONY: demo
demo: venv ## The demo's own local cluster + CRD + operator + a Ready sample WebServer (builds only what it runs).
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop the demo operator and the demo's cluster (the tests' cluster is left alone).
	hack/demo.sh down
