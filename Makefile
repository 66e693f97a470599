# The two commands a newcomer needs are `make run` and `make test`; both set
# themselves up from nothing (venv, packages).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install run test unit lint bench clean

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

test: install lint
	QUEUESCOPE_E2E_REQUIRED=1 $(BIN)/pytest

bench: install
	$(BIN)/python -m benchmarks all

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
