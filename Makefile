# Entry points. Each target runs the idempotent setup first (seconds when already done).
VENV := .venv
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: setup demo test test-fast lint bench clean-data

setup:
	bash scripts/setup.sh

demo: setup
	$(PY) scripts/demo.py

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

bench: setup
	for f in bench/bench_*.py; do $(PY) $$f || exit 1; done

clean-data:
	rm -rf data/synthetic
