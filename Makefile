# The two commands a newcomer needs are `make run` and `make test`; both set
# themselves up from nothing (venv, packages).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install run test unit lint bench clean controlplane chromium deploy undeploy

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/queuescope serve --embedded manifests/samples --demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict scheduler visibility_server queuescope

unit: install
	$(BIN)/pytest

# etcd, kube-apiserver and kubectl for tests/e2e, built once from their Go modules into a
# cache outside the repository (~/.cache/queuescope/controlplane) and reused afterwards;
# then kube-controller-manager, kube-scheduler and kwok for the tests that run Pods.
controlplane:
	$(PYTHON) tools/controlplane/build.py
	$(PYTHON) tools/controlplane/build.py --nodes

# Debian's Chromium for tests/browser: Playwright drives it by path and never downloads a
# browser of its own. Installed once with apt-get (as root, or through sudo).
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

chromium:
	test -x $(CHROMIUM) || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }

test: install lint controlplane chromium
	QUEUESCOPE_E2E_REQUIRED=1 \
	QUEUESCOPE_KUBECTL="$$($(PYTHON) tools/controlplane/build.py --print-dir)/kubectl" \
	$(BIN)/pytest

BENCH_STAMP := $(VENV)/.bench-stamp

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# Every benchmark of docs/performance.md at its full size (a few minutes); rewrites the
# generated part of docs/benchmarks.md, docs/benchmarks.json and the latency plot.
bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks all

# Install on / remove from the cluster KUBECTL talks to (docs/cluster.md#install-upgrade-and-uninstall, docs/operations.md):
# certificates into the git-ignored manifests/overlays/default/certs if absent, everything but
# the APIServices, the rollout, then the APIServices. undeploy deletes the APIServices first;
# the CRDs (and every queue and Workload) only with DELETE_CRDS=yes.
KUBECTL ?= kubectl
DELETE_CRDS ?=

deploy: install
	$(BIN)/python tools/deploy.py install --kubectl '$(KUBECTL)'

undeploy: install
	$(BIN)/python tools/deploy.py uninstall --kubectl '$(KUBECTL)'$(if $(filter yes,$(DELETE_CRDS)), --delete-crds)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
