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
