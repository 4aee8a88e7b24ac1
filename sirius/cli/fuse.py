"""`sirius fuse PROGRAM.cu [-o OUT/]` (docs/fusion.md): fuse, verify on the CPU executor (unless
`--no-verify`), and write fused.ll, fused.ptx, plan.json and report.md; `fusion_args`,
`fuse_from_args` and `summary` are shared with `sirius verify`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from sirius.cli.common import Reporter, clang_flags, program_args, program_argv
from sirius.diagnostics import SiriusError, warn
from sirius.fusion.plan.planner import ARRANGEMENTS, Options


def progress(quiet: bool) -> Reporter:
    return Reporter(quiet)


def _options(args: argparse.Namespace) -> Options:
    return Options(arch=args.arch, arrangement=args.arrangement,
                   split_storage=not args.no_split_storage, wavefront=not args.no_wavefront,
                   cross_syncs=not args.keep_syncs, unroll=args.unroll,
                   prune=not args.keep_launches, megakernel=args.megakernel,
                   smem=args.smem, params=params_arg(args))


def params_arg(args: argparse.Namespace) -> tuple[str, ...] | None:
    """--params NAME,... (None: the `sirius import-tvm` sidecar's, if any)."""
    if args.params is None:
        return None
    return tuple(p.strip() for p in args.params.split(",") if p.strip())


def post_passes(args: argparse.Namespace):
    """The post-fusion pipeline: `-p PIPELINE`, none with `--no-postopt`, else None (the
    default list)."""
    from sirius.postopt import parse_pipeline

    if args.no_postopt and args.passes is not None:
        raise SiriusError("--no-postopt and -p/--passes contradict each other: give one")
    if args.no_postopt:
        return ()
    return None if args.passes is None else parse_pipeline(args.passes)


def fuse_from_args(args: argparse.Namespace, say, on_original=None):
    from sirius.pipeline import fuse

    flags = clang_flags(args)
    passes = post_passes(args)  # a bad pipeline fails before any work
    return fuse([Path(f) for f in args.files], _options(args), entry=args.entry, flags=flags,
                use_cache=not args.no_cache, progress=say, passes=passes,
                argv=program_argv(args), on_original=on_original,
                on_device_ir=getattr(on_original, "prebuild", None))


class Reference:
    """The original's reference run, started in a worker process as soon as the original is
    analysed (`on_original`), so that it runs on an idle core while the fusion is built;
    `head` is then handed to verify_fused. Started wherever a second core is there and the
    fused runs go to worker processes: `sirius verify` then runs its fused orders all at once,
    one worker each (verify_fused with a head start and `jobs` None), so that they share the
    cores instead of queueing in rounds (3 fused runs and the original took two rounds of 2
    workers either way); with the fused runs one after another in this process (`serial`) only
    where the caller turns it on (`default`; `sirius fuse` does not: BENCHMARKS.md has the
    measurements). `close` ends it when it was not used (the fusion failed, nothing to
    verify). `SIRIUS_HEAD_START=0` turns it off, `SIRIUS_HEAD_START=1` on whenever a second
    core is there (to measure what it gains)."""

    def __init__(self, seed: int, jobs: int | None, fused_runs: int, serial: bool = False,
                 default: bool = True, say=None):
        self.seed, self.jobs, self.fused_runs, self.serial = seed, jobs, fused_runs, serial
        self.default = default  # False: only when SIRIUS_HEAD_START=1 asks for it
        self.head = None
        self.files: tuple = ()
        self.builder = None  # the fused module's prebuild (`prebuild`)
        self.say = say or (lambda _line: None)  # a progress line when the prebuild starts

    def wanted(self) -> bool:
        import os

        cores = os.cpu_count() or 1
        force = os.environ.get("SIRIUS_HEAD_START", "")
        if force == "0" or cores < 2 or (self.jobs == 1 and not self.serial):
            return False
        if force == "1":
            return True
        if not self.default:
            return False
        if self.serial:
            return True
        if self.jobs is None:  # the fused runs then share the cores, one worker each
            return True
        workers = self.jobs
        n = self.fused_runs
        return -(-n // workers) < -(-(n + 1) // workers)

    def __call__(self, original) -> None:
        from sirius.verify.differential import start_reference

        self.files = tuple(original.program.files)
        if self.wanted():
            self.head = start_reference(original, self.seed)

    def prebuild(self, device_ir: str, host) -> None:
        """Start building the fused program's executor module (`runs.Prebuild`), on a core
        that PTX emission and ptxas leave idle, where a second core is there and the module is
        large (PREBUILD_MIN_BYTES of device IR: a small one compiles in less time than a
        worker takes to start); `SIRIUS_PREBUILD=0` turns it off, `SIRIUS_PREBUILD=1` on at
        any size (tests). A later round's module replaces an earlier one's."""
        import os

        if self.builder is not None:
            self.builder.close()
            self.builder = None
        force = os.environ.get("SIRIUS_PREBUILD", "")
        if force == "0" or (os.cpu_count() or 1) < 2 or \
                (force != "1" and len(device_ir) < PREBUILD_MIN_BYTES):
            return
        from sirius.verify.runs import Prebuild

        try:
            self.builder = Prebuild(device_ir, self.files, host.data_bytes(), True)
        except (OSError, ValueError, ImportError):
            self.builder = None
            return
        self.say(f"building the fused program's CPU module ahead ({len(device_ir) / 1e6:.1f} "
                 "MB of device IR), in a worker process")

    def close(self) -> None:
        if self.head is not None:
            self.head.close()
        if self.builder is not None:
            self.builder.close()
            self.builder = None


# device IR from which `sirius verify` builds the fused module ahead (Reference.prebuild):
# paper-shape fused modules are 4-10 MB, the small TVM corpus 0.2-2 MB
PREBUILD_MIN_BYTES = 2_000_000


def summary(res) -> str:
    lines = [f"launches: {res.launches_before} -> {res.launches_after}"]
    for rec in res.fused:
        members = ", ".join(f"{n.sid} {n.launch.kernel}" for n in rec.nodes)
        lines.append(f"  {rec.name} ({rec.arrangement}): {members}")
    for u in res.undone:
        lines.append(f"  undone: {u}")
    return "\n".join(lines)


def default_orders(seed: int) -> tuple[str, ...]:
    return ("forward", "reverse", f"random:{seed}")


# the output directory ---------------------------------------------------------------------------
class OutputDir:
    """Where `fuse` writes, checked before any work: an existing file, a path under a file, or
    a directory that cannot be created or written is a SiriusError (exit 2) now, not after the
    fusion. A directory created here and left empty (the run failed) is removed again."""

    def __init__(self, path: Path):
        self.path = path
        self.created = False
        if path.exists() and not path.is_dir():
            raise SiriusError(f"-o {path}: exists and is not a directory (fuse writes four "
                              "files into a directory); remove it or name another path")
        try:
            if not path.exists():
                path.mkdir(parents=True)
                self.created = True
        except OSError as e:
            raise SiriusError(f"-o {path}: cannot create it: {_reason(e)}") from e
        try:  # a file written and removed again: what a read-only directory refuses
            fd, probe = tempfile.mkstemp(dir=path, prefix=".sirius-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            self.discard()
            raise SiriusError(f"-o {path}: cannot write into it: {e.strerror or e}") from e

    def discard(self) -> None:
        """Remove the directory if this run created it and wrote nothing there."""
        if self.created:
            try:
                self.path.rmdir()
            except OSError:
                pass
            self.created = False

    def write(self, res, verification: dict) -> list[Path]:
        from sirius.fusion.report import write_outputs

        try:
            return write_outputs(res, self.path, verification)
        except OSError as e:
            raise SiriusError(f"-o {self.path}: cannot write the fused program: "
                              f"{_reason(e)}") from e


def _reason(e: OSError) -> str:
    where = f" ({e.filename})" if e.filename else ""
    return f"{e.strerror or e}{where}"


def output_dir(args: argparse.Namespace) -> OutputDir | None:
    """The checked output directory: `-o`, or `./PROGRAM.sirius/` (said on stderr) when neither
    -o nor --json is given; None for --json without -o (the plan goes to stdout only)."""
    if args.output is not None:
        return OutputDir(Path(args.output))
    if args.json:
        return None
    path = Path(f"{Path(args.files[0]).stem}.sirius")
    print(f"sirius: no -o given; writing to ./{path}/", file=sys.stderr)
    return OutputDir(path)


# verification -----------------------------------------------------------------------------------
def _unchanged(res) -> bool:
    """Whether the fused program is the original (nothing fused, split or rewritten)."""
    return not res.fused and res.host == res.original.host and \
        res.device_ir == res.original.program.device_ir


def check(res, args: argparse.Namespace, say, ref: Reference | None = None
          ) -> tuple[dict, int]:
    """Verify the fused program unless --no-verify; (what plan.json records, exit status)."""
    from sirius.verify.differential import verify_fused
    from sirius.verify.result import MISMATCH, ORDER_DEPENDENT

    if args.no_verify:
        return {"ran": False, "reason": "not verified (--no-verify)"}, 0
    if _unchanged(res):
        return {"ran": False, "reason": "not needed: nothing was fused or rewritten, the "
                "fused program is the original"}, 0
    rep = verify_fused(res.original, res, seed=args.seed, orders=default_orders(args.seed),
                       progress=say, head=ref.head if ref is not None else None)
    if rep.status == MISMATCH:
        say.done("verification failed")
        lines = [f"  {r.mismatch_line()}" for r in rep.failed()[:8]]
        lines += [f"  {o}: the fused run faulted: {m}" for o, m in rep.faults[:4]]
        more = len(rep.failed()) + len(rep.faults) - len(lines)
        lines += [f"  ... and {more} more"] if more > 0 else []
        print("error: the fused program does not compute what the original does "
              "(CPU executor, seed " f"{rep.seed}); nothing written\n" + "\n".join(lines) +
              "\nnote: `sirius verify` shows the whole comparison; please report the program "
              "(a fusion error is a bug in sirius); --no-verify writes it anyway",
              file=sys.stderr)
        return rep.brief(), 1
    if rep.status == ORDER_DEPENDENT:
        names = ", ".join(f"{d.buffer} ({d.mismatches} of {d.elements} elements)"
                          for d in rep.order_dependent)
        warn("order-dependent-original", "the original program gives different results under "
             f"different block/thread orders in {names}: a race or colliding writes; those "
             "buffers could not be checked, every other compared buffer agrees")
    return rep.brief(), 0


def _cmd_fuse(args: argparse.Namespace) -> int:
    from sirius.frontend.compile import check_inputs
    from sirius.fusion.report import plan_json

    check_inputs([Path(f) for f in args.files])
    out = output_dir(args)  # before any work: a bad -o fails now
    say = progress(args.quiet)
    # off by default here: measured, it saves a few seconds where the original runs long
    # (paper deepspeech2 176 -> 168 s) and costs a worker's start where it does not (paper
    # seq2seq 29.5 -> 31.8 s, and every small program); SIRIUS_HEAD_START=1 turns it on
    ref = None if args.no_verify else Reference(args.seed, None, 3, serial=True, default=False,
                                                say=say)
    try:
        res = fuse_from_args(args, say, ref)
        verification, status = check(res, args, say, ref)
    except BaseException:
        if out is not None:
            out.discard()
        raise
    finally:
        if ref is not None:
            ref.close()
    if status != 0:
        if out is not None:
            out.discard()
        return status
    if out is not None:
        for p in out.write(res, verification):
            say(f"wrote {p}")
    say.done()
    if args.json:
        print(json.dumps(plan_json(res, verification), indent=1))
    else:
        print(summary(res))
    return 0


def fusion_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--arrangement", choices=ARRANGEMENTS, default="auto",
                    help="vertical, horizontal, or auto (default): vertical along dependences, "
                         "horizontal across independent launches")
    sp.add_argument("--no-split-storage", action="store_true",
                    help="keep temporaries that share storage together (no false-dependence "
                         "splitting)")
    sp.add_argument("--no-wavefront", action="store_true",
                    help="do not skew host loop nests into wavefronts")
    sp.add_argument("--keep-launches", action="store_true",
                    help="keep dead launches (nothing reads what they write) and launches that "
                         "repeat an identical one on the same inputs (default: removed)")
    sp.add_argument("--unroll", type=int, default=64, metavar="N",
                    help="unroll a host loop whose iterations are independent when it runs at "
                         "most N launches, so that they can fuse (with --megakernel: any loop of "
                         "launches, so that they join the megakernel; default 64; 0: never)")
    sp.add_argument("--megakernel", choices=["grid", "counters"], default=None,
                    help="grid: each run of launches (after fusion) becomes one cooperative "
                         "kernel, a grid-wide barrier where a launch depends on an earlier one "
                         "(GLOBAL dependences included), each launch over its own blocks in a "
                         "block-stride loop, the grid the blocks that are co-resident (ptxas's "
                         "registers and shared memory); counters: the same kernel, but a block "
                         "waits only for the blocks of the earlier launches its launch depends "
                         "on, on per-block flags; with either, a host loop longer than --unroll "
                         "whose body is one megakernel runs inside it (default: off)")
    sp.add_argument("--smem", choices=["concat", "overlay"], default="concat",
                    help="shared memory of a vertical kernel's members: concat gives each "
                         "its own (default); overlay lays them over each other, with a block "
                         "barrier before each member that uses it after another did (less "
                         "shared memory per block, one more barrier)")
    sp.add_argument("--params", metavar="NAME,...",
                    help="the model's parameter buffers (names or shell patterns, e.g. "
                         "'d_w*'): launches that compute only from them form the one-time "
                         "prepare part, never fused with per-inference launches (default: the "
                         "role-param buffers of a `sirius import-tvm` program's NAME.json, "
                         "else none; '' for none)")
    sp.add_argument("--keep-syncs", action="store_true",
                    help="every host sync between launches ends a run (default: syncs the "
                         "host observes nothing after are crossed)")
    sp.add_argument("-p", "--passes", metavar="PIPELINE",
                    help="the post-fusion passes, as `sirius opt -p` takes them (e.g. "
                         "'host-constants,llvm-opt{level=3,rounds=2}'; `sirius opt "
                         "--list-passes`); default: the default list")
    sp.add_argument("--no-postopt", action="store_true",
                    help="run no post-fusion pass (not even LLVM's pipeline): the fused "
                         "module as code generation assembles it")


def register(sub) -> None:
    sp = sub.add_parser("fuse", help="fuse a program's launches, verify the result on the CPU "
                                     "executor, write fused.ll, fused.ptx, plan.json and "
                                     "report.md")
    program_args(sp)
    fusion_args(sp)
    sp.add_argument("-o", "--output", metavar="OUT",
                    help="output directory (default ./PROGRAM.sirius/; with --json and no -o, "
                         "nothing is written)")
    sp.add_argument("--json", action="store_true", help="print plan.json to stdout")
    sp.add_argument("--no-verify", action="store_true",
                    help="do not run original and fused on the CPU executor before writing "
                         "(for programs verified elsewhere)")
    sp.add_argument("--seed", type=int, default=7,
                    help="input seed of the verification (default 7; orders forward, reverse "
                         "and random:SEED)")
    sp.set_defaults(func=_cmd_fuse)
