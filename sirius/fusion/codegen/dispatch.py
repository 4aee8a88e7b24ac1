"""How a block of a horizontal kernel finds its member (sirius/fusion/codegen/assemble.py): the
members hold consecutive block ranges `[first_block, first_block + blocks)` of a 1-D grid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

SWITCH_BLOCKS = 32  # horizontal grids up to this many blocks dispatch by a switch


class Placed(Protocol):
    index: int
    first_block: int
    blocks: int


def dispatch(members: Sequence[Placed], block: str, blocks: int) -> list[str]:
    """A horizontal kernel's dispatch: a balanced binary search of the block index over the
    members' block ranges (in increasing order), so a block finds its member in about
    log2(members) compares; a block in no member's range goes to `exit`. Each leaf checks
    only the bounds its path (and the grid's `blocks`) have not already established. A grid of
    at most `SWITCH_BLOCKS` blocks gets a `switch` on the block index instead (LLVM lowers it
    to a jump table or its own search; it makes that switch of the compares itself when every
    member has one block)."""
    if blocks <= SWITCH_BLOCKS:
        cases = [f"    i32 {b}, label %m{pm.index}" for pm in members
                 for b in range(pm.first_block, min(pm.first_block + pm.blocks, blocks))]
        return [f"  switch i32 {block}, label %exit [", *cases, "  ]"]
    out: list[str] = []
    counter = iter(range(1 << 30))

    def target(lo: int, hi: int, low: int, high: int) -> str:
        """The label that sends the blocks in [low, high) to their member of members[lo:hi]
        (emitting its code)."""
        if hi - lo == 1:
            pm = members[lo]
            first, end = pm.first_block, pm.first_block + pm.blocks
            checks = ([f"icmp uge i32 {block}, {first}"] if low < first else []) + \
                     ([f"icmp ult i32 {block}, {end}"] if high > end else [])
            if not checks:
                return f"m{pm.index}"
            label = f"d{next(counter)}"
            out.append(f"{label}:")
            for k, c in enumerate(checks):
                out.append(f"  %{label}.c{k} = {c}")
            cond = f"%{label}.c0"
            if len(checks) == 2:
                out.append(f"  %{label}.in = and i1 %{label}.c0, %{label}.c1")
                cond = f"%{label}.in"
            out.append(f"  br i1 {cond}, label %m{pm.index}, label %exit")
            return label
        mid = (lo + hi) // 2
        split = members[mid].first_block
        label = f"d{next(counter)}"
        at = len(out)
        left, right = target(lo, mid, low, split), target(mid, hi, split, high)
        out[at:at] = [f"{label}:", f"  %{label}.lt = icmp ult i32 {block}, {split}",
                      f"  br i1 %{label}.lt, label %{left}, label %{right}"]
        return label

    if not members:
        return ["  br label %exit"]
    return [f"  br label %{target(0, len(members), 0, blocks)}", *out]
