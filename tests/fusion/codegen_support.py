"""Shared by the code generator's tests: load a program, replace launches by a fused one, run the
original and the fused program on the CPU executor with the same seeded inputs."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from sirius.analysis.host.model import HostProgram, Launch, Loop
from sirius.fusion.spec import FusedModule, Member, ThreadMap

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
PROGRAMS = Path(__file__).resolve().parent / "codegen_programs"
ORDERS = ("forward", "reverse", "random:1")


@dataclass(frozen=True)
class Loaded:
    program: object  # sirius.frontend.program.Program
    kernels: tuple
    host: HostProgram

    @property
    def launches(self) -> list[Launch]:
        return self.host.launches()

    def member(self, index: int, **kw) -> Member:
        """A Member for launch `index` of the host program (constant shape)."""
        launch = self.launches[index]
        grid = tuple(e.const for e in launch.grid)
        block = tuple(e.const for e in launch.block)
        return Member(launch.mangled, grid, block, launch.smem.const, **kw)  # type: ignore[arg-type]


@functools.cache
def load(path: Path) -> Loaded:
    from sirius.analysis.program import analyse

    program, kernels, host = analyse([path])
    return Loaded(program, tuple(kernels), host)


def corpus(name: str) -> Loaded:
    return load(KERNELS / name)


@dataclass(frozen=True)
class ProgramLike:
    """What `run_host_program` needs of a program: the device IR and where it came from."""

    device_ir: str
    device_module: object
    files: tuple


def with_module(loaded: Loaded, fused: FusedModule) -> ProgramLike:
    return ProgramLike(fused.text, llvm.parse_assembly(fused.text), loaded.program.files)


def replace_launches(host: HostProgram, indices: Sequence[int], new: Launch) -> HostProgram:
    """`host` with the launches `indices` (top level, no host loops) replaced by `new`, placed
    where the first of them was."""
    assert not any(isinstance(op, Loop) for op in host.ops), "test programs have no host loops"
    order = host.launches()
    targets = {id(order[i]) for i in indices}
    first = id(order[min(indices)])
    ops = []
    for op in host.ops:
        if id(op) in targets:
            if id(op) == first:
                ops.append(new)
            continue
        ops.append(op)
    return dataclasses.replace(host, ops=tuple(ops))


def run(host: HostProgram, program, loaded: Loaded, order: str = "forward", seed: int = 7,
        dtypes=None):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    dev = CpuDevice(order=order, seed=seed)
    return run_host_program(host, program, loaded.kernels, dev, seed=seed, order=order,
                            dtypes=dtypes)


def fused_program(loaded: Loaded, fused: FusedModule, indices: Sequence[int],
                  kernel: str | None = None) -> HostProgram:
    k = fused.kernels[0] if kernel is None else fused.kernel(kernel)
    new = k.launch([loaded.launches[i] for i in indices])
    return replace_launches(loaded.host, indices, new)


def check_same(loaded: Loaded, fused: FusedModule, host: HostProgram,
               orders: Sequence[str] = ORDERS, seed: int = 7) -> dict[str, np.ndarray]:
    """Run the original (forward) and the fused program under every order; every buffer must be
    bitwise equal. Returns the original's final buffers."""
    ref = run(loaded.host, loaded.program, loaded, "forward", seed)
    prog = with_module(loaded, fused)
    for order in orders:
        got = run(host, prog, loaded, order, seed, dtypes=ref.dtypes)
        assert len(got.launches) < len(ref.launches)
        for name, want in ref.final.items():
            np.testing.assert_array_equal(got.final[name], want,
                                          err_msg=f"buffer {name}, order {order}")
    return ref.final


def transposed_tile_map(tile: int, grid_x: int, n: int, consumer_threads: int) -> ThreadMap:
    """A custom map running an elementwise consumer (block of `consumer_threads`, element
    i = blockIdx.x*blockDim.x + threadIdx.x) in the threads of a tiled 2-D producer run with
    the block map on a 1-D fused block of tile*tile threads: fused thread t of block b handles
    element (row = by*tile + t % tile, col = bx*tile + t / tile) of an n-column matrix, the
    transpose of the element the producer's thread wrote within the tile."""
    from sirius.analysis.expr import Expr

    t, b = Expr.var("thread"), Expr.var("block")
    bx, by = b.mod(grid_x), b.floordiv(grid_x)
    row = by.scale(tile) + t.mod(tile)
    col = bx.scale(tile) + t.floordiv(tile)
    e = row.scale(n) + col
    return ThreadMap.custom(bx=e.floordiv(consumer_threads), tx=e.mod(consumer_threads))


def tile_map(tile: int, grid_x: int, n: int, consumer_threads: int) -> ThreadMap:
    """Like `transposed_tile_map`, but each thread takes the element its producer thread wrote
    (row = by*tile + t / tile, col = bx*tile + t % tile)."""
    from sirius.analysis.expr import Expr

    t, b = Expr.var("thread"), Expr.var("block")
    bx, by = b.mod(grid_x), b.floordiv(grid_x)
    e = (by.scale(tile) + t.floordiv(tile)).scale(n) + bx.scale(tile) + t.mod(tile)
    return ThreadMap.custom(bx=e.floordiv(consumer_threads), tx=e.mod(consumer_threads))
