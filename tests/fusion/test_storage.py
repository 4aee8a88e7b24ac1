"""split_storage: shared temp buffers of a memory planner split into one buffer per version.

Expected values come from the sources: buffer sizes from the cudaMalloc calls, the statements
from the order of the host code, the versions of a TVM storage from the tensors TVM's planner
put in it (the `tensors` of each temp in kernels/tvm/<model>.json, the same list as the
`// temp storage: alloc, ...` comment of the .cu). Correctness is differential: the original
and the split program run on the CPU executor with the same seeded inputs and must give
bitwise-equal outputs.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sirius.analysis.host.model import Alloc, BufferArg, DevRef, Free, HostProgram
from sirius.analysis.irview import build_view
from sirius.analysis.uar.build import UAR, build_uar
from sirius.fusion.plan.storage import (
    BufferSplit,
    StorageSplit,
    Version,
    apply_splits,
    split_storage,
)
from tests.helpers import by_size

ROOT = Path(__file__).resolve().parents[2]
TVM = ROOT / "kernels" / "tvm"
PROGRAMS = Path(__file__).resolve().parent / "storage_programs"


@dataclass(frozen=True)
class Analysed:
    program: object
    kernels: tuple
    host: HostProgram
    view: object
    uar: UAR

    def uar_of(self, host: HostProgram) -> UAR:
        return build_uar(self.view, list(self.kernels), host)


@functools.cache
def analysed(path: Path) -> Analysed:
    from sirius.analysis.program import analyse

    program, kernels, host = analyse([path])
    view = build_view(program.device_module)
    return Analysed(program, tuple(kernels), host, view, build_uar(view, kernels, host))


@functools.cache
def split(path: Path) -> StorageSplit:
    a = analysed(path)
    return split_storage(a.host, a.uar)


def run(a: Analysed, host: HostProgram, order: str = "forward", dtypes=None):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    return run_host_program(host, a.program, a.kernels, CpuDevice(order=order, seed=5), seed=5,
                            order=order, dtypes=dtypes)


def differing_outputs(a: Analysed, host: HostProgram, orders=("forward",)) -> set[str]:
    """The outputs of `host` (under any of `orders`) that differ from the original's."""
    ref = run(a, a.host)
    out: set[str] = set()
    for order in orders:
        got = run(a, host, order, ref.dtypes)
        out |= {n for n in ref.outputs() if not np.array_equal(got.final[n], ref.final[n])}
    return out


def launch_args(host: HostProgram) -> list[list[tuple[str, int]]]:
    return [[(a.address.buffer, a.address.offset.const) for a in launch.args
             if isinstance(a, BufferArg) and isinstance(a.address, DevRef)]
            for launch in host.launches()]


def between(uar: UAR, groups: list[set[str]]) -> list[tuple[str, str, str]]:
    """Dependences between statements of different groups."""
    where = {sid: i for i, g in enumerate(groups) for sid in g}
    return [(d.src, d.dst, d.kind) for d in uar.dependences
            if d.src in where and d.dst in where and where[d.src] != where[d.dst]]


# BERT's QKV subgraph --------------------------------------------------------------------------
QKV = TVM / "bert_qkv.cu"
# 7 H2D copies (x, then w and b of query, key, value) are S0-S6; then the launches, in source
# order: matmul Q, transpose Q, matmul K, transpose K, matmul V, transpose V.
BRANCHES = [{"S7", "S8"}, {"S9", "S10"}, {"S11", "S12"}]


def test_bert_qkv_versions():
    a, res = analysed(QKV), split(QKV)
    labels = [a.uar.statement(f"S{i}").label for i in range(7, 13)]
    assert labels == ["fused_matmul_add_kernel", "fused_reshape_transpose_kernel"] * 3
    (s,) = res.splits
    assert s.buffer == "d_storage0"
    assert s.names == ("d_storage0", "d_storage0.v1", "d_storage0.v2")
    assert [v.statements for v in s.versions] == [("S7", "S8"), ("S9", "S10"), ("S11", "S12")]
    # x [32, 64] @ w [64, 64]: 32 * 64 floats = 8192 bytes, all of d_storage0 (cudaMalloc 8192)
    assert [(v.bytes, v.base, v.size) for v in s.versions] == [((0, 8192), 0, 8192)] * 3
    assert res.extra_bytes == s.extra_bytes == 2 * 8192
    assert res.notes == ("d_storage0 [0, 8192): 3 versions -> d_storage0, d_storage0.v1, "
                         "d_storage0.v2: +16384 B",)
    # the launches of each version sit on source lines 1739-1744 of the .cu, two per version
    assert [[loc.line for loc in v.locs] for v in s.versions] == \
        [[1739, 1740], [1741, 1742], [1743, 1744]]


def test_bert_qkv_program():
    a, res = analysed(QKV), split(QKV)
    host = res.host
    old = {b.name: b for b in a.host.buffers}
    new = [b for b in host.buffers if b.name not in old]
    assert [(b.id, b.name, b.bytes, b.role) for b in new] == \
        [(11, "d_storage0.v1", 8192, "temp"), (12, "d_storage0.v2", 8192, "temp")]
    allocs = [op.buffer for op in host.ops if isinstance(op, Alloc)]
    i = allocs.index("d_storage0")
    assert allocs[i:i + 3] == ["d_storage0", "d_storage0.v1", "d_storage0.v2"]
    frees = [op.address.buffer for op in host.ops if isinstance(op, Free)]
    i = frees.index("d_storage0")
    assert frees[i:i + 3] == ["d_storage0", "d_storage0.v1", "d_storage0.v2"]
    params = {"q": "d_param_query", "k": "d_param_key", "v": "d_param_value"}
    want = []
    for storage, (name, p) in zip(("d_storage0", "d_storage0.v1", "d_storage0.v2"),
                                  params.items(), strict=True):
        want.append([(storage, 0), (f"{p}_b", 0), (f"{p}_w", 0), ("d_in_x", 0)])
        want.append([(f"d_out_{name}", 0), (storage, 0)])
    assert launch_args(host) == want
    # only arguments changed: kernels, shapes, locations are the original's
    for x, y in zip(a.host.launches(), host.launches(), strict=True):
        assert (x.mangled, x.grid, x.block, x.smem, x.loc) == (y.mangled, y.grid, y.block,
                                                               y.smem, y.loc)


def test_bert_qkv_branches_independent():
    a, res = analysed(QKV), split(QKV)
    # before: the K matmul overwrites what the Q transpose read (WAR) and the Q matmul wrote
    before = set(between(a.uar, BRANCHES))
    assert {("S8", "S9", "WAR"), ("S7", "S9", "WAW"), ("S10", "S11", "WAR"),
            ("S9", "S11", "WAW")} <= before
    # after: the branches share only read-only inputs (x, and nothing else)
    after = a.uar_of(res.host)
    assert between(after, BRANCHES) == []
    raw = {(d.src, d.dst, d.buffer) for d in after.dependences if d.kind == "RAW"
           and d.buffer and d.buffer.startswith("d_storage0")}
    assert raw == {("S7", "S8", "d_storage0"), ("S9", "S10", "d_storage0.v1"),
                   ("S11", "S12", "d_storage0.v2")}


def test_bert_qkv_executor():
    a, res = analysed(QKV), split(QKV)
    assert differing_outputs(a, res.host, ("forward", "reverse")) == set()
    ref = run(a, a.host)
    got = run(a, res.host, dtypes=ref.dtypes)
    assert ref.outputs() == ["d_out_q", "d_out_k", "d_out_v"]
    # the last version holds what the shared buffer held at the end (V's matmul)
    np.testing.assert_array_equal(got.final["d_storage0.v2"], ref.final["d_storage0"])


# a version at an offset -----------------------------------------------------------------------
def test_rebased_version():
    path = PROGRAMS / "rebased.cu"
    a, res = analysed(path), split(path)
    (s,) = res.splits
    assert s.versions == (
        Version(0, "d_t", ("S1", "S2"), s.versions[0].locs, (0, 8192), 0, 8192),
        Version(1, "d_t.v1", ("S3", "S4"), s.versions[1].locs, (4096, 8192), 4096, 4096),
    )
    assert [loc.line for v in s.versions for loc in v.locs] == [45, 46, 47, 48]
    assert res.extra_bytes == 4096
    assert launch_args(res.host) == [[("d_t", 0), ("d_x", 0)], [("d_o1", 0), ("d_t", 0)],
                                     [("d_t.v1", 0), ("d_x", 0)], [("d_o2", 0), ("d_t.v1", 0)]]
    assert res.host.buffer("d_t.v1").bytes == 4096
    assert between(a.uar, [{"S1", "S2"}, {"S3", "S4"}]) == [("S1", "S3", "WAW"),
                                                             ("S2", "S3", "WAR")]
    assert between(a.uar_of(res.host), [{"S1", "S2"}, {"S3", "S4"}]) == []
    assert differing_outputs(a, res.host, ("forward", "reverse")) == set()


# programs where a split would be wrong --------------------------------------------------------
UNSAFE = PROGRAMS / "unsafe.cu"


def test_unsafe_left_alone():
    a, res = analysed(UNSAFE), split(UNSAFE)
    assert res.host is a.host
    assert res.splits == () and res.extra_bytes == 0
    f = "tests/fusion/storage_programs/unsafe.cu"
    assert res.notes == (
        f"d_p: no new version at S3 (fill at {f}:84:9): S4 (pairsum at {f}:85:12) may read "
        "bytes written before it",
        "d_p: not split: one version",
        f"d_h: no new version at S6 (fill at {f}:88:9): S7 (copy_out at {f}:89:13) may read "
        "bytes written before it",
        "d_h: not split: one version",
        "d_r: not split: one version (no launch after the first writes it, surely, without "
        "reading it)",
        "d_g: not split: one version (no launch after the first writes it, surely, without "
        "reading it)",
        f"d_m: not split: used by a memset ({f}:102:5)",
        f"d_l: not split: passed to a launch in a host loop ({f}:106:13)",
    )


@pytest.mark.parametrize("buffer, first, last, broken", [
    ("d_p", 3, 4, "d_o2"),  # the upper half of d_p is the old value
    ("d_h", 6, 8, "d_o3"),  # copy_out reads d_h's old lower half
    ("d_r", 11, 12, "d_o6"),  # twice reads the old value
    ("d_g", 15, 16, "d_o8"),  # fill_positive keeps the old value where x <= 0
])
def test_unsafe_split_would_change_outputs(buffer, first, last, broken):
    """The splits split_storage refuses, forced: the executor sees the outputs change."""
    a = analysed(UNSAFE)
    size = a.host.buffer(buffer).bytes
    sids = tuple(f"S{i}" for i in range(first, last + 1))
    forced = BufferSplit(buffer, (Version(0, buffer, (), (), None, 0, size),
                                  Version(1, f"{buffer}.v1", sids, (), None, 0, size)))
    host = apply_splits(a.host, a.uar, [forced])
    assert differing_outputs(a, host) == {broken}


# the TVM corpus -------------------------------------------------------------------------------
MODELS = ["bert_qkv", "bert_layer", "mlp", "lstm", "seq2seq"]


@pytest.mark.parametrize("model", by_size(MODELS))  # bert_layer: make test-all
def test_tvm_versions_are_planner_tensors(model):
    """Each TVM storage splits into one version per tensor the planner put in it; no WAR or
    WAW remains on temps (every tensor of the dataflow graph has one producer); the split
    program computes what the original does."""
    path = TVM / f"{model}.cu"
    a, res = analysed(path), split(path)
    meta = json.loads((TVM / f"{model}.json").read_text())
    tensors = {b["name"]: len(b["tensors"]) for b in meta["buffers"] if b["role"] == "temp"}
    got = {s.buffer: len(s.versions) for s in res.splits}
    assert {name: got.get(name, 1) for name in tensors} == tensors
    assert res.extra_bytes == sum(s.extra_bytes for s in res.splits)
    for s in res.splits:
        size = a.host.buffer(s.buffer).bytes
        assert all(v.base == 0 and 0 < v.size <= size for v in s.versions)
        assert s.versions[0].size == size
        assert s.extra_bytes == sum(v.size for v in s.versions[1:])
        assert res.host.buffer(s.versions[-1].buffer).role == "temp"
    temps = {b.name for b in res.host.buffers if b.role == "temp"}
    if res.splits:
        after = a.uar_of(res.host)
        assert [d for d in after.dependences if d.kind in ("WAR", "WAW") and d.buffer in temps
                ] == []
    assert differing_outputs(a, res.host, ("forward", "reverse")) == set()


@pytest.mark.parametrize("model", ["lstm", "seq2seq"])
def test_tvm_only_arguments_renamed(model):
    """Launch for launch, the split program differs from the original only in the buffer
    arguments of the moved versions: a new buffer at offset - base."""
    path = TVM / f"{model}.cu"
    a, res = analysed(path), split(path)
    origin = {v.buffer: (s.buffer, v.base) for s in res.splits for v in s.versions[1:]}
    moved = 0
    for x, y in zip(a.host.launches(), res.host.launches(), strict=True):
        assert (x.mangled, x.grid, x.block, x.smem, x.loc) == (y.mangled, y.grid, y.block,
                                                               y.smem, y.loc)
        for ax, ay in zip(x.args, y.args, strict=True):
            if ax == ay:
                continue
            moved += 1
            buffer, base = origin[ay.address.buffer]
            assert (ax.address.buffer, ax.address.offset.const) == \
                (buffer, ay.address.offset.const + base)
    # every launch of a version k > 0 passes its buffer at least once
    assert moved >= sum(len(v.statements) for s in res.splits for v in s.versions[1:]) > 0


def test_only_named_buffers():
    path = TVM / "lstm.cu"
    a = analysed(path)
    res = split_storage(a.host, a.uar, buffers={"d_storage3"})
    assert [s.buffer for s in res.splits] == ["d_storage3"]
    # d_storage3 holds alloc3 and alloc18 (its comment in lstm.cu): two versions
    assert res.splits[0].names == ("d_storage3", "d_storage3.v1")


def test_wrong_uar_rejected():
    a, b = analysed(QKV), analysed(PROGRAMS / "rebased.cu")
    with pytest.raises(ValueError):
        split_storage(a.host, b.uar)
