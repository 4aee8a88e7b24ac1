.PHONY: setup demo test test-all bench fuzz lint clean-cache

VENV := .venv
SIRIUS := $(VENV)/bin/sirius

setup:
	@bash scripts/setup.sh

# The GPU extra (pycuda built against the local CUDA toolkit, cuda-python): docs/gpu.md.
.PHONY: setup-gpu
setup-gpu: setup
	@bash scripts/setup_gpu.sh

# Everything a lent GPU machine runs, prepared here (no GPU needed): .gpu/carry.tgz (docs/gpu.md).
.PHONY: gpu-carry
gpu-carry: setup
	@bash scripts/gpu_prepare.sh

demo: setup
	$(SIRIUS) fuse kernels/matmul_bias_act.cu -o out/matmul_bias_act
	$(SIRIUS) verify kernels/matmul_bias_act.cu
	$(SIRIUS) verify kernels/lstm_cell.cu

test: setup
	$(VENV)/bin/ruff check sirius tests
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python -m pytest -q -n 2 -m "not slow" --dist loadgroup --durations=25

# Ray for `sirius tune --ray` and its tests (the `scale` extra); test-all runs those tests.
.PHONY: setup-scale
setup-scale: setup
	@$(VENV)/bin/python -c "import ray" 2>/dev/null || $(VENV)/bin/python -m pip install -q -e ".[dev,scale]"

# The `scale` extra from nothing: a fresh venv in a temporary directory (removed after),
# `pip install .[scale]` into it, `sirius tune` with that venv's sirius (Ray by default: it says
# which backend ran, and why not Ray), then the Ray tests with that venv (pytest -rs prints why
# they skip when Ray cannot start). Minutes: it installs Ray (docs/tune.md).
.PHONY: check-scale
check-scale:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; t0=$$(date +%s); \
	python3 -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install -q ".[scale]" "pytest>=8,<9.2"; \
	echo "check-scale: pip install .[scale] took $$(( $$(date +%s) - t0 )) s"; \
	"$$tmp/venv/bin/python" -c "import ray; print('check-scale: ray', ray.__version__)"; \
	(cd "$$tmp" && "$$tmp/venv/bin/sirius" tune "$(CURDIR)/kernels/elementwise_chain.cu" \
		-o "$$tmp/out" --measure off -q >/dev/null); \
	"$$tmp/venv/bin/python" -c "import json, sys; f = json.load(open(sys.argv[1]))['fanout']; \
		print('check-scale: sirius tune ran on', f['backend'], f['why_not_ray'] or '')" \
		"$$tmp/out/tune.json"; \
	"$$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider -rs -m slow -k ray \
		tests/tune/test_tune_cli.py; \
	echo "check-scale: $$(( $$(date +%s) - t0 )) s in all"

# Everything: the slow tests, the large models and the paper shapes (not run by CI).
test-all: setup-scale
	$(VENV)/bin/ruff check sirius tests
	$(VENV)/bin/lint-imports
	SIRIUS_FUSE_ALL=1 SIRIUS_TVM_PAPER=1 $(VENV)/bin/python -m pytest -q -n 2 --dist loadgroup --durations=25

bench: setup
	$(VENV)/bin/python scripts/bench_executor.py

fuzz: setup
	$(VENV)/bin/python scripts/fuzz.py --fuse --count 1000
	$(VENV)/bin/python scripts/fuzz.py --fuse --count 1000 --megakernel grid
	$(VENV)/bin/python scripts/fuzz.py --fuse --count 1000 --megakernel counters

lint: setup
	$(VENV)/bin/ruff check sirius tests scripts

clean-cache:
	rm -rf $${XDG_CACHE_HOME:-$$HOME/.cache}/sirius
