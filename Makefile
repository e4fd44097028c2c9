# Entry points. Each target runs the idempotent setup first (seconds when already done).
VENV := .venv
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: setup demo webdemo test test-fast lint bench clean-data

setup:
	bash scripts/setup.sh

# CPU numerics pinned to the AVX2 code paths for the demo and every process it starts: MKL, oneDNN and
# ATen otherwise pick kernels by the CPU (AVX-512 where present), and their sums differ in the last bits.
DEMO_NUMERICS := MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2

demo: setup
	$(DEMO_NUMERICS) $(VENV)/bin/grove demo

# The web demo on the newest best checkpoint `make demo` wrote (http://127.0.0.1:7860).
webdemo: setup
	@ckpt=$$(ls -t runs/demo/version_*/checkpoints/best-*.ckpt 2>/dev/null | head -1); \
	if [ -z "$$ckpt" ]; then echo "make webdemo: no demo checkpoint in runs/demo/; run make demo first"; exit 1; fi; \
	echo "web demo of $$ckpt"; \
	$(VENV)/bin/grove webdemo --config configs/demo.yaml --ckpt-path "$$ckpt"

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) .ci/import_cycles.py
	$(PY) .ci/house_rules.py

bench: setup
	for f in bench/bench_*.py; do $(PY) $$f || exit 1; done

clean-data:
	rm -rf data/synthetic
