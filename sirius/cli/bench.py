"""`sirius bench`: time the original and the fused program on the GPU, eagerly and as CUDA
graphs, and check both against the CPU executor (docs/gpu.md).

    sirius bench PROGRAM.cu                 fuse here, bench on this machine's GPU
    sirius bench PROGRAM.cu --prepare DIR   fuse here and write a carried directory (no GPU)
    sirius bench --from DIR                 bench a carried directory (no clang needed)

On a GPU machine that has numpy and pycuda but not sirius's compiler dependencies (llvmlite,
islpy), `python3 -m sirius.cli.bench --from DIR` is the same command: it imports nothing of the
compiler. Exit status: 0, or 1 when a GPU result differs from the CPU executor's (or the fused
from the original), 2 on bad input or a missing GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sirius.cli.common import Reporter, print_table, report_args
from sirius.diagnostics import SiriusError

SIDES = {"original": "GPU original", "fused": "GPU fused"}


# checking GPU results ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckRow:
    side: str  # original | fused
    against: str  # "CPU executor" | "GPU original"
    buffer: str
    comparison: object  # sirius.verify.compare.Comparison
    # a GPU-vs-CPU difference beyond the tolerance that the program's rounding explains
    # (`rounding_allowance`); empty when the comparison itself passed or nothing explains it
    accepted: str = ""

    @property
    def ok(self) -> bool:
        return self.comparison.ok or bool(self.accepted)

    def to_json(self) -> dict:
        c = self.comparison
        return {"program": self.side, "against": self.against, "buffer": self.buffer,
                "ok": self.ok, "elements": c.elements, "mismatches": c.mismatches,
                "max_abs": c.max_abs, "max_rel": c.max_rel, "bitwise": c.bitwise,
                "tolerance": c.tolerance, "message": c.message,
                "first_index": c.first_index,
                **({"accepted": self.accepted} if self.accepted else {})}


# how far a GPU result may lie from the CPU executor's, beyond verify's tolerance, when the
# program's own rounding explains it (docs/gpu.md, "Checking GPU results")
SENSITIVITY_FACTOR = 2.0
HALF_ULPS = 2


def rounding_allowance(got: np.ndarray, want: np.ndarray, plain: np.ndarray | None) -> str:
    """Why a GPU buffer `got` that fails verify's tolerance against the CPU executor's `want`
    (multiply-adds contracted as on the GPU) is still the program's result, or "":

    - the program amplifies rounding: the executor's own run with every operation rounded on
      its own (`plain`) lies up to s from `want`, and `got` lies within 2 s of it (not when
      s is 0: a program that does not amplify rounding gets no allowance);
    - float16: `got` lies within 2 ulps of the buffer's largest
      magnitude: PTX lets ptxas contract half multiplies and adds written without `.rn`
      (TVM's inline `mul.f16`, `add.f16`), which the executor, running each inline-PTX
      instruction as written, does not model, and TVM's fp16 kernels accumulate in half.
      (The likely cause of the 1-2 ulp differences seen on an H200; the SASS was not read.)
    Non-finite values must match where they are (NaN to NaN, inf to the same inf)."""
    g = np.asarray(got).reshape(-1)
    w = np.asarray(want).reshape(-1)
    if w.dtype.kind != "f" or g.shape != w.shape or g.dtype != w.dtype:
        return ""
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    fin = np.isfinite(w64)
    if not np.array_equal(np.isnan(g64), np.isnan(w64)) or \
            not np.array_equal(g64[~fin & ~np.isnan(w64)], w64[~fin & ~np.isnan(w64)]):
        return ""
    dev = float(np.abs(g64[fin] - w64[fin]).max(initial=0.0))
    top = float(np.abs(w64[fin]).max(initial=0.0))
    if plain is not None and np.asarray(plain).size == w.size:
        p64 = np.asarray(plain).reshape(-1).astype(np.float64)
        both = fin & np.isfinite(p64)
        spread = float(np.abs(p64[both] - w64[both]).max(initial=0.0))
        if spread > 0 and dev <= SENSITIVITY_FACTOR * spread:
            chaos = (f"; the program's outputs are dominated by rounding ({spread:.3g} against "
                     f"values up to {top:.3g}): no comparison with another machine can check "
                     "them, only GPU fused against GPU original" if spread > 0.01 * top else "")
            return (f"within the program's sensitivity to rounding: the executor's run with "
                    f"every operation rounded on its own lies up to {spread:.3g} from the "
                    f"reference, the GPU {dev:.3g} (at most {SENSITIVITY_FACTOR:g}x allowed)"
                    + chaos)
    if w.dtype == np.float16:
        ulp = 2.0 ** (np.floor(np.log2(top)) - 10) if top > 0 else 0.0
        if dev <= HALF_ULPS * ulp:
            return (f"within {HALF_ULPS} ulps of the buffer's largest magnitude ({top:.3g}: "
                    f"ulp {ulp:.3g}; the GPU {dev:.3g}): ptxas may contract inline-PTX half "
                    "multiply-adds, the executor does not")
    return ""


def gpu_check(reference: dict, runs: dict, observed: list[str], exact: bool = False,
              plain: dict | None = None) -> list[CheckRow]:
    """GPU original and GPU fused against the CPU executor's `reference`, and GPU fused
    against GPU original, buffer by buffer, with verify's tolerances (docs/verify.md). A
    GPU-vs-CPU row beyond them passes when the program's rounding explains the difference
    (`rounding_allowance`, given the executor's plainly rounded run `plain`; never with
    `exact`); fused against GPU original is verify's comparison alone."""
    from sirius.verify.compare import Comparison, compare, tol_text

    def one(side: str, against: str, name: str, got, want, allow: bool = False) -> CheckRow:
        if got is None:
            c = Comparison(want.size, want.size, float("inf"), float("inf"), False,
                           tol_text(want, exact), f"missing in the {SIDES[side]} run")
            return CheckRow(side, against, name, c)
        c = compare(got, want, exact=exact)
        why = "" if c.ok or exact or not allow or c.message else \
            rounding_allowance(got, want, (plain or {}).get(name))
        return CheckRow(side, against, name, c, why)

    rows = []
    for side in ("original", "fused"):
        for name in observed:
            rows.append(one(side, "CPU executor", name, runs[side].final.get(name),
                            reference[name], allow=True))
    for name in observed:
        want = runs["original"].final.get(name, reference[name])
        rows.append(one("fused", "GPU original", name, runs["fused"].final.get(name), want))
    return rows


def check_runs(carried, device) -> dict:
    """Run both programs of a carried directory once on the GPU, with the reference's inputs."""
    from sirius.runtime.gpu import run_on_gpu

    return {side: run_on_gpu(bp.host, bp.program, bp.kernels, device=device, seed=carried.seed,
                             inputs=bp.inputs, dtypes=bp.dtypes,
                             opaque_trips=int(carried.meta.get("opaque_trips", 3)))
            for side, bp in carried.sides().items()}


def print_check(rows: list[CheckRow]) -> None:
    out = []
    for r in rows:
        c = r.comparison
        out.append([SIDES[r.side], r.against, r.buffer, str(c.elements), str(c.mismatches),
                    f"{c.max_abs:.3g}", c.tolerance,
                    "ok" if c.ok else "ok (rounding)" if r.ok else (c.message or "DIFFERS")])
    print_table("GPU results against the CPU executor and the original", [
        "program", "against", "buffer", "elements", "mismatches", "max abs", "tolerance",
        "result"], out, left=("program", "against", "buffer", "tolerance", "result"))
    for r in rows:
        if r.accepted:
            print(f"{SIDES[r.side]} {r.buffer}: {r.accepted}")


# the command ------------------------------------------------------------------------------------
def add_parser(sub, light: bool = False) -> argparse.ArgumentParser:
    """The bench parser; `light` leaves out the compile options (`--from DIR` only)."""
    sp = sub.add_parser("bench", help="time original vs fused on the GPU (launches and CUDA "
                                      "graphs), checked against the CPU executor")
    if not light:
        from sirius.cli.common import program_args
        from sirius.cli.fuse import fusion_args

        program_args(sp)
        _files_optional(sp)
        fusion_args(sp)
        sp.add_argument("--prepare", metavar="DIR",
                        help="write a carried directory (PTX, host programs, CPU reference) "
                             "for `sirius bench --from DIR` on a GPU machine; needs no GPU")
        sp.add_argument("--inputs", metavar="FILE.npz",
                        help="device buffers' contents by name (e.g. a TVM model's weights)")
        sp.add_argument("--ptx-version", type=int, metavar="N",
                        help="PTX ISA version to emit, e.g. 84 for a CUDA 12.4 driver")
        sp.add_argument("--seed", type=int, default=7, help="input seed (default 7)")
        sp.add_argument("--opaque-trips", type=int, default=3, metavar="N",
                        help="iterations of data-dependent host loops (default 3)")
    sp.add_argument("--from", dest="from_dir", metavar="DIR",
                    help="bench a carried directory written by --prepare")
    sp.add_argument("--runs", type=int, default=100, help="timed runs per mode (default 100)")
    sp.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
    sp.add_argument("--input-sets", type=int, default=4, metavar="N",
                    help="input sets rotated between runs (default 4; fewer if memory is short)")
    sp.add_argument("--no-graphs", action="store_true", help="no CUDA-graph modes")
    sp.add_argument("--no-flush", action="store_true", help="do not flush L2 between runs")
    sp.add_argument("--per-launch", action="store_true",
                    help="also time every launch of the eager runs (an event after each "
                         "operation; what `sirius tune --measure` uses; JSON: launch_timings)")
    sp.add_argument("--check-only", action="store_true",
                    help="run both programs once and compare; no timing")
    sp.add_argument("--exact", action="store_true", help="demand bitwise equality")
    sp.add_argument("--save-outputs", metavar="FILE.npz",
                    help="write the observed buffers of both GPU runs (input set 0) to FILE.npz, "
                         "as original/NAME and fused/NAME, to study a difference elsewhere")
    report_args(sp, "the timings and checks")
    return sp


def _files_optional(sp: argparse.ArgumentParser) -> None:
    """PROGRAM.cu is optional here: `--from DIR` takes none."""
    for action in sp._actions:
        if action.dest == "files":
            action.nargs = "*"


def register(sub) -> None:
    add_parser(sub).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    files = getattr(args, "files", None) or []
    prepare_dir = getattr(args, "prepare", None)
    if args.from_dir and (files or prepare_dir):
        raise SiriusError("--from DIR benches a carried directory: give no PROGRAM.cu and no "
                          "--prepare with it")
    if not args.from_dir and not files:
        raise SiriusError("give PROGRAM.cu (optionally with --prepare DIR), or --from DIR")
    if args.runs < 1 or args.warmup < 0 or args.input_sets < 1:
        raise SiriusError("--runs and --input-sets must be at least 1, --warmup at least 0")
    from sirius.runtime.gpu import carry

    say = Reporter(getattr(args, "quiet", False))
    if args.from_dir:
        return _bench(carry.load(args.from_dir), args, say)
    device = None if prepare_dir else _device(args)  # no GPU: said before compiling
    if prepare_dir:
        out = _prepare(args, Path(prepare_dir), say)
        say.done()
        print(f"wrote {out}; on a GPU machine: python3 -m sirius.cli.bench --from {out}")
        return 0
    with tempfile.TemporaryDirectory(prefix="sirius-bench-") as d:
        carried = carry.load(_prepare(args, Path(d), say))
        return _bench(carried, args, say, device)


def _device(args: argparse.Namespace):
    from sirius.runtime.gpu import GpuDevice

    return GpuDevice(time_launches=args.check_only)


def gpu_device(args: argparse.Namespace):
    """The GPU for `sirius verify --device gpu` (GpuUnavailable, exit 2, when there is none);
    CPU-executor options are refused."""
    from sirius.runtime.gpu import GpuDevice

    if args.order:
        raise SiriusError("--order is an option of the CPU executor; a GPU runs blocks in its "
                          "own order")
    return GpuDevice()


def verify_on_gpu(res, device, args: argparse.Namespace, say) -> int:
    """`sirius verify --device gpu`: the CPU executor's original (forward order) is the
    reference; original and fused run once on the GPU with the same seeded inputs."""
    from sirius.runtime.gpu import carry
    from sirius.verify.differential import observed

    names, rule = observed(res.original.host)
    say(f"CPU executor reference run, then original and fused on {device.info.name}")
    with tempfile.TemporaryDirectory(prefix="sirius-verify-") as d:
        carried = carry.load(carry.prepare(res, Path(d), observed=names, observed_rule=rule,
                                           seed=args.seed))
    rows = gpu_check(carried.reference, check_runs(carried, device), carried.observed,
                     args.exact, carried.reference_plain)
    say.done()
    ok = all(r.ok for r in rows)
    if args.json:
        print(json.dumps({"device": device.info.to_json(), "seed": args.seed, "ok": ok,
                          "observed": names, "rule": rule,
                          "check": [r.to_json() for r in rows]}, indent=1))
    else:
        print_check(rows)
        print("ok: the GPU agrees with the CPU executor" if ok else
              "MISMATCH: a GPU result differs (see the rows above)")
    return 0 if ok else 1


def _prepare(args: argparse.Namespace, out: Path, say) -> Path:
    import numpy as np

    from sirius.cli.fuse import fuse_from_args
    from sirius.frontend.compile import check_inputs
    from sirius.runtime.gpu.carry import prepare
    from sirius.verify.differential import observed

    check_inputs([Path(f) for f in args.files])
    if out.exists() and not out.is_dir():
        raise SiriusError(f"--prepare {out}: exists and is not a directory")
    inputs = None
    if args.inputs:
        try:
            with np.load(args.inputs) as z:
                inputs = {k: z[k] for k in z.files}
        except (OSError, ValueError) as e:
            raise SiriusError(f"--inputs {args.inputs}: cannot read it as a .npz file: {e}") \
                from e
    res = fuse_from_args(args, say)
    names, rule = observed(res.original.host)
    say(f"CPU executor reference run and PTX for {args.arch}")
    command = "sirius bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"] else ""
    try:
        return prepare(res, out, observed=names, observed_rule=rule, seed=args.seed,
                       inputs=inputs, opaque_trips=args.opaque_trips,
                       ptx_version=args.ptx_version, command=command)
    except OSError as e:
        raise SiriusError(f"--prepare {out}: cannot write it: {e.strerror or e}") from e


def _bench(carried, args: argparse.Namespace, say, device=None) -> int:
    from sirius.runtime.gpu.bench import BenchConfig, bench

    device = device or _device(args)
    result = None
    if args.check_only:
        say(f"{carried.name}: running original and fused once on {device.info.name}")
        runs = check_runs(carried, device)
    else:
        config = BenchConfig(runs=args.runs, warmup=args.warmup, input_sets=args.input_sets,
                             seed=carried.seed, flush_l2=not args.no_flush,
                             graphs=not args.no_graphs, per_launch=args.per_launch,
                             opaque_trips=int(carried.meta.get("opaque_trips", 3)))
        result = bench(carried.sides(), config, device=device, progress=say)
        runs = result.runs
    rows = gpu_check(carried.reference, runs, carried.observed, args.exact,
                     carried.reference_plain)
    if args.save_outputs:
        _save_outputs(args.save_outputs, runs, carried.observed)
    notes = list(result.notes) if result else []
    bad_inputs = carried.input_mismatches(runs["original"].initial)
    if bad_inputs:
        notes.append("the GPU run's inputs differ from the prepared run's in "
                     f"{', '.join(bad_inputs)} (numpy {carried.meta.get('numpy')} there): the "
                     "comparison with the CPU executor is not meaningful")
    say.done()
    ok = all(r.ok for r in rows)
    if args.json:
        print(json.dumps({"program": carried.name, "carried": str(carried.path),
                          "command": carried.meta.get("command", ""), "ok": ok,
                          "bench": result.to_json() if result else None,
                          "check": [r.to_json() for r in rows], "notes": notes}, indent=1))
    else:
        if result is not None:
            _print_bench(carried, result)
        print_check(rows)
        for n in notes:
            print(f"note: {n}")
    return 0 if ok else 1


def _save_outputs(path: str, runs: dict, names) -> None:
    arrays = {f"{side}/{n}": np.asarray(run.final[n]) for side, run in runs.items()
              for n in names if n in run.final}
    try:
        np.savez_compressed(path, **arrays)
    except OSError as e:
        raise SiriusError(f"--save-outputs {path}: cannot write it: {e.strerror or e}") from e


def _print_bench(carried, r) -> None:
    d = r.device
    flush = f"L2 flushed ({r.flush_bytes >> 20} MiB memset)" if r.flush_bytes else "no L2 flush"
    rows = []
    for mode, t in r.timings.items():
        side = mode.removesuffix("_graph")
        rows.append([mode.replace("_", " "), str(r.programs[side]["launches"]),
                     f"{t['median_us']:.2f}", f"{t['p10_us']:.2f}", f"{t['p90_us']:.2f}",
                     f"{t['min_us']:.2f}"])
    print_table(f"{carried.name} on {d['name']} ({d['arch']}): {r.config.runs} runs after "
                f"{r.config.warmup} warm-up, {r.input_sets} input set(s), {flush}",
                ["mode", "launches", "median us", "p10 us", "p90 us", "min us"], rows,
                left=("mode",))
    for name, v in r.ratios.items():
        a, b = name.removeprefix("speedup_").split("_vs_")
        print(f"speed-up of {a.replace('_', ' ')} over {b.replace('_', ' ')}: {v:.2f}x "
              "(ratio of medians)")
    if r.graph_api:
        print(f"graphs: {r.graph_api}")


def main(argv: list[str] | None = None) -> int:
    """`python3 -m sirius.cli.bench --from DIR`: the bench without the compiler's imports."""
    parser = argparse.ArgumentParser(prog="python3 -m sirius.cli.bench")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub, light=True)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    try:
        if args.report_file:
            with open(args.report_file, "w") as out, contextlib.redirect_stdout(out):
                return run(args)
        return run(args)
    except SiriusError as e:
        print(e.render(), file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: -o {args.report_file}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sirius: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
