"""Measuring variants on a GPU (`sirius tune --measure`, docs/tune.md).

The variants are timed with the bench machinery (sirius/runtime/gpu/bench.py), all of them in
one bench so that their runs interleave and clock or temperature drift spreads over every
variant: each program's device work (launches, device-to-device copies, memsets, host loops
unrolled) replayed on one stream, a CUDA event before it and one after every operation, so the
same runs give the whole program's time and each launch's; `warmup` untimed runs, then `runs`
timed ones; input sets rotated between runs; L2 flushed (a memset of twice its size) before
every run, outside the events; median, p10 and p90. CUDA graphs are not used: the model's
launch overhead is that of launches issued one by one. Allocations and host<->device copies
are set-up work, untimed, as in `sirius bench`.

The model's error per kernel is (estimate - measured) / measured: positive when the model
estimates more time than the GPU took.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sirius.tune.model import LaunchCounts, ProgramEstimate


@dataclass(frozen=True)
class MeasureConfig:
    runs: int = 50
    warmup: int = 5
    input_sets: int = 4
    flush_l2: bool = True


@dataclass(frozen=True)
class LaunchTime:
    kernel: str
    median_s: float
    p10_s: float
    p90_s: float

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "measured": True, "median_s": self.median_s,
                "p10_s": self.p10_s, "p90_s": self.p90_s}


@dataclass(frozen=True)
class Measured:
    """One variant's time on the GPU: the whole program's device work, and each launch."""

    median_s: float
    p10_s: float
    p90_s: float
    runs: int
    method: str
    device: str
    launches: tuple[LaunchTime, ...] = ()

    def to_json(self) -> dict:
        return {"measured": True, "device": self.device, "median_s": self.median_s,
                "p10_s": self.p10_s, "p90_s": self.p90_s, "runs": self.runs,
                "method": self.method}


@dataclass(frozen=True)
class KernelError:
    """A kernel's estimated and measured time (all its launches) and the model's error."""

    kernel: str
    launches: int
    estimate_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return (self.estimate_s - self.measured_s) / self.measured_s if self.measured_s \
            else float("inf")

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "launches": self.launches, "estimate_s": self.estimate_s,
                "estimate": True, "measured_s": self.measured_s, "measured": True,
                "relative_error": self.error}


@dataclass(frozen=True)
class MeasureInfo:
    """Whether this run measured, why (not), on what, and how."""

    on: bool
    why: str
    device: dict | None = None
    method: str = ""
    config: MeasureConfig | None = None
    ran_on: str = ""  # "this process" or "a Ray task with one GPU"

    def to_json(self) -> dict:
        c = self.config
        return {"on": self.on, "why": self.why, "device": self.device, "method": self.method,
                "ran_on": self.ran_on or None,
                "config": None if c is None else {"runs": c.runs, "warmup": c.warmup,
                                                  "input_sets": c.input_sets,
                                                  "flush_l2": c.flush_l2}}


def method_text(config: MeasureConfig, input_sets: int, flush_bytes: int) -> str:
    flush = (f"L2 flushed before every run (a {flush_bytes >> 20} MiB memset, untimed)"
             if flush_bytes else "no L2 flush")
    return (f"median of {config.runs} timed runs after {config.warmup} warm-up runs; "
            f"{input_sets} input set(s) rotated; {flush}; CUDA events on one stream around "
            "the program's device work (launches, device copies, memsets, host loops "
            "unrolled) and after every operation for per-launch times; launches issued one "
            "by one (no CUDA graph); allocations and host<->device copies untimed")


def measure_programs(programs: dict, device, config: MeasureConfig, seed: int,
                     progress: Callable[[str], None] = lambda _: None
                     ) -> tuple[dict[str, Measured], str, list[str]]:
    """Time every program (name -> bench.BenchProgram) in one bench: (name -> Measured,
    the method text, the bench's notes)."""
    from sirius.runtime.gpu.bench import BenchConfig, bench

    bc = BenchConfig(runs=config.runs, warmup=config.warmup, input_sets=config.input_sets,
                     seed=seed, flush_l2=config.flush_l2, graphs=False, per_launch=True)
    res = bench(programs, bc, device=device, progress=progress)
    method = method_text(config, res.input_sets, res.flush_bytes)
    name = res.device.get("name", "GPU")
    out = {}
    for side in programs:
        t = res.timings[side]
        ls = tuple(LaunchTime(x["kernel"], x["median_us"] * 1e-6, x["p10_us"] * 1e-6,
                              x["p90_us"] * 1e-6) for x in res.launches.get(side, ()))
        out[side] = Measured(t["median_us"] * 1e-6, t["p10_us"] * 1e-6, t["p90_us"] * 1e-6,
                             t["runs"], method, name, ls)
    return out, method, list(res.notes)


def measure_on_a_gpu(programs: dict, config: MeasureConfig, seed: int
                     ) -> tuple[dict[str, Measured], str, list[str]]:
    """Task entry point (a Ray task given one GPU, fanout.Fanout.on_gpu): `measure_programs`
    on the GPU this process can use."""
    from sirius.runtime.gpu import GpuDevice

    return measure_programs(programs, GpuDevice(time_launches=False), config, seed)


def paired(counts: tuple[LaunchCounts, ...], m: Measured) -> bool:
    """Whether the GPU ran the launches the CPU executor counted, in the same order."""
    return len(m.launches) == len(counts) and all(
        lt.kernel == c.kernel for lt, c in zip(m.launches, counts, strict=True))


def kernel_errors(est: ProgramEstimate, m: Measured) -> list[KernelError]:
    """Per kernel (est.kernels' order): its launches' estimated and measured time; empty
    when the GPU's launches are not the counted ones."""
    if not paired(est.counts, m):
        return []
    meas: dict[str, float] = {}
    for lt in m.launches:
        meas[lt.kernel] = meas.get(lt.kernel, 0.0) + lt.median_s
    return [KernelError(k.kernel, k.launches, k.seconds, meas[k.kernel]) for k in est.kernels]
