"""Fuse a random program and check the fused program two ways: what tests/randprog/
test_fuse_random.py and `scripts/fuzz.py --fuse` do for each program.

    out = fuse_and_verify(seed_or_program, arrangement="auto", workdir=tmp_path)

1. The program is written to `workdir` and fused (`sirius.pipeline.fuse`). A program checked
   just before (the same source: the same seed fused another way) keeps its file and its
   analysis (`sirius.pipeline.analyse`, frontend to UAR), and only the fusion is done again.
2. Differential: `verify_fused` runs the original once (forward order) and the fused program
   under the forward, reverse and random:<seed> block/thread orders (bounds checked), and
   compares the observable buffers.
3. Independent: the fused program's forward run (verify's, with every buffer kept) has its
   outputs compared with the program's numpy reference (`RandomProgram.mismatches`, the
   float32 error bound of approx.py), computed from the inputs the original run received. A
   bug the original and the fused program share (an executor or generator bug, or a fusion
   bug in code both go through) shows here; when this check fails, the original is compared
   with the reference as well, to say which side is wrong.

Both runs draw the same inputs: the executor seeds each buffer's data by (seed, buffer name), and
every buffer is typed float32 (all generated buffers are floats), as the original's kernels
type them (verify's runs type buffers from the kernels; where one of them is not float32 there,
the check runs both programs itself with float32 buffers).

A failure raises AssertionError (unless `raise_on_failure=False`) whose message ends with the
one command that reproduces it: `.venv/bin/python scripts/fuzz.py --fuse --seed S --count 1`
for a seeded program (the arrangement is `arrangement_for(S)` there, or named by
`--arrangement`), `.venv/bin/sirius verify PATH --arrangement A --seed S` for a drawn one.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.randprog.generator import DEFAULT, Features, generate
from tests.randprog.program import RandomProgram

ARRANGEMENTS = ("auto", "vertical", "horizontal")


def arrangement_for(seed: int) -> str:
    """The arrangement program `seed` is fused with when none is named: seed % 3 picks."""
    return ARRANGEMENTS[seed % 3]


def orders_for(seed: int) -> tuple[str, ...]:
    return ("forward", "reverse", f"random:{seed}")


def reproduce_command(seed: int | None, arrangement: str, path: Path, input_seed: int,
                      features: Features = DEFAULT, megakernel: str | None = None,
                      smem: str = "concat", unroll: int = 64) -> str:
    """The one command that re-runs this check."""
    mk = f" --megakernel {megakernel}" if megakernel else ""
    mk += f" --smem {smem}" if smem != "concat" else ""
    mk += f" --unroll {unroll}" if unroll != 64 else ""
    if seed is None:
        return (f".venv/bin/sirius verify {path} --arrangement {arrangement} "
                f"--seed {input_seed} --order forward --order reverse "
                f"--order random:{input_seed}{mk}")
    flag = "" if arrangement == arrangement_for(seed) else f" --arrangement {arrangement}"
    flag += f" --features {features.spec()}" if features.spec() else ""
    flag += mk
    return f".venv/bin/python scripts/fuzz.py --fuse --seed {seed} --count 1{flag}"


def crash_text(e: BaseException, head: int = 10, tail: int = 6) -> str:
    """An exception with the outermost `head` and innermost `tail` frames of its traceback (a
    RecursionError's whole traceback is thousands of lines; where it began is at the top)."""
    frames = traceback.extract_tb(e.__traceback__)
    if len(frames) > head + tail:
        lines = (traceback.format_list(frames[:head])
                 + [f"  ... {len(frames) - head - tail} frames ...\n"]
                 + traceback.format_list(frames[-tail:]))
    else:
        lines = traceback.format_list(frames)
    return f"{type(e).__name__}: {e}\nTraceback (most recent call last):\n{''.join(lines)}"


@dataclass
class FuseOutcome:
    seed: int | None             # generator seed (None: a program drawn by hypothesis)
    arrangement: str
    path: Path                   # the .cu file written (kept as long as `workdir` is)
    launches_before: int = 0     # launches of the host program, loops unrolled (fuse's count)
    launches_after: int = 0
    dynamic_before: int = 0      # launches the executor ran (original, fused)
    dynamic_after: int = 0
    fused_kernels: int = 0
    undone: list[str] = field(default_factory=list)
    megakernels: int = 0         # megakernels (--megakernel grid|counters)
    device_loops: int = 0        # of them, those a host loop runs inside (grid, --unroll 0)
    device_nests: int = 0        # of those, the ones a whole loop nest runs inside
    passes_changed: list[str] = field(default_factory=list)  # post-fusion passes with an effect
    code_motion: int = 0  # vertical kernels whose members were reordered to share barriers
    problems: list[str] = field(default_factory=list)
    crashed: bool = False        # an exception (fuse, verify or a run raised), not a mismatch
    reproduce: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self, prog: RandomProgram | None = None) -> str:
        head = (f"fused program {self.path} ({self.arrangement}, launches "
                f"{self.launches_before} -> {self.launches_after}) is wrong:")
        lines = [head, *(p.rstrip() for p in self.problems)]
        if prog is not None:
            lines += ["program:", prog.summary]
        lines.append(f"reproduce: {self.reproduce}")
        return "\n".join(lines)


def _run(host, program, kernels, seed: int, dtypes: dict[str, np.dtype]):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    device = CpuDevice(order="forward", seed=seed, jobs=1)
    return run_host_program(host, program, kernels, device, seed=seed, order="forward",
                            dtypes=dtypes)


@dataclass(frozen=True)
class _FusedProgram:
    device_ir: str
    device_module: object
    files: tuple


def reference_check(prog: RandomProgram, res, seed: int, out: FuseOutcome,
                    runs: tuple | None = None) -> None:
    """Check the launches the original and `res`'s fused program execute (forward order, input
    seed `seed`) and the fused outputs against the numpy reference (and, on a mismatch, the
    original's); problems go to `out.problems`. `runs`: the (original, fused) forward runs
    `verify_fused(keep=...)` already made, with every buffer's initial and final contents
    (`rep.first_runs`); without them both programs are run here."""
    import llvmlite.binding as llvm

    if runs is not None and all(
            runs[0].initial.get(b.name, np.empty(0, np.float32)).dtype == np.float32
            for b in prog.float_buffers()):
        ref_run, got = runs
    else:
        dtypes = {b.name: np.dtype(np.float32) for b in prog.float_buffers()}
        orig = res.original
        ref_run = _run(orig.host, orig.program, orig.kernels, seed, dtypes)
        fused_prog = _FusedProgram(res.device_ir, llvm.parse_assembly(res.device_ir),
                                   tuple(orig.program.files))
        got = _run(res.host, fused_prog, orig.kernels, seed, dtypes)
    out.dynamic_before, out.dynamic_after = len(ref_run.launches), len(got.launches)
    if (out.dynamic_before, out.dynamic_after) != (prog.dynamic_launches, res.launches_after):
        out.problems.append(f"launches executed: original {out.dynamic_before}, fused "
                            f"{out.dynamic_after}; expected {prog.dynamic_launches} (generated) "
                            f"and {res.launches_after} (what fuse reported)")
    missing = [n for n in prog.outputs if n not in got.final]
    if missing:
        out.problems.append(f"outputs missing from the fused run: {missing}")
        return
    bad = prog.mismatches(ref_run.initial, got.final, names=prog.outputs)
    if not bad:
        return
    shared = prog.mismatches(ref_run.initial, ref_run.final, names=prog.outputs)
    who = ("the original differs from the reference too (an executor or generator bug, or one "
           "both share): " + "; ".join(map(str, shared)) if shared
           else "the original matches the reference")
    out.problems.append("fused outputs vs numpy reference (forward order): "
                        + "; ".join(map(str, bad)) + f"; {who}")


# The analyses of the last programs checked (`sirius.pipeline.analyse`: frontend to UAR), by
# source text and arch, with the file they were made from: one program fused several ways in a
# row (plain, then as megakernels: tests/conftest.py keeps a seed's tests in one xdist worker)
# is analysed once. An analysis is not changed by fusing (the tuner reuses one the same way).
_RECENT: dict[tuple[str, str], tuple[Path, object]] = {}


def _recent(source: str, arch: str) -> tuple[Path | None, object | None]:
    path, analysed = _RECENT.get((source, arch), (None, None))
    if path is not None and not path.exists():  # its test's directory was removed
        return None, None
    return path, analysed


def _remember(source: str, arch: str, path: Path, analysed):
    while len(_RECENT) >= 2:
        del _RECENT[next(iter(_RECENT))]
    _RECENT[(source, arch)] = (path, analysed)
    return analysed


def fuse_and_verify(prog_or_seed: RandomProgram | int, arrangement: str | None = None,
                    workdir: Path | str = ".", *, input_seed: int | None = None,
                    arch: str = "sm_80", raise_on_failure: bool = True,
                    features: Features = DEFAULT,
                    megakernel: str | None = None, smem: str = "concat",
                    unroll: int = 64) -> FuseOutcome:
    """Write, fuse and check one program (see the module docstring). `arrangement` None picks
    `arrangement_for(seed)` (auto for a drawn program); `input_seed` (default: the generator
    seed, or 1) seeds the executor's inputs and the random order; `features` are the
    generator's (for a seed); `megakernel`: `Options.megakernel` (grid or counters); `smem`:
    `Options.smem` (concat or overlay); `unroll`: `Options.unroll` (0: host loops stay loops,
    so that with `megakernel="grid"` they become device loops)."""
    from sirius.fusion.plan.planner import Options
    from sirius.pipeline import analyse, fuse
    from sirius.verify.differential import verify_fused

    t0 = time.perf_counter()
    prog = (generate(prog_or_seed, features=features) if isinstance(prog_or_seed, int)
            else prog_or_seed)
    seed = prog.seed
    if arrangement is None:
        arrangement = arrangement_for(seed) if seed is not None else "auto"
    if input_seed is None:
        input_seed = seed if seed is not None else 1
    directory = Path(workdir)
    directory.mkdir(parents=True, exist_ok=True)
    path, analysed = _recent(prog.source, arch)
    if path is None:
        path = prog.write(directory, None if seed is not None else "randprog_drawn.cu")
    out = FuseOutcome(seed, arrangement, path)
    out.reproduce = reproduce_command(seed, arrangement, path, input_seed, features, megakernel,
                                      smem, unroll)
    try:
        if analysed is None:
            analysed = _remember(prog.source, arch, path,
                                 analyse([path], Options(arch=arch), use_cache=True))
        res = fuse([path], Options(arch=arch, arrangement=arrangement, megakernel=megakernel,
                                   smem=smem, unroll=unroll), use_cache=True,
                   analysed=analysed)
        out.megakernels = len(res.megakernels)
        out.device_loops = sum(m.kernel is not None and m.kernel.spec.device_loop is not None
                               for m in res.megakernels)
        out.device_nests = sum(m.kernel is not None and m.kernel.spec.device_loop is not None
                               and bool(m.kernel.spec.device_loop.levels)
                               for m in res.megakernels)
        out.launches_before, out.launches_after = res.launches_before, res.launches_after
        out.fused_kernels = len(res.fused)
        out.undone = list(res.undone)
        out.passes_changed = sorted({st.pass_text.split("{")[0] for st in res.postopt
                                     if st.changed})
        out.code_motion = sum(any(r.startswith("code motion:") for r in rec.reasons)
                              for rec in res.fused)
        keep = [b.name for b in prog.float_buffers()]
        # the original runs once (forward): a generated program is race-free by construction,
        # and were it not, a fused run in another order would differ from it and fail here,
        # not pass (the second original run only tells such a program apart)
        rep = verify_fused(res.original, res, seed=input_seed, orders=orders_for(input_seed),
                           keep=keep, original_orders=("forward",))
        if not rep.ok:
            out.problems.append("fused vs original (verify_fused):\n" + rep.render())
        # the forward runs verify made (every buffer kept), unless the fused one faulted there
        # (verify has said so): then the check runs both programs itself
        first = rep.first_runs
        usable = first is not None and first[1] is not None and first[1].error is None
        reference_check(prog, res, input_seed, out, first if usable else None)
    except Exception as e:  # noqa: BLE001 (a crash is a finding, with its traceback)
        out.problems.append(crash_text(e))
        out.crashed = True
    out.seconds = time.perf_counter() - t0
    if raise_on_failure and not out.ok:
        raise AssertionError(out.message(prog))
    return out
