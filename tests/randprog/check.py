"""Run a random program through sirius and compare with its reference: what the tests and
scripts/fuzz.py do for each program.

`check_program` writes the program, checks that `sirius inspect` accepts it with the launches,
buffers and roles that were generated, runs it on the CPU executor and compares every buffer's
final contents with the reference computed from the inputs the executor used (within the float32
error bound of approx.py). It returns a list of problems (empty: the program passed).

It analyses the program once and builds the `inspect --json` document and the run from that
analysis, as `sirius.cli.inspect_document` and `sirius.runtime.interpreter.run_program` do
(calling both would extract the program twice: a third of the time of a small program).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.randprog.program import RandomProgram


@dataclass
class Outcome:
    path: Path
    problems: list[str] = field(default_factory=list)
    instructions: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _count_launches(ops: list[dict]) -> int:
    n = 0
    for op in ops:
        if op["op"] == "launch":
            n += 1
        elif op["op"] == "loop":
            n += _count_launches(op["body"])
    return n


def check_program(prog: RandomProgram, directory: Path, seed: int = 0,
                  order: str = "forward", jobs: int | None = 1) -> Outcome:
    from sirius.analysis.kernel.facts import kernel_to_json
    from sirius.analysis.program import analyse
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    path = prog.write(directory)
    out = Outcome(path)
    program, kernels, host_program = analyse([path])
    doc = {"kernels": [kernel_to_json(k) for k in kernels], "host": host_program.to_json()}
    host = doc["host"]
    got = _count_launches(host["ops"])
    if got != prog.static_launches:
        out.problems.append(f"host model has {got} launches, generated {prog.static_launches}")
    roles = {b["name"]: b["role"] for b in host["buffers"]}
    want = {b.name: b.role for b in prog.buffers}
    if roles != want:
        out.problems.append(f"host model buffers/roles {roles}, generated {want}")
    facts = {k["name"]: k for k in doc["kernels"]}
    for c in prog.calls():
        k, op = facts.get(c.kernel), c.op
        if k is None:
            out.problems.append(f"kernel {c.kernel} missing from the kernel facts")
            continue
        seen = (k["barriers"], k["static_smem_bytes"], bool(k["warp_ops"]))
        if seen != (op.barriers, op.static_smem, op.warp_ops):
            out.problems.append(f"kernel {c.kernel}: (barriers, static smem, warp ops) {seen}, "
                                f"generated {(op.barriers, op.static_smem, op.warp_ops)}")
    if out.problems:
        return out
    device = CpuDevice(order=order, seed=seed, jobs=jobs)
    r = run_host_program(host_program, program, kernels, device, seed=seed, order=order)
    out.seconds = r.seconds
    out.instructions = sum(rec.stats.instructions for rec in r.launches)
    seq = [rec.stats.kernel for rec in r.launches]
    if seq != prog.launch_sequence():
        out.problems.append(f"executed launches {seq}, generated {prog.launch_sequence()}")
        return out
    for m in prog.mismatches(r.initial, r.final):
        out.problems.append(f"mismatch {m}")
    return out
