"""`sirius tune`: variants of a fused program, an explainable cost model, verification of the
chosen variant, and reports (docs/tune.md).

- `gpus.py`: the GPU table, every number with its source.
- `model.py`: the cost model (launch overhead + max(DRAM, compute, issue), occupancy, waves).
- `counts.py`: the model's inputs measured on the CPU executor (instructions, bytes, FLOPs).
- `variants.py`: the variant space and how it is explored per region; building one variant.
- `fanout.py`: variant builds on Ray, a local process pool, or in process.
- `tuner.py`: `tune()`, which explores, estimates, verifies and chooses.
- `report.py`, `plots.py`: tune.json, report.md, report.html.

Everything here is an estimate unless it says measured: no GPU is used yet.
"""
