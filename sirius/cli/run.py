"""`sirius run PROGRAM.cu`: run a whole CUDA program on the CPU executor."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from sirius.cli.common import clang_flags, print_table, program_args, program_argv, report_args
from sirius.diagnostics import SiriusError


def register(sub) -> None:
    sp = sub.add_parser("run", help="run a CUDA program on the CPU executor (GPU semantics)")
    program_args(sp)
    sp.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                    help="where to run: cpu, the CPU executor (default), or gpu (needs "
                         "sirius[gpu], `make setup-gpu`; counters are the executor's only)")
    sp.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    sp.add_argument("--order", default="forward", metavar="O",
                    help="order of blocks and of threads between barriers: forward (default), "
                         "reverse or random:SEED")
    sp.add_argument("--jobs", type=int, default=None,
                    help="worker threads (default: all cores for --order forward, else 1)")
    sp.add_argument("--check-bounds", action="store_true",
                    help="stop at the first global access outside every allocation")
    sp.add_argument("--opaque-trips", type=int, default=3, metavar="N",
                    help="iterations of host loops whose trip count depends on data (default 3)")
    sp.add_argument("--input", action="append", default=[], metavar="BUFFER=FILE.npy",
                    help="use FILE.npy as the contents of device buffer BUFFER")
    sp.add_argument("--inputs", metavar="FILE.npz",
                    help="use every array of FILE.npz as the contents of the device buffer of "
                         "its name (e.g. a TVM reference file from sirius import-tvm)")
    sp.add_argument("--save", metavar="OUT.npz",
                    help="write every buffer's initial and final contents (NAME.in, NAME.out)")
    report_args(sp, "the launches and checksums")
    sp.set_defaults(func=_cmd_run)


def _order(text: str) -> str:
    kind, _, seed = text.partition(":")
    if kind not in ("forward", "reverse", "random") or (kind == "random" and not seed.isdigit()) \
            or (kind != "random" and seed):
        raise SiriusError(f"--order {text}: expected forward, reverse or random:SEED")
    return text


def _inputs(items: list[str], npz: str | None = None) -> dict[str, np.ndarray]:
    out = {}
    if npz:
        try:
            with np.load(npz) as z:
                out.update({k: z[k] for k in z.files})
        except (OSError, ValueError) as e:
            raise SiriusError(f"--inputs {npz}: cannot read it as a .npz file: {e}") from e
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            raise SiriusError(f"--input {item}: expected BUFFER=FILE.npy")
        try:
            out[name] = np.load(path)
        except (OSError, ValueError) as e:
            raise SiriusError(f"--input {item}: cannot read {path}: {e}") from e
    return out


def _cmd_run(args: argparse.Namespace) -> int:
    from sirius.runtime.interpreter import run_program

    order = _order(args.order)
    inputs = _inputs(args.input, args.inputs)
    flags = clang_flags(args)
    if args.device == "gpu":
        return _cmd_run_gpu(args, inputs, flags)
    progress, stop = _progress_bar(not args.json)
    try:
        result = run_program([Path(f) for f in args.files], entry=args.entry, arch=args.arch,
                             flags=flags, seed=args.seed, order=order,
                             inputs=inputs, check_bounds=args.check_bounds,
                             opaque_trips=args.opaque_trips, jobs=args.jobs,
                             use_cache=not args.no_cache, progress=progress,
                             launch_progress=not args.quiet, argv=program_argv(args))
    finally:
        stop()
    return _report(result, args)


def _cmd_run_gpu(args: argparse.Namespace, inputs, flags) -> int:
    """The same seeded inputs on the GPU (docs/gpu.md); CPU-executor options are refused."""
    from sirius.runtime.gpu import run_program_gpu

    cpu_only = [o for o, on in (("--check-bounds", args.check_bounds),
                                ("--order", args.order != "forward"),
                                ("--jobs", args.jobs is not None)) if on]
    if cpu_only:
        what = "an option" if len(cpu_only) == 1 else "options"
        raise SiriusError(f"{', '.join(cpu_only)}: {what} of the CPU executor; a GPU runs "
                          "blocks in its own order and has no bounds checks")
    result = run_program_gpu([Path(f) for f in args.files], entry=args.entry, arch=args.arch,
                             flags=flags, seed=args.seed, inputs=inputs,
                             opaque_trips=args.opaque_trips, use_cache=not args.no_cache,
                             argv=program_argv(args))
    return _report(result, args)


def _report(result, args: argparse.Namespace) -> int:
    if args.save:
        result.save(Path(args.save))
    if args.json:
        print(json.dumps(_document(result), indent=2))
    else:
        _print_table(result, args)
    return 0


def _document(r) -> dict:
    return {
        "device": r.device, "seed": r.seed, "order": r.order, "seconds": r.seconds,
        "launches": [{"index": rec.index, "launch": rec.launch_index, "env": rec.env,
                      **rec.stats.to_json()} for rec in r.launches],
        "outputs": {name: {"checksum": r.checksum(name), "dtype": str(r.final[name].dtype),
                           "elements": int(r.final[name].size),
                           "sum": float(np.sum(r.final[name], dtype=np.float64))}
                    for name in r.outputs()},
        "notes": r.notes,
    }


def _print_table(r, args) -> None:
    gpu = r.device == "gpu"  # a GPU run has no counters, only times

    def n(v: int) -> str:
        return "-" if gpu else f"{v:,}"

    rows = [[str(rec.index), rec.stats.kernel, "x".join(map(str, rec.stats.grid)),
             "x".join(map(str, rec.stats.block)), n(rec.stats.instructions),
             n(rec.stats.global_load_bytes), n(rec.stats.global_store_bytes),
             n(rec.stats.shared_load_bytes), n(rec.stats.shared_store_bytes),
             n(rec.stats.barriers), f"{rec.stats.seconds * 1e3:.2f}"] for rec in r.launches]
    where = "the GPU" if gpu else "the CPU executor"
    print_table(f"{', '.join(args.files)} on {where} (seed {r.seed}, order {r.order})",
                ["#", "kernel", "grid", "block", "instructions", "global ld B", "global st B",
                 "shared ld B", "shared st B", "barriers", "ms"], rows, left=("kernel",))
    outputs = [[name, str(r.final[name].dtype), str(r.final[name].size),
                f"{np.sum(r.final[name], dtype=np.float64):.6g}", r.checksum(name)]
               for name in r.outputs()]
    print_table("outputs", ["buffer", "dtype", "elements", "sum", "sha256[:12]"], outputs,
                left=("buffer", "dtype"))
    for note in r.notes:
        print(f"note: {note}")
    print(f"{len(r.launches)} launches in {r.seconds:.3f} s")


def _progress_bar(enabled: bool):
    """A progress callback that shows a bar on a terminal once a run has many launches."""
    if not enabled or not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import Progress

    state: dict = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            if total < 20:
                return
            state["bar"] = Progress(transient=True, console=None)
            state["bar"].start()
            state["task"] = state["bar"].add_task("running launches", total=total)
        state["bar"].update(state["task"], completed=done)

    def stop() -> None:
        if "bar" in state:
            state["bar"].stop()

    return update, stop
