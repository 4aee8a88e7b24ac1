"""The explainable cost model: an *estimate* of each launch's time on a GPU of the table.

    time = launch overhead + max(DRAM time, compute time, issue time)

    DRAM time    = DRAM bytes / bandwidth            x slowdown(DRAM warps)
    compute time = sum over precisions p of FLOPs_p / peak_p   x slowdown(issue warps)
    issue time   = instructions x SASS-per-IR / (issue rate x issue-rate factor)
                                                     x slowdown(issue warps)

Inputs and how executor counts become them (sirius/tune/counts.py measures them):

- *instructions*: the CPU executor's exact dynamic count of LLVM IR instructions over all
  threads. LLVM IR instructions are not SASS instructions: the model multiplies by
  `Assumptions.sass_per_ir` (1.0 by default: an estimate; address arithmetic folds into SASS
  addressing modes while libdevice calls, counted as one instruction, expand to many). Issue
  rate = SMs x 4 schedulers x 32 lanes x clock (one warp instruction per scheduler per clock).
- *DRAM bytes*: the executor's global load + store bytes are an upper bound on DRAM traffic (a
  value loaded by several blocks, a matmul tile, is counted each time). The only cache model:
  when the launch's footprint (distinct bytes loaded plus distinct bytes stored: from an
  executor trace when the program is small, else bounded by twice the sizes of the buffers the
  launch receives) fits in the GPU's L2, the footprint is charged instead (each byte comes from
  DRAM once and is written back once); otherwise the upper bound. Reuse across launches through
  L2 is not modelled (which favours fusion), nor is L1.
- *FLOPs*: exact dynamic counts of floating-point arithmetic per precision (an FMA is 2, a
  vector operation counts its lanes, a libdevice math call counts 1), against the table's
  non-tensor peaks (tensor-core instructions are not counted).
- *occupancy*: blocks per SM from the block size, ptxas registers and shared memory (static
  from ptxas + dynamic from the launch + the per-block reservation) against the GPU's per-SM
  limits (`occupancy`).
- *waves and tail*: the grid's blocks fill SMs x blocks-per-SM slots per wave; a wave whose SMs
  hold fewer warps than a term needs runs that term proportionally slower, and a partial wave
  uses only some SMs (`Waves.slowdown`). A term's rate reaches its peak with at least
  `issue_warps_per_sm` resident warps per SM (instructions, FLOPs: 4 per scheduler to cover the
  ~4-cycle dependent-issue latency) or `dram_warp_fraction` of the SM's warp slots (DRAM), and
  scales linearly below that. Both are assumptions, stated in every report.

A *megakernel* launch (`--megakernel grid|counters`) is estimated per segment: each segment's
DRAM, compute and issue terms (its own counts; the launch's charged DRAM bytes shared out in
proportion to its executor bytes) with the launch's occupancy and the waves of the blocks and
threads that segment gives work to (a segment of members of 8 blocks of 128 threads keeps 8
blocks of 4 warps busy, however large the megakernel's grid and block: `Segment.blocks`,
`Segment.threads`), the segments' largest
terms added up (they run one after another), plus `grid_sync_us` per grid barrier or `wait_us`
per dependence wait between two segments: both assumptions, stated in the estimate's notes.

Launch overhead, DRAM bandwidth and the issue-rate factor (1.0 by default) can be fitted to GPU
measurements (calibrate.py, `--calibrate`).

Every `Estimate` keeps its terms and names the bound: the largest of launch overhead, DRAM,
compute and issue, with its share of the total.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sirius.tune.gpus import Gpu

TERMS = ("launch", "dram", "compute", "issue", "sync")
TERM_NAMES = {"launch": "launch overhead", "dram": "DRAM bandwidth", "compute": "compute (FLOPs)",
              "issue": "instruction issue", "sync": "megakernel barriers/waits"}


@dataclass(frozen=True, slots=True)
class Assumptions:
    """The model's constants that no datasheet gives (docs/tune.md). `issue_rate_factor` is
    the achieved fraction of the table's issue rate: 1.0 unless calibrated (calibrate.py)."""

    sass_per_ir: float = 1.0
    issue_warps_per_sm: int = 16
    dram_warp_fraction: float = 0.5
    issue_rate_factor: float = 1.0
    # a megakernel's synchronisation between two segments, us: a grid barrier (every block's
    # arrival at a device-scope atomic counter, then the release), and a dependence wait (a
    # flag written with a release store, seen by an acquire load). Both fitted on one H200
    # (2026-11-29: 42 CUDA-graph replays, 8 of them megakernels; BENCHMARKS.md "The cost
    # model calibrated on the H200's per-launch times", docs/measurements/h200-2026-11-29).
    # The wait was fitted on the wait helper before its per-block index, so it is an upper
    # bound for the helper now; the assumptions before any measurement were 2 and 1 us, and
    # ranked `counters` megakernels first where the H200 ran plain fusion faster.
    grid_sync_us: float = 2.62
    wait_us: float = 4.74

    def to_json(self) -> dict:
        return {"sass_per_ir": self.sass_per_ir, "issue_warps_per_sm": self.issue_warps_per_sm,
                "dram_warp_fraction": self.dram_warp_fraction,
                "issue_rate_factor": self.issue_rate_factor,
                "grid_sync_us": self.grid_sync_us, "wait_us": self.wait_us}


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment of a megakernel launch: what runs between two grid barriers (or, with
    counters, between two waits of a block), summed over the grid."""

    instructions: int
    dram_bytes: int                  # global loads + stores
    flops: tuple[tuple[str, int], ...] = ()
    # the blocks of the megakernel's grid that get work in this segment: its members run over
    # their own blocks from block 0 (a block-stride loop past the grid), so at most the most
    # blocks one member needs; None: unknown, the whole grid
    blocks: int | None = None
    # the threads of a block that work in this segment: a member runs on its own block size
    # (the others of the megakernel's block skip it), so at most the largest member's; None:
    # unknown, the whole block
    threads: int | None = None

    def to_json(self) -> dict:
        return {"instructions": self.instructions, "dram_bytes": self.dram_bytes,
                "flops": dict(self.flops),
                **({"blocks": self.blocks} if self.blocks is not None else {}),
                **({"threads": self.threads} if self.threads is not None else {})}


@dataclass(frozen=True, slots=True)
class LaunchCounts:
    """One dynamic launch as the model sees it: executor counts plus ptxas resources."""

    kernel: str                      # source name (fused kernels: sirius_v0, ...)
    mangled: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    instructions: int                # dynamic LLVM IR instructions, all threads
    dram_bytes: int                  # global loads + stores (upper bound on DRAM traffic)
    flops: tuple[tuple[str, int], ...]  # (precision, FLOPs)
    registers: int | None            # ptxas, per thread
    static_smem: int                 # ptxas, bytes
    shared_bytes: int = 0            # informational
    barriers: int = 0
    region: int = -1                 # planner region of the launch (-1: not attributed)
    footprint: int | None = None     # distinct global bytes loaded + stored, or a bound of it
    footprint_exact: bool = False    # True: from an executor trace; False: buffer-size bound
    sync: str = ""                   # a megakernel: "grid" or "counters"
    segments: tuple[Segment, ...] = ()  # a megakernel: per segment, in order
    prepare: bool = False            # in the one-time prepare part (fusion/plan/prepare.py)
    iterations: int = 1              # a megakernel with a device loop: its segments run so often

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def total_flops(self) -> int:
        return sum(n for _, n in self.flops)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "mangled": self.mangled, "grid": list(self.grid),
                "block": list(self.block), "dynamic_smem": self.dynamic_smem,
                "instructions": self.instructions, "dram_bytes": self.dram_bytes,
                "flops": dict(self.flops), "registers": self.registers,
                "static_smem": self.static_smem, "shared_bytes": self.shared_bytes,
                "barriers": self.barriers, "region": self.region,
                "footprint": self.footprint, "footprint_exact": self.footprint_exact,
                **({"sync": self.sync, "segments": [g.to_json() for g in self.segments]}
                   if self.segments else {}),
                **({"prepare": True} if self.prepare else {})}

    @classmethod
    def from_json(cls, d: object, where: str) -> LaunchCounts:
        """The inverse of `to_json`; a SiriusError naming `where` and the field when `d` is
        not one (kernel, grid, block, instructions and dram_bytes are required)."""
        from sirius.diagnostics import SiriusError

        def bad(what: str) -> SiriusError:
            return SiriusError(f"{where}: {what}")

        if not isinstance(d, dict):
            raise bad(f"a launch's counts must be an object, not {type(d).__name__}")
        for k in ("kernel", "grid", "block", "instructions", "dram_bytes"):
            if k not in d:
                raise bad(f"missing '{k}' (the fields of tune.json's launch_estimates[].counts)")

        def count(k: str, default: int | None = 0) -> int | None:
            v = d.get(k, default)
            if v is None and default is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise bad(f"'{k}' must be a non-negative integer, not {v!r}")
            return v

        def dim3(k: str) -> tuple[int, int, int]:
            v = d[k]
            if not (isinstance(v, list) and len(v) == 3 and all(
                    isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)):
                raise bad(f"'{k}' must be a list of 3 positive integers, not {v!r}")
            return (v[0], v[1], v[2])

        if not isinstance(d["kernel"], str) or not d["kernel"]:
            raise bad(f"'kernel' must be a kernel name, not {d['kernel']!r}")
        flops = d.get("flops", {})
        if not isinstance(flops, dict) or any(
                p not in ("f16", "f32", "f64") or isinstance(n, bool) or not isinstance(n, int)
                or n < 0 for p, n in flops.items()):
            raise bad(f"'flops' must map f16/f32/f64 to non-negative integers, not {flops!r}")
        return cls(d["kernel"], str(d.get("mangled", d["kernel"])), dim3("grid"), dim3("block"),
                   count("dynamic_smem"), count("instructions"), count("dram_bytes"),
                   tuple(sorted(flops.items())), count("registers", None),
                   count("static_smem"), count("shared_bytes"), count("barriers"),
                   int(d.get("region", -1)) if isinstance(d.get("region", -1), int) else -1,
                   count("footprint", None), bool(d.get("footprint_exact", False)),
                   str(d.get("sync", "")), _segments(d.get("segments", []), bad))


def _segments(v: object, bad) -> tuple[Segment, ...]:
    if not isinstance(v, list) or not all(
            isinstance(g, dict) and isinstance(g.get("instructions"), int)
            and isinstance(g.get("dram_bytes"), int) and isinstance(g.get("flops", {}), dict)
            and all(isinstance(g.get(k, 1), int) and g.get(k, 1) > 0
                    for k in ("blocks", "threads"))
            for g in v):
        raise bad("'segments' must be a list of objects with instructions, dram_bytes, "
                  "flops and optionally blocks and threads (> 0)")
    return tuple(Segment(g["instructions"], g["dram_bytes"],
                         tuple(sorted(g.get("flops", {}).items())), g.get("blocks"),
                         g.get("threads"))
                 for g in v)


# occupancy ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Occupancy:
    """Resident blocks per SM and what limits them (CUDA occupancy rules)."""

    warps_per_block: int
    blocks_per_sm: int
    limiter: str                      # threads | blocks | registers | shared memory
    limits: tuple[tuple[str, int], ...]  # blocks per SM allowed by each resource
    max_warps_per_sm: int

    @property
    def warps_per_sm(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm

    def to_json(self) -> dict:
        return {"warps_per_block": self.warps_per_block, "blocks_per_sm": self.blocks_per_sm,
                "limiter": self.limiter, "limits": dict(self.limits),
                "occupancy": round(self.fraction, 4)}


def occupancy(gpu: Gpu, threads: int, registers: int | None, smem: int) -> Occupancy:
    """Blocks of `threads` threads using `registers` per thread and `smem` bytes of shared
    memory (static + dynamic) that fit on one SM. Registers: per warp, rounded up to the
    allocation unit, out of each of the 4 scheduler partitions' quarter of the register file;
    shared memory: the per-block reservation added."""
    warps = max(1, -(-threads // gpu.warp_size))
    limits = {"threads": gpu.max_threads_per_sm // (warps * gpu.warp_size),
              "blocks": gpu.max_blocks_per_sm}
    if registers:
        per_warp = -(-registers * gpu.warp_size // gpu.register_alloc_unit) \
            * gpu.register_alloc_unit
        parts = gpu.schedulers_per_sm
        warps_by_regs = (gpu.registers_per_sm // parts) // per_warp * parts
        limits["registers"] = warps_by_regs // warps
    if smem:
        per_block = smem + gpu.smem_reserved_per_block
        limits["shared memory"] = gpu.smem_per_sm // per_block \
            if smem <= gpu.smem_per_block else 0
    limiter = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    return Occupancy(warps, max(0, limits[limiter]), limiter, tuple(limits.items()),
                     gpu.max_warps_per_sm)


# waves ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Waves:
    """How a grid's blocks fill the GPU: full waves of SMs x blocks-per-SM, then a tail."""

    blocks: int
    sms: int
    blocks_per_sm: int
    warps_per_block: int

    @property
    def slots(self) -> int:
        return self.sms * self.blocks_per_sm

    @property
    def full(self) -> int:
        return self.blocks // self.slots

    @property
    def tail(self) -> int:
        return self.blocks - self.full * self.slots

    @property
    def count(self) -> int:
        return self.full + (1 if self.tail else 0)

    def slowdown(self, saturating_warps: float) -> float:
        """Time of a term relative to the GPU's peak rate for it: each wave's share of the
        blocks divided by the fraction of the peak that wave reaches (SMs used x min(1,
        resident warps per SM / warps needed for the peak))."""
        def rate(sms_used: int, warps_per_sm: float) -> float:
            return sms_used / self.sms * min(1.0, warps_per_sm / saturating_warps)

        out = 0.0
        if self.full:
            share = self.full * self.slots / self.blocks
            out += share / rate(self.sms, self.blocks_per_sm * self.warps_per_block)
        if self.tail:
            used = min(self.sms, self.tail)
            out += (self.tail / self.blocks) / rate(used, self.tail / used * self.warps_per_block)
        return out

    def describe(self) -> str:
        if self.count == 1 and self.tail:
            used = min(self.sms, self.tail)
            return f"1 partial wave ({self.blocks} blocks on {used} of {self.sms} SMs)"
        tail = f" + a tail of {self.tail} blocks" if self.tail else ""
        return f"{self.full} full wave(s) of {self.slots} blocks{tail}"


# estimates --------------------------------------------------------------------------------------
def fmt_time(seconds: float) -> str:
    if math.isinf(seconds):
        return "inf"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


@dataclass(frozen=True, slots=True)
class Estimate:
    """The estimated time of one launch with its terms (seconds)."""

    kernel: str
    launch: float
    dram: float
    compute: float
    issue: float
    occupancy: Occupancy | None
    waves: Waves | None
    notes: tuple[str, ...] = ()
    dram_bytes: int = 0  # the bytes the DRAM term charged (footprint or executor bytes)
    sync: float = 0.0  # a megakernel: its grid barriers or dependence waits
    serial: float | None = None  # a megakernel: the sum over its segments of each one's bound
    # a megakernel: each segment's (DRAM, compute, issue) terms, in order (calibrate.py fits
    # them segment by segment, as `serial` adds them)
    segments: tuple[tuple[float, float, float], ...] = ()

    @property
    def body(self) -> float:
        return self.serial if self.serial is not None else max(self.dram, self.compute,
                                                               self.issue)

    @property
    def seconds(self) -> float:
        return self.launch + self.body + self.sync

    @property
    def body_bound(self) -> str:
        return max(("dram", "compute", "issue"), key=lambda t: getattr(self, t))

    @property
    def bound(self) -> str:
        """The largest term: launch, dram, compute or issue."""
        return max(TERMS, key=lambda t: getattr(self, t))

    def terms(self) -> dict[str, float]:
        return {t: getattr(self, t) for t in TERMS}

    def explain(self) -> str:
        """One line: the bound and its share, the other terms, occupancy and waves."""
        if math.isinf(self.seconds):
            return f"{self.kernel}: cannot run ({'; '.join(self.notes)}) [estimate]"
        b = self.bound
        head = (f"{b.upper() if b == 'dram' else b}-bound: {fmt_time(getattr(self, b))} of "
                f"{fmt_time(self.seconds)}")
        rest = [f"{'DRAM' if t == 'dram' else t} {fmt_time(getattr(self, t))}"
                for t in TERMS if t != b and (t != "sync" or self.serial is not None)]
        if b == "launch":
            rest.append(f"body {self.body_bound.replace('dram', 'DRAM')}-bound")
        tail = []
        if self.occupancy is not None:
            o = self.occupancy
            tail.append(f"occupancy {o.fraction:.0%} ({o.blocks_per_sm} blocks of "
                        f"{o.warps_per_block} warps per SM, limited by {o.limiter})")
        if self.waves is not None:
            tail.append(self.waves.describe())
        return f"{head}; " + "; ".join(rest + tail) + " [estimate]"

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "estimate": True, "seconds": _num(self.seconds),
                "terms": {t: _num(v) for t, v in self.terms().items()}, "bound": self.bound,
                "body_bound": self.body_bound,
                "occupancy": self.occupancy.to_json() if self.occupancy else None,
                "waves": None if self.waves is None else
                {"count": self.waves.count, "full": self.waves.full, "tail": self.waves.tail,
                 "slots": self.waves.slots},
                "dram_bytes_charged": self.dram_bytes, "explain": self.explain(),
                "notes": list(self.notes)}


def _num(v: float) -> float | str:
    return "inf" if math.isinf(v) else v


def estimate(c: LaunchCounts, gpu: Gpu, a: Assumptions = Assumptions()) -> Estimate:
    """The estimate of one launch on `gpu`."""
    notes = []
    if c.registers is None:
        notes.append("no ptxas registers for this kernel: occupancy from threads and shared "
                     "memory only")
    occ = occupancy(gpu, c.threads, c.registers, c.static_smem + c.dynamic_smem)
    if occ.blocks_per_sm == 0:
        notes.append(f"a block does not fit on an SM ({occ.limiter})")
        return Estimate(c.kernel, gpu.launch_us * 1e-6, math.inf, math.inf, math.inf, occ, None,
                        tuple(notes), c.dram_bytes)
    w = Waves(max(1, c.blocks), gpu.sms, occ.blocks_per_sm, occ.warps_per_block)
    issue_slow = w.slowdown(a.issue_warps_per_sm)
    dram_slow = w.slowdown(max(1.0, a.dram_warp_fraction * gpu.max_warps_per_sm))
    whole = issue_slow, dram_slow
    dram_bytes = c.dram_bytes
    if c.footprint is not None and c.footprint <= gpu.l2_bytes:
        dram_bytes = min(c.dram_bytes, c.footprint)
    else:
        notes.append("DRAM bytes: executor global bytes (an upper bound: the footprint does "
                     "not fit in L2 or is unknown)")

    def terms(instructions: int, nbytes: float, flops,
              slow: tuple[float, float]) -> tuple[float, float, float]:
        issue_slow, dram_slow = slow
        return (nbytes / gpu.dram_bytes_per_s * dram_slow,
                sum(n / gpu.flops_per_s(p) for p, n in flops) * issue_slow,
                instructions * a.sass_per_ir / (gpu.issue_rate * a.issue_rate_factor)
                * issue_slow)

    if c.segments:  # a megakernel: its segments one after another, a sync between two
        total = max(1, sum(g.dram_bytes for g in c.segments))
        per = []
        for g in c.segments:
            active = max(1, c.blocks) if g.blocks is None else max(1, min(c.blocks, g.blocks))
            warps = occ.warps_per_block if g.threads is None else \
                max(1, min(occ.warps_per_block, -(-g.threads // gpu.warp_size)))
            slow = whole
            if active != max(1, c.blocks) or warps != occ.warps_per_block:
                # this segment's waves and warps, not the whole grid's and block's
                sw = Waves(active, gpu.sms, occ.blocks_per_sm, warps)
                slow = (sw.slowdown(a.issue_warps_per_sm),
                        sw.slowdown(max(1.0, a.dram_warp_fraction * gpu.max_warps_per_sm)))
            per.append(terms(g.instructions, dram_bytes * g.dram_bytes / total, g.flops,
                             slow))
        each = a.grid_sync_us if c.sync == "grid" else a.wait_us
        n = len(c.segments)
        syncs = segment_syncs(c)
        loop = f" in a device loop of {c.iterations} iterations" if c.iterations > 1 else ""
        notes.append(f"megakernel ({c.sync}): {n} segments{loop}, each bound by its own "
                     f"largest term, one after another; {syncs} x {each} us of "
                     f"{'grid barriers' if c.sync == 'grid' else 'dependence waits'}"
                     " (an assumption; overlap between independent segments is not "
                     "counted)")
        dram, compute, issue = (sum(x[i] for x in per) for i in range(3))
        return Estimate(c.kernel, gpu.launch_us * 1e-6, dram, compute, issue, occ, w,
                        tuple(notes), dram_bytes, syncs * each * 1e-6,
                        sum(max(x) for x in per), tuple(per))
    dram, compute, issue = terms(c.instructions, dram_bytes, c.flops, whole)
    return Estimate(c.kernel, gpu.launch_us * 1e-6, dram, compute, issue, occ, w, tuple(notes),
                    dram_bytes)


def segment_syncs(c: LaunchCounts) -> int:
    """A megakernel launch's grid barriers (`grid`) or dependence waits (`counters`): one
    between every two segment runs, in a device loop across iterations too (0 for a plain
    launch)."""
    return len(c.segments) * c.iterations - 1 if c.segments else 0


# a whole program --------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelSummary:
    """Every dynamic launch of one kernel, summed."""

    kernel: str
    launches: int
    seconds: float
    terms: dict[str, float]
    instructions: int
    dram_bytes: int
    flops: int
    explain: str  # the first launch's explanation
    dram_bytes_charged: int = 0

    @property
    def bound(self) -> str:
        return max(TERMS, key=lambda t: self.terms[t])


@dataclass(frozen=True)
class ProgramEstimate:
    gpu: str
    launches: tuple[Estimate, ...]
    counts: tuple[LaunchCounts, ...]
    kernels: tuple[KernelSummary, ...] = field(default=())

    @property
    def seconds(self) -> float:
        return sum(e.seconds for e in self.launches)

    @property
    def prepare_seconds(self) -> float:
        """The part of `seconds` in the one-time prepare part (launches that compute only from
        the parameters); the rest runs per inference."""
        return sum(e.seconds for e, c in zip(self.launches, self.counts, strict=True)
                   if c.prepare)

    def terms(self) -> dict[str, float]:
        return {t: sum(getattr(e, t) for e in self.launches) for t in TERMS}

    def bound_shares(self) -> dict[str, tuple[int, float]]:
        """Per term: how many launches it bounds and their share of the program's estimated
        time (each launch's whole time counted against its bound). Empty when a launch
        cannot run (infinite time)."""
        total = self.seconds
        if not self.launches or math.isinf(total) or total <= 0:
            return {}
        out = {t: (0, 0.0) for t in TERMS}
        for e in self.launches:
            n, s = out[e.bound]
            out[e.bound] = (n + 1, s + e.seconds)
        return {t: (n, s / total) for t, (n, s) in out.items() if n}

    @property
    def bound(self) -> str | None:
        """The term that bounds the launches taking most of the estimated time."""
        shares = self.bound_shares()
        return max(shares, key=lambda t: shares[t][1]) if shares else None

    def to_json(self) -> dict:
        shares = self.bound_shares()
        return {"gpu": self.gpu, "estimate": True, "seconds": _num(self.seconds),
                "prepare_seconds": _num(self.prepare_seconds),
                "prepare_launches": sum(c.prepare for c in self.counts),
                "launches": len(self.launches), "bound": self.bound,
                "bound_shares": {t: {"launches": n, "share": round(f, 4)}
                                 for t, (n, f) in shares.items()},
                "terms": {t: _num(v) for t, v in self.terms().items()},
                "instructions": sum(c.instructions for c in self.counts),
                "dram_bytes": sum(c.dram_bytes for c in self.counts),
                "flops": sum(c.total_flops for c in self.counts),
                "kernels": [{"kernel": k.kernel, "launches": k.launches,
                             "seconds": _num(k.seconds),
                             "terms": {t: _num(v) for t, v in k.terms.items()},
                             "bound": k.bound, "instructions": k.instructions,
                             "dram_bytes": k.dram_bytes,
                             "dram_bytes_charged": k.dram_bytes_charged, "flops": k.flops,
                             "explain": k.explain} for k in self.kernels]}


def estimate_program(counts: list[LaunchCounts] | tuple[LaunchCounts, ...], gpu: Gpu,
                     a: Assumptions = Assumptions()) -> ProgramEstimate:
    """Estimates of every dynamic launch, and per kernel their sums."""
    ests = tuple(estimate(c, gpu, a) for c in counts)
    order: dict[str, list[int]] = {}
    for i, c in enumerate(counts):
        order.setdefault(c.kernel, []).append(i)
    kernels = []
    for name, idx in order.items():
        es = [ests[i] for i in idx]
        cs = [counts[i] for i in idx]
        kernels.append(KernelSummary(
            name, len(idx), sum(e.seconds for e in es),
            {t: sum(getattr(e, t) for e in es) for t in TERMS},
            sum(c.instructions for c in cs), sum(c.dram_bytes for c in cs),
            sum(c.total_flops for c in cs), es[0].explain(), sum(e.dram_bytes for e in es)))
    return ProgramEstimate(gpu.name, ests, tuple(counts), tuple(kernels))
