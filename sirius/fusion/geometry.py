"""Which fused-kernel thread runs which member instance: id expressions, guards, thread sets.

All quantities are quasi-affine `Expr`s over the fused kernel's variables: `block` (linear block
id, relative to the member's block range), `thread` (linear thread id within the block) and the
raw ids `bx by bz tx ty tz`. A member instance runs when all six of its ids fall inside its
launch's grid and block; the checks interval arithmetic proves always true are dropped, the rest
form the member's guard, split into conditions on block variables only (uniform across a block)
and conditions that involve thread variables (threads of one block may differ: the member is
then "partial" and its barriers must be counted ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from sirius.analysis.expr import Expr
from sirius.fusion.spec import BLOCK_VARS, THREAD_VARS, Dim3, Member

_T = Expr.var("thread")
_B = Expr.var("block")


def delinearize(lin: Expr, dims: Dim3) -> tuple[Expr, Expr, Expr]:
    """(x, y, z) of linear index `lin` in `dims`, x fastest. The highest dimension that is not
    1 takes the quotient unreduced (its bound check catches indices past the end)."""
    out: list[Expr] = []
    rest = lin
    for i, d in enumerate(dims):
        if all(x == 1 for x in dims[i + 1:]):
            out.append(rest)
            rest = Expr(0)
        else:
            out.append(rest.mod(d))
            rest = rest.floordiv(d)
    return out[0], out[1], out[2]


def member_ids(member: Member, fused_threads: int) -> tuple[Expr, ...]:
    """(bx, by, bz, tx, ty, tz) of the member instance that fused thread (`block`, `thread`)
    runs, before the guard. A map that runs several instances per thread has no single answer
    (ValueError; `member_id_sets`)."""
    kind = member.mapping.kind
    if kind == "custom":
        if member.mapping.reps:
            raise ValueError(f"{member.kernel} runs {len(member.mapping.reps)} instances per "
                             "fused thread (a permutation re-indexed map)")
        return member.mapping.ids
    if kind == "block":
        blk, thr = _B, _T
    else:
        g = _B.scale(fused_threads) + _T
        blk, thr = g.floordiv(member.threads), g.mod(member.threads)
    return delinearize(blk, member.grid) + delinearize(thr, member.block)


def member_id_sets(member: Member, fused_threads: int) -> tuple[tuple[Expr, ...], ...]:
    """The ids of every instance fused thread (`block`, `thread`) runs, in order (one tuple
    unless the map is a multi-instance custom map)."""
    if member.mapping.kind == "custom":
        return member.mapping.instances
    return (member_ids(member, fused_threads),)


def variable_ranges(block: Dim3, grid: Dim3, range_blocks: int) -> dict[str, tuple[int, int]]:
    """Inclusive ranges of the fused kernel's variables (for a member with `range_blocks`
    blocks in its range)."""
    return {"thread": (0, prod(block) - 1), "block": (0, range_blocks - 1),
            "tx": (0, block[0] - 1), "ty": (0, block[1] - 1), "tz": (0, block[2] - 1),
            "bx": (0, grid[0] - 1), "by": (0, grid[1] - 1), "bz": (0, grid[2] - 1)}


@dataclass(frozen=True, slots=True)
class Check:
    """`0 <= expr` (when `lower`) and `expr < bound` (when `upper`)."""

    expr: Expr
    bound: int
    lower: bool
    upper: bool

    def holds(self, env: dict[str, int]) -> bool:
        v = self.expr.evaluate(env)
        return (not self.lower or v >= 0) and (not self.upper or v < self.bound)


@dataclass(frozen=True, slots=True)
class Guard:
    block_checks: tuple[Check, ...]
    thread_checks: tuple[Check, ...]  # involve thread variables

    @property
    def thread_checks_use_blocks(self) -> bool:
        return any(c.expr.variables() & BLOCK_VARS for c in self.thread_checks)


class EmptyMember(ValueError):
    """A member whose map puts some id always outside its launch (it would never run)."""


def guard(ids: tuple[Expr, ...], member: Member, ranges: dict[str, tuple[int, int]]) -> Guard:
    dims = member.grid + member.block
    blocks: list[Check] = []
    threads: list[Check] = []
    for name, e, d in zip(("bx", "by", "bz", "tx", "ty", "tz"), ids, dims, strict=True):
        b = e.bounds(ranges)
        if b is not None and (b[1] < 0 or b[0] >= d):
            raise EmptyMember(f"{name} = {e} lies in [{b[0]}, {b[1]}], outside [0, {d})")
        lower = b is None or b[0] < 0
        upper = b is None or b[1] >= d
        if not (lower or upper):
            continue
        c = Check(e, d, lower, upper)
        (threads if e.variables() & THREAD_VARS else blocks).append(c)
    return Guard(tuple(blocks), tuple(threads))


def thread_env(t: int, block: Dim3) -> dict[str, int]:
    return {"thread": t, "tx": t % block[0], "ty": t // block[0] % block[1],
            "tz": t // (block[0] * block[1])}


def active_threads(g: Guard, block: Dim3) -> list[bool]:
    """For each linear thread of a fused block: whether it passes the thread checks (which must
    not involve block variables)."""
    return [all(c.holds(thread_env(t, block)) for c in g.thread_checks)
            for t in range(prod(block))]


def whole_warps(active: list[bool], warp: int = 32) -> bool:
    """Whether the active threads make up whole warps (each warp all in or all out)."""
    return all(len(set(active[w:w + warp])) == 1 for w in range(0, len(active), warp))
