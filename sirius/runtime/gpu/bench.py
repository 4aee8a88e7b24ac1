"""Time a program on the GPU four ways: (a) the original launches, (b) the original captured
once as a CUDA Graph and replayed, (c) the fused program, (d) the fused program as a CUDA Graph.

What is timed. Each program first runs once per input set through the host-program interpreter
on the GPU (real launches, real results) while a `Recorder` keeps its device work: every
launch (arguments packed), device-to-device copy, memset and sync, host loops unrolled, in
program order, with that set's buffer addresses. A timed run replays that step on one stream
between two CUDA events: the whole host program's device work, not one kernel. Allocations
and host<->device copies happen in the set-up run only (they are the same in both programs,
and copies from pageable host memory cannot be captured in a graph); the syncs of the host
program are replayed in (a) and (c) and left out of the graphs.

Method. `input_sets` copies of every buffer, filled from seeds seed, seed+1, ... (explicit
inputs in every set), rotated between runs; before every timed run a memset of a buffer twice
the size of L2 (at least 8 MiB) evicts what the previous run left there; `warmup` untimed runs,
then `runs` timed ones, the four modes interleaved run by run so that clock and temperature
drift spread over all of them; median, p10, p90, mean, min and max in microseconds; ratios of
medians. The eager modes (a, c) include Python's cost of issuing each launch through pycuda (a
few microseconds per launch), which a C++ host would pay too, in part; the graph modes do not.

Per launch (`per_launch`, what `sirius tune` uses): the eager replay records a CUDA event after
every operation of the step, so each launch is timed between the event before it and the one
after it, in the same runs as the whole step (which is then the span from the first event to
the last). A launch's time so includes the time the GPU waited for it to be issued.

CUDA Graphs: pycuda (2026.1) has no stream capture, so capture and replay go through
cuda-python's driver bindings (`cuda.bindings.driver`: cuStreamBeginCapture, cuStreamEndCapture,
cuGraphInstantiate, cuGraphLaunch) on the pycuda stream; the launches captured are pycuda's
(pycuda_driver.py). The result says which API captured them (`graph_api`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sirius.runtime.device import LaunchStats, Module
from sirius.runtime.gpu.device import GpuDevice
from sirius.runtime.gpu.driver import GpuError

SCHEMA = "sirius-bench/1"
MODES = ("original", "original_graph", "fused", "fused_graph")
TIMED = ("the device work of the whole host program (every launch, device-to-device copy and "
         "memset, host loops unrolled, in program order) between two CUDA events on one "
         "stream; allocations and host<->device copies are done once per input set, untimed")


@dataclass(frozen=True)
class BenchProgram:
    """One side of the comparison: a host program and its device module (IR or PTX)."""

    host: object  # HostProgram
    program: object  # anything GpuDevice.load_module takes
    kernels: tuple = ()  # KernelInfo facts (dtypes); a carried program gives `dtypes` instead
    dtypes: dict | None = None
    inputs: dict | None = None


@dataclass(frozen=True)
class BenchConfig:
    runs: int = 100
    warmup: int = 10
    input_sets: int = 4
    seed: int = 7
    flush_l2: bool = True
    graphs: bool = True
    opaque_trips: int = 3
    per_launch: bool = False  # an event after every operation of the eager replays

    def __post_init__(self) -> None:
        if self.runs < 1 or self.warmup < 0 or self.input_sets < 1:
            raise GpuError(f"bench: runs ({self.runs}) and input sets ({self.input_sets}) must "
                           f"be at least 1 and warm-up runs ({self.warmup}) at least 0")


def summarize(samples_us) -> dict[str, float]:
    """median, p10, p90 (linear interpolation between order statistics), mean, min, max."""
    a = np.asarray(samples_us, dtype=np.float64)
    p10, med, p90 = np.percentile(a, [10, 50, 90])
    return {"median_us": float(med), "p10_us": float(p10), "p90_us": float(p90),
            "mean_us": float(a.mean()), "min_us": float(a.min()), "max_us": float(a.max()),
            "runs": int(a.size)}


class Recorder:
    """The Device the interpreter runs on while a step is recorded: everything goes to the GPU
    device; launches, device copies, memsets and syncs are also kept; frees wait for the end
    of the bench."""

    name = "gpu"
    trace = False

    def __init__(self, device: GpuDevice, modules: dict[int, Module]):
        self.dev = device
        self.modules = modules  # one loaded module per program, shared by all input sets
        self.ops: list[tuple] = []
        self.allocated: list[int] = []  # freed when the bench ends, whatever the program did

    def alloc(self, nbytes: int, label: str = "") -> int:
        self.allocated.append(self.dev.alloc(nbytes, label))
        return self.allocated[-1]

    def free(self, address: int) -> None:
        pass  # a replay of the step uses it again: freed when the bench ends

    def copy_to_device(self, address: int, data: np.ndarray) -> None:
        self.dev.copy_to_device(address, data)

    def copy_from_device(self, address: int, nbytes: int) -> np.ndarray:
        return self.dev.copy_from_device(address, nbytes)

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        self.dev.copy_device(dst, src, nbytes)
        self.ops.append(("copy", dst, src, nbytes))

    # copies to and from device variables are set-up work, as host<->device copies are
    def copy_to_symbol(self, module: Module, name: str, offset: int, data: np.ndarray) -> None:
        self.dev.copy_to_symbol(module, name, offset, data)

    def copy_from_symbol(self, module: Module, name: str, offset: int,
                         nbytes: int) -> np.ndarray:
        return self.dev.copy_from_symbol(module, name, offset, nbytes)

    def memset(self, address: int, value: int, nbytes: int) -> None:
        self.dev.memset(address, value, nbytes)
        self.ops.append(("memset", address, value, nbytes))

    def synchronize(self) -> None:
        self.dev.synchronize()
        self.ops.append(("sync",))

    def timer(self) -> float:
        return self.dev.timer()

    def load_module(self, program, data_bytes: int | None = None) -> Module:
        if id(program) not in self.modules:
            self.modules[id(program)] = self.dev.load_module(program, data_bytes)
        return self.modules[id(program)]

    def launch(self, module: Module, kernel: str, grid, block, smem: int, args: list,
               loc=None, name: str | None = None) -> LaunchStats:
        p = self.dev.prepare(module, kernel, grid, block, smem, args, loc, name)
        self.dev.submit(p)
        self.ops.append(("launch", p))
        return LaunchStats(p.kernel, p.grid, p.block, smem, 0, 0, 0, 0, 0, 0, 0.0, "gpu")


def replay(device: GpuDevice, ops: list[tuple], stream: object, capturing: bool = False,
           events: list | None = None) -> None:
    """Issue a recorded step on `stream` (syncs wait for the stream, except in a capture);
    with `events` (one more than `ops`), events[0] is recorded first and events[i + 1] after
    ops[i]."""
    drv = device.driver
    if events is not None:
        drv.record(events[0], stream)
    for i, op in enumerate(ops):
        _issue_op(device, op, stream, capturing)
        if events is not None:
            drv.record(events[i + 1], stream)


def _issue_op(device: GpuDevice, op: tuple, stream: object, capturing: bool) -> None:
    drv = device.driver
    kind = op[0]
    if kind == "launch":
        device.submit(op[1], stream)
    elif kind == "memset":
        drv.memset_d8(op[1], op[2], op[3], stream)
    elif kind == "copy":
        drv.dtod(op[1], op[2], op[3], stream)
    elif not capturing:
        drv.stream_synchronize(stream)


@dataclass
class BenchResult:
    device: dict
    config: BenchConfig
    input_sets: int
    flush_bytes: int
    programs: dict[str, dict]
    timings: dict[str, dict]
    graph_api: str
    notes: list[str] = field(default_factory=list)
    runs: dict = field(default_factory=dict, repr=False)  # side -> RunResult of input set 0
    launches: dict[str, list[dict]] = field(default_factory=dict)  # side -> per-launch stats

    @property
    def ratios(self) -> dict[str, float]:
        """Speed-ups: the first mode's median over the second's (> 1: the second is faster)."""
        med = {m: t["median_us"] for m, t in self.timings.items()}
        pairs = {"speedup_fused_vs_original": ("original", "fused"),
                 "speedup_fused_graph_vs_original_graph": ("original_graph", "fused_graph"),
                 "speedup_fused_vs_original_graph": ("original_graph", "fused"),
                 "speedup_fused_graph_vs_original": ("original", "fused_graph"),
                 "speedup_original_graph_vs_original": ("original", "original_graph")}
        return {k: med[a] / med[b] for k, (a, b) in pairs.items()
                if a in med and b in med and med[b] > 0}

    def to_json(self) -> dict:
        c = self.config
        return {"schema": SCHEMA, "device": self.device, "timed": TIMED,
                "config": {"runs": c.runs, "warmup": c.warmup, "input_sets": self.input_sets,
                           "seed": c.seed, "flush_l2_bytes": self.flush_bytes,
                           "graphs": c.graphs, "per_launch": c.per_launch},
                "graph_api": self.graph_api, "programs": self.programs,
                "timings": self.timings, "ratios": self.ratios, "notes": self.notes,
                **({"launch_timings": self.launches} if self.launches else {})}


def _step_counts(ops: list[tuple]) -> dict[str, int]:
    kinds = [op[0] for op in ops]
    return {"launches": kinds.count("launch"), "memsets": kinds.count("memset"),
            "device_copies": kinds.count("copy"), "syncs": kinds.count("sync"),
            "cooperative_launches": sum(1 for op in ops
                                        if op[0] == "launch" and op[1].cooperative)}


def _sets(device: GpuDevice, sides: dict[str, BenchProgram], wanted: int,
          notes: list[str]) -> int:
    """Input sets that fit: all sets of both programs in half the free memory."""
    per_set = sum(sum(b.bytes for b in s.host.buffers) for s in sides.values())
    free = device.driver.mem_free_bytes()
    fit = max(1, int(free * 0.5 // max(1, per_set)))
    if fit < wanted:
        notes.append(f"{fit} input set(s) instead of {wanted}: one set of both programs takes "
                     f"{per_set:,} bytes and {free:,} are free")
    return min(wanted, fit)


def bench(sides: dict[str, BenchProgram], config: BenchConfig | None = None,
          device: GpuDevice | None = None,
          progress: Callable[[str], None] | None = None) -> BenchResult:
    """Time `sides["original"]` and `sides["fused"]` eagerly and as CUDA graphs (module doc)."""
    from sirius.runtime.gpu import run_on_gpu

    config = config or BenchConfig()
    device = device or GpuDevice(time_launches=False)
    say = progress or (lambda _m: None)
    drv = device.driver
    notes: list[str] = []
    sets = _sets(device, sides, config.input_sets, notes)
    steps: dict[str, list[list[tuple]]] = {}
    allocated: list[int] = []
    runs = {}
    for side, bp in sides.items():
        modules: dict[int, Module] = {}
        steps[side] = []
        for r in range(sets):
            say(f"{side}: set-up run for input set {r + 1} of {sets}")
            rec = Recorder(device, modules)
            res = run_on_gpu(bp.host, bp.program, bp.kernels, device=rec, seed=config.seed + r,
                             inputs=bp.inputs, opaque_trips=config.opaque_trips,
                             dtypes=bp.dtypes)
            steps[side].append(rec.ops)
            allocated += rec.allocated
            if r == 0:
                runs[side] = res
    device.synchronize()
    stream = drv.stream()
    graphs: dict[str, list] = {}
    graph_api = ""
    if config.graphs:
        try:
            for side in sides:
                say(f"{side}: capturing {sets} CUDA graph(s)")
                graphs[side] = []
                for ops in steps[side]:
                    drv.begin_capture(stream)
                    replay(device, ops, stream, capturing=True)
                    graphs[side].append(drv.end_capture(stream))
            graph_api = drv.graph_api
        except GpuError as e:
            notes.append(f"no CUDA-graph timings: {e.message}")
            try:  # a capture that failed half-way leaves the stream capturing: end it
                drv.end_capture(stream)
            except GpuError:
                pass
            for gs in graphs.values():
                for g in gs:
                    drv.graph_free(g)
            graphs = {}
            stream = drv.stream()
    flush = max(2 * device.info.l2_bytes, 8 << 20) if config.flush_l2 else 0
    flush_buf = device.alloc(flush, "l2-flush") if flush else 0
    modes: list[tuple[str, Callable[[int], None]]] = []
    for side in sides:
        modes.append((side, lambda r, s=side: replay(device, steps[s][r], stream)))
        if side in graphs:
            modes.append((f"{side}_graph",
                          lambda r, s=side: drv.graph_launch(graphs[s][r], stream)))
    samples: dict[str, list[float]] = {m: [] for m, _ in modes}
    start, end = drv.event(), drv.event()
    per_op = _per_launch_events(drv, steps, notes) if config.per_launch else {}
    launch_samples = {side: {j: [] for j in _launch_positions(steps[side][0])}
                      for side in per_op}
    say(f"timing {', '.join(samples)}: {config.warmup} warm-up and {config.runs} timed runs "
        "each, interleaved" + (", an event after every operation of the eager runs"
                               if per_op else ""))
    for i in range(config.warmup + config.runs):
        r = i % sets
        for mode, issue in modes:
            if flush:
                drv.memset_d8(flush_buf, i & 0xFF, flush, stream)
            evs = per_op.get(mode)
            if evs is None:
                drv.record(start, stream)
                issue(r)
                drv.record(end, stream)
                ms = drv.elapsed_ms(start, end)
            else:
                ops = steps[mode][r]
                replay(device, ops, stream, events=evs)
                ms = drv.elapsed_ms(evs[0], evs[len(ops)])
                if i >= config.warmup:
                    for j, got in launch_samples[mode].items():
                        got.append(drv.elapsed_ms(evs[j], evs[j + 1]) * 1e3)
            if i >= config.warmup:
                samples[mode].append(ms * 1e3)
    for gs in graphs.values():
        for g in gs:
            drv.graph_free(g)
    if flush:
        device.free(flush_buf)
    for a in allocated:
        device.free(a)
    timings = {m: {**summarize(s), "samples_us": [round(x, 3) for x in s]}
               for m, s in samples.items()}
    programs = {side: _step_counts(steps[side][0]) for side in sides}
    launches = {side: [{"index": n, "kernel": steps[side][0][j][1].kernel,
                        "grid": list(steps[side][0][j][1].grid),
                        "block": list(steps[side][0][j][1].block), **summarize(got)}
                       for n, (j, got) in enumerate(per.items())]
                for side, per in launch_samples.items()}
    return BenchResult(device.info.to_json(), config, sets, flush, programs, timings,
                       graph_api, notes, runs, launches)


def _launch_positions(ops: list[tuple]) -> list[int]:
    return [j for j, op in enumerate(ops) if op[0] == "launch"]


def _per_launch_events(drv, steps: dict[str, list[list[tuple]]], notes: list[str]) -> dict:
    """One event per operation (+ 1) for each side whose input sets replay the same operations
    (launches: kernel, grid, block) in the same order; a note for a side that does not."""
    out = {}
    for side, sets in steps.items():
        keys = [[(op[1].kernel, op[1].grid, op[1].block) if op[0] == "launch" else op[0]
                 for op in ops] for ops in sets]
        if any(k != keys[0] for k in keys[1:]):
            notes.append(f"{side}: no per-launch times: its input sets issue different "
                         "operations")
            continue
        n = max(len(ops) for ops in sets)
        out[side] = [drv.event() for _ in range(n + 1)]
    return out
