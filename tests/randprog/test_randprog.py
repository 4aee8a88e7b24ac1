"""Random whole CUDA programs (tests/randprog/generator.py) through `sirius inspect` and the CPU
executor, each compared with its numpy reference.

For every program: the host model must have the generated launches (static count, and the
executed kernel sequence with loops unrolled) and the generated buffers and roles; every
buffer's final contents must equal the reference computed from the inputs the executor used
(`RunResult.initial`) within the float32 error bound of approx.py: gamma(D) * M per element, where
D counts the roundings on the longest path to the element and M is the element's value with every
input and intermediate replaced by its magnitude. The bound holds for any summation order and
with or without fused multiply-adds, so it needs no knowledge of how a kernel reduces; tanhf and
expf are allowed 4 and 6 ulps. A wrong value (a missed barrier, a wrong index, a lost launch) is
off by about the size of the values, far above gamma(D) ~ D * 6e-8.

A failing seed reproduces with `python scripts/fuzz.py --seed S --count 1`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.randprog.check import check_program
from tests.randprog.generator import (
    Builder,
    Features,
    SeedChooser,
    extras_chooser,
    generate,
    programs,
)
from tests.randprog.kernels import Elementwise, Matmul, Reduce, Stencil, Transpose
from tests.randprog.pointers import SetPtrs
from tests.randprog.program import Call, DevCopy, HostLoop, HostTable, RandomProgram, Sync

SEEDS = range(30)


def _order(seed: int) -> str:
    """Block and thread order of the run: the programs are race-free, so any order must give
    the reference (a generator that emitted a race would show here)."""
    return ("forward", "reverse", f"random:{seed}")[seed % 3]


# make test-all: in make test, test_fuse_random.py's test_fused_program runs these seeds (and 70
# more) and checks the fused program against this same numpy reference and against the
# original in three orders
@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_random_program(seed: int, tmp_path) -> None:
    prog = generate(seed)
    order = _order(seed)
    out = check_program(prog, tmp_path, seed=seed, order=order)
    flag = "" if order == "forward" else f" --order {order}"
    assert out.ok, "\n".join([prog.summary, *out.problems,
                              f"reproduce: python scripts/fuzz.py --seed {seed} --count 1{flag}"])


def test_generate_is_reproducible() -> None:
    assert generate(7).source == generate(7).source
    assert generate(7).source != generate(8).source


def _features(prog: RandomProgram) -> Counter:
    """What a program exercises, by construct."""
    f: Counter = Counter()
    for s in prog.steps:
        if isinstance(s, HostLoop):
            strided = any(p.strides for c in s.calls() for p in c.ptrs)
            nested = any(isinstance(b, HostLoop) for b in s.body)
            f["loop.pingpong" if s.swap else "loop.nest" if nested else "loop.slices"
              if strided else "loop.inplace"] += 1
        elif isinstance(s, DevCopy):
            f["copy.d2d"] += 1
        elif isinstance(s, Sync):
            f["sync"] += 1
    for c in prog.calls():
        op = c.op
        if isinstance(op, Elementwise):
            f[f"map.{op.layout}"] += 1
            f["map.binary" if op.binary else "map.unary"] += 1
            f["map.inplace"] += op.inplace
            f[f"map.bias.{op.bias}"] += bool(op.bias)
        elif isinstance(op, Stencil):
            f["stencil.2d" if op.rows > 1 else "stencil.1d"] += 1
        elif isinstance(op, Transpose):
            f["transpose.tiled" if op.tile else "transpose.naive"] += 1
        elif isinstance(op, Matmul):
            f["matmul.tiled" if op.tile else "matmul.naive"] += 1
        elif isinstance(op, Reduce):
            f["reduce.tree" if op.tree else "reduce.shuffle"] += 1
            f["reduce.rows" if op.per_row else "reduce.partial"] += 1
            f["reduce.dynamic_smem"] += op.dynamic
        if op.grid[1] > 1 or op.block[1] > 1:
            f["launch.2d"] += 1
    # DAG shapes: a value read by two launches (a fork), and a launch whose two operands derive
    # from one earlier launch (a diamond); pointer swaps are ignored, which is enough here
    deps: dict[str, frozenset[int]] = {}
    readers: Counter = Counter()
    for k, c in enumerate(prog.calls()):
        ins = [deps.get(p.var, frozenset()) for p, slot in zip(c.ptrs, c.op.slots, strict=True)
               if "r" in slot.mode]
        for p, slot in zip(c.ptrs, c.op.slots, strict=True):
            readers[p.var] += "r" in slot.mode
        f["dag.diamond"] += len(ins) == 2 and bool(ins[0] & ins[1])
        mine = frozenset({k}).union(*ins)
        for p, slot in zip(c.ptrs, c.op.slots, strict=True):
            if "w" in slot.mode:
                deps[p.var] = mine
    f["dag.fork"] += any(n > 1 for n in readers.values())
    f["dag.multi_output"] += len(prog.outputs) > 1
    return f


def test_seeds_cover_every_construct() -> None:
    """The programs the suite runs exercise every kernel kind, layout and host-loop pattern."""
    total: Counter = Counter()
    for seed in SEEDS:
        total += _features(generate(seed))
    want = {"loop.pingpong", "loop.slices", "loop.inplace", "loop.nest", "map.1d", "map.stride",
            "map.2d", "map.binary", "map.unary", "map.inplace", "map.bias.col", "map.bias.row",
            "stencil.1d", "stencil.2d", "transpose.tiled", "transpose.naive", "matmul.tiled",
            "matmul.naive", "reduce.tree", "reduce.shuffle", "reduce.rows", "reduce.partial",
            "reduce.dynamic_smem", "copy.d2d", "sync", "launch.2d", "dag.fork", "dag.diamond",
            "dag.multi_output"}
    missing = sorted(k for k in want if not total[k])
    assert not missing, f"constructs no seed in {SEEDS} generates: {missing}"


def test_partial_blocks_are_common() -> None:
    """Most programs launch a grid whose last block is partly outside the data."""
    def partial(prog: RandomProgram) -> bool:
        for c in prog.calls():
            g, b = c.op.grid, c.op.block
            if g[0] * g[1] * b[0] * b[1] > max(slot.elems for slot in c.op.slots):
                return True
        return False
    assert sum(partial(generate(s)) for s in SEEDS) >= len(SEEDS) // 2


def test_reference_catches_a_wrong_value(tmp_path) -> None:
    """Through the public entry points (`inspect_document`, `run_program`, which check_program
    shares the internals of); the comparison is sharp: one element off by 1e-4 relative is
    reported, and only it."""
    from sirius.analysis.program import inspect_document
    from sirius.runtime.interpreter import run_program

    prog = generate(3)
    path = prog.write(tmp_path)
    doc = inspect_document([path])
    assert sorted(k["name"] for k in doc["kernels"]) == sorted(prog.kernels)
    r = run_program([path], seed=3)
    assert len(r.launches) == prog.dynamic_launches
    assert prog.mismatches(r.initial, r.final) == []
    name = prog.outputs[0]
    final = dict(r.final)
    bad = final[name].copy()
    bad[0] = np.float32(bad[0] * (1 + 1e-4) + 1e-4)
    final[name] = bad
    found = prog.mismatches(r.initial, final)
    assert [(m.buffer, m.index, m.count) for m in found] == [(name, 0, 1)]


@settings(max_examples=40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_steps=6))
def test_strategy_programs_are_well_formed(prog: RandomProgram) -> None:
    """Programs drawn by hypothesis: every kernel is defined and launched, buffers are used,
    and the reference on random inputs is finite with finite bounds (no overflow by design)."""
    for k in prog.kernels:
        assert f"__global__ void {k}(" in prog.source
    assert set(prog.launch_sequence()) == set(prog.kernels)
    assert prog.outputs and all(prog.buffer(o).role == "output" for o in prog.outputs)
    rng = np.random.default_rng(0)
    initial = {b.name: (rng.random(b.elems) * 2 - 1).astype(np.float32) for b in prog.buffers}
    for name, a in prog.expected(initial).items():
        assert np.isfinite(a.value).all() and np.isfinite(a.tolerance()).all(), name
        assert (a.tolerance() < 1e-3 * np.maximum(1.0, a.mag)).all(), name


# no shrinking here: each example costs a compile and a run (the failure prints the source)
@settings(max_examples=3, derandomize=True, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(programs(max_steps=4))
def test_strategy_programs_run(tmp_path_factory, prog: RandomProgram) -> None:
    out = check_program(prog, tmp_path_factory.mktemp("hyp"), seed=1)
    assert out.ok, "\n".join([prog.source, *out.problems])


# ---- the constructs of issue 12 (extras.py) --------------------------------------------------
def _extras(prog: RandomProgram) -> set[str]:
    """The constructs of issue 12 a program uses."""
    f: set[str] = set()
    for st in prog.steps:
        f |= {"host_table"} if isinstance(st, HostTable) else set()
    for c in prog.calls():
        op = c.op
        if isinstance(op, SetPtrs):
            f.add("setp.gptr" if op.target else "setp.table")
            f |= {"setp.fn"} if op.mem == "fn" else set()
        for p, slot in zip(c.ptrs, op.slots, strict=True):
            if p.via:
                f.add(f"{p.via}.{'write' if 'w' in slot.mode else 'read'}")
            f |= {"ptr.arith"} if p.via in ("table", "gptr") and p.offset else set()
        if isinstance(op, Elementwise):
            f |= {f"mem.{op.mem}"} if op.mem else set()
            f |= {"side"} if op.side >= 0 else set()
            f |= {"rev"} if op.rev else set()
            f |= {"bias.one"} if op.bias == "one" else set()
    f |= {"global.scalar"} if any(g.scalar and g.dtype == "float" for g in prog.globals) else set()
    f |= {"global.array"} if any(not g.scalar for g in prog.globals) else set()
    return f


EXTRAS = ("setp.table", "setp.gptr", "setp.fn", "table.read", "table.write", "gptr.read",
          "gptr.write", "global.read", "global.write", "global.scalar", "global.array",
          "ptr.arith", "mem.fn", "mem.gfn", "mem.asm", "side", "rev", "bias.one",
          "host_table")


def test_extras_are_common_but_not_everywhere() -> None:
    """Over 1000 seeds (`make fuzz`), every construct of issue 12 is in at least 20 programs,
    and between a quarter and a half of the programs use any of them (the others keep the
    old constructs' coverage). Each can be turned off."""
    seen: Counter = Counter()
    used = 0
    for seed in range(1000):
        f = _extras(generate(seed))
        used += bool(f)
        seen.update(f)
    rare = {k: seen[k] for k in EXTRAS if seen[k] < 20}
    assert not rare, f"constructs in fewer than 20 of 1000 programs: {rare}"
    assert 250 <= used <= 500, used
    neither = Counter()
    for seed in range(300):
        neither.update(_extras(generate(seed, features=Features.parse("-host-tables,-asm"))))
    assert not neither["host_table"] and not neither["mem.asm"], neither
    assert neither["mem.fn"] >= 10, neither


def test_programs_without_extras_are_unchanged() -> None:
    """Whether a program uses the constructs of issue 12 is drawn from a stream of its own: a
    seed whose program uses none gives the program the generator gives with them all off (the
    program it made before they existed)."""
    plain = Features.parse("none")
    same = 0
    for seed in range(60):
        b = Builder(SeedChooser(seed), 8, Features(), extras_chooser(seed))
        if not b.extras:
            assert generate(seed).source == generate(seed, features=plain).source, seed
            same += 1
    assert same >= 20


def test_features_parse() -> None:
    f = Features.parse("+host-tables,-globals,-asm,percent=70")
    assert (f.host_tables, f.globals, f.asm_stores, f.percent) == (True, False, False, 70)
    assert Features.parse(f.spec()) == f and Features.parse("default").spec() == ""
    assert not Features.parse("none").constructs()
    with pytest.raises(ValueError, match="unknown feature"):
        Features.parse("+tables")


def _first_seed_with(construct: str) -> int:
    return next(s for s in range(1000) if construct in _extras(generate(s)))


@pytest.mark.parametrize("construct", ["table.read", "table.write", "gptr.read", "ptr.arith",
                                       "global.scalar", "mem.gfn", "mem.fn", "setp.fn",
                                       "host_table"])
def test_extras_program_runs_to_its_reference(construct: str, tmp_path) -> None:
    """A program with each construct runs on the CPU executor (the original, unfused) to the
    values of its numpy reference, which follows the pointers the program stores."""
    seed = _first_seed_with(construct)
    prog = generate(seed)
    out = check_program(prog, tmp_path, seed=seed, order="reverse")
    assert out.ok, "\n".join([prog.summary, *out.problems,
                              f"reproduce: python scripts/fuzz.py --seed {seed} --count 1 "
                              "--order reverse"])


def test_reference_follows_the_table(tmp_path) -> None:
    """The reference reads a buffer reached through a pointer table where the table points:
    a table entry made to point elsewhere makes it differ from the executor's run."""
    from dataclasses import replace

    from sirius.runtime.interpreter import run_program

    def device_filled_table(prog):
        """(step index, step) of a one-thread launch filling a table that a launch reads
        through (host-filled tables are not launches)."""
        return next(((k, s) for k, s in enumerate(prog.steps) if isinstance(s, Call)
                     and isinstance(s.op, SetPtrs) and not s.op.target
                     and any(p.via == "table" and p.var == s.ptrs[0].var
                             for c in prog.calls() for p in c.ptrs)), None)

    prog = next(g for g in (generate(s) for s in range(1000)) if device_filled_table(g))
    seed = prog.seed
    r = run_program([prog.write(tmp_path)], seed=seed)
    assert prog.mismatches(r.initial, r.final) == []
    steps = list(prog.steps)
    k, setp = device_filled_table(prog)
    others = [b.name for b in prog.float_buffers() if b.elems >= max(
        prog.buffer(p.var).elems for p in setp.ptrs[1:])]
    wrong = next(n for n in others if all(n != p.var for p in setp.ptrs[1:]))
    steps[k] = replace(setp, ptrs=(setp.ptrs[0],) + tuple(replace(p, var=wrong)
                                                          for p in setp.ptrs[1:]))
    assert replace(prog, steps=tuple(steps)).mismatches(r.initial, r.final)
