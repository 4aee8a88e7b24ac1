"""`sirius tune`: variants of a fused program, an explainable cost model, verification of the
chosen variant, and reports (docs/tune.md).

- `gpus.py`: the GPU table, every number with its source.
- `model.py`: the cost model (launch overhead + max(DRAM, compute, issue), occupancy, waves).
- `counts.py`: the model's inputs measured on the CPU executor (instructions, bytes, FLOPs).
- `variants.py`: the variant space and how it is explored per region; building one variant.
- `fanout.py`: variant builds on Ray, a local process pool, or in process.
- `measure.py`: the variants timed on a GPU (the bench of sirius/runtime/gpu), per program
  and per launch, and the model's error per kernel.
- `calibrate.py`: RUNS.json (measurements) and the least-squares fit of the model's launch
  overhead, effective DRAM bandwidth and issue-rate factor to them.
- `tuner.py`: `tune()`, which explores, estimates, measures, verifies and chooses.
- `report.py`, `plots.py`: tune.json, report.md, report.html, runs.json.

Every time is an estimate unless it is labelled measured (a GPU timed it).
"""
