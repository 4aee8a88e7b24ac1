"""The Python API for users who script sirius (docs/api.md).

    import sirius
    r = sirius.fuse("prog.cu", arch="sm_90")
    r.launches_before, r.launches_after      # e.g. 6, 2
    report = r.verify()                      # original vs fused on the CPU executor
    assert report.ok
    r.write("out/")                          # fused.ll, fused.ptx, plan.json, report.md

`sirius.analyze(...)` gives the UAR, `sirius.inspect(...)` the host-model document that
`sirius inspect --json` prints, `sirius.run(...)` runs a program on the CPU executor. Every
function takes the program's files and the same compile options as the command line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sirius import pipeline
from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options


def _flags(includes: Sequence[str], defines: Sequence[str], clang_flags: Sequence[str]
           ) -> list[str]:
    return [f"-I{d}" for d in includes] + [f"-D{d}" for d in defines] + list(clang_flags)


@dataclass(frozen=True)
class Fusion:
    """A fused program: counts, the plan, verification and output files."""

    result: FuseResult

    @property
    def launches_before(self) -> int:
        return self.result.launches_before

    @property
    def launches_after(self) -> int:
        return self.result.launches_after

    @property
    def fused_kernels(self) -> list[dict]:
        """One entry per fused kernel: name, arrangement and the launches it replaced."""
        return [{"name": rec.name, "arrangement": rec.arrangement,
                 "members": [n.launch.kernel for n in rec.nodes]}
                for rec in self.result.fused + self.result.megakernels]

    @property
    def undone(self) -> list[str]:
        """Fused kernels that were undone (ptxas limits, codegen refusals), with the reason."""
        return list(self.result.undone)

    def plan(self) -> dict:
        """The plan.json document (docs/fusion.md has its schema)."""
        from sirius.fusion.report import plan_json

        return plan_json(self.result)

    def verify(self, *, seed: int = 7, orders: Sequence[str] | None = None,
               exact: bool = False, progress: Callable[[str], None] | None = None):
        """Run original and fused on the CPU executor on the same inputs and compare every
        output; returns a report with `.ok`, `.render()` and `.to_json()`."""
        return pipeline.verify(self.result, seed=seed, orders=orders, exact=exact,
                               progress=progress or (lambda _: None))

    def write(self, out: str | Path) -> list[Path]:
        """Write fused.ll, fused.ptx, plan.json and report.md into `out` (created)."""
        from sirius.fusion.report import write_outputs

        return write_outputs(self.result, Path(out))


def fuse(*files: str | Path, arch: str = "sm_80", arrangement: str = "auto",
         entry: str = "main", includes: Sequence[str] = (), defines: Sequence[str] = (),
         clang_flags: Sequence[str] = (), split_storage: bool = True, wavefront: bool = True,
         use_cache: bool = True, progress: Callable[[str], None] | None = None,
         argv: Sequence[str] | None = None, unroll: int = 64,
         megakernel: str | None = None) -> Fusion:
    """Compile, analyse and fuse a whole CUDA program (the `sirius fuse` command); `argv`: the
    program's arguments (`--args`), to which it is then specialised; `unroll`: host loops of
    independent launches running at most this many are unrolled so that they fuse (0: never);
    `megakernel="grid"`: each remaining run of launches becomes one cooperative kernel
    (`--megakernel grid`, docs/fusion-megakernel.md); `"counters"`: the same kernel with
    per-block dependence waits in place of its grid barriers."""
    options = Options(arch=arch, arrangement=arrangement, split_storage=split_storage,
                      wavefront=wavefront, unroll=unroll, megakernel=megakernel)
    result = pipeline.fuse(files, options, entry=entry,
                           flags=_flags(includes, defines, clang_flags), use_cache=use_cache,
                           progress=progress or (lambda _: None), argv=argv)
    return Fusion(result)


def analyze(*files: str | Path, arch: str = "sm_80", entry: str = "main",
            includes: Sequence[str] = (), defines: Sequence[str] = (),
            clang_flags: Sequence[str] = (), use_cache: bool = True,
            argv: Sequence[str] | None = None):
    """The UAR of a program: statements, dependences with their widths (`sirius analyze`)."""
    from sirius.analysis.program import analyze as _analyze

    return _analyze([Path(f) for f in files], entry, arch,
                    _flags(includes, defines, clang_flags), use_cache, argv=argv)


def inspect(*files: str | Path, arch: str = "sm_80", entry: str = "main",
            includes: Sequence[str] = (), defines: Sequence[str] = (),
            clang_flags: Sequence[str] = (), use_cache: bool = True,
            argv: Sequence[str] | None = None) -> dict:
    """The kernels and host model as the `sirius inspect --json` document."""
    from sirius.analysis.program import inspect_document

    return inspect_document(list(files), entry, arch, _flags(includes, defines, clang_flags),
                            use_cache, argv)


def run(*files: str | Path, arch: str = "sm_80", entry: str = "main", seed: int = 0,
        order: str = "forward", check_bounds: bool = False, inputs=None,
        includes: Sequence[str] = (), defines: Sequence[str] = (),
        clang_flags: Sequence[str] = (), use_cache: bool = True,
        argv: Sequence[str] | None = None):
    """Run a whole program on the CPU executor (`sirius run`); returns the RunResult."""
    from sirius.runtime.interpreter import run_program

    return run_program(list(files), entry=entry, arch=arch,
                       flags=_flags(includes, defines, clang_flags), seed=seed, order=order,
                       inputs=inputs, check_bounds=check_bounds, use_cache=use_cache,
                       argv=argv)
