"""The block dispatch of horizontal kernels (`codegen.dispatch`): for every block index of
the grid, walking the emitted branches must reach exactly the member whose block range holds
it (or `exit` when none does): by one `switch` in small grids, else in about log2(members)
compares."""

from __future__ import annotations

import re
from math import ceil, log2
from types import SimpleNamespace

import pytest

from sirius.fusion.codegen.dispatch import SWITCH_BLOCKS, dispatch

BR = re.compile(r"^  br i1 %(\S+), label %(\S+), label %(\S+)$")
JUMP = re.compile(r"^  br label %(\S+)$")
CMP = re.compile(r"^  %(\S+) = icmp (ult|uge) i32 %bid, (\d+)$")
AND = re.compile(r"^  %(\S+) = and i1 %(\S+), %(\S+)$")
SWITCH = re.compile(r"^  switch i32 %bid, label %(\S+) \[$")
CASE = re.compile(r"^    i32 (\d+), label %(\S+)$")


def walk(lines: list[str], bid: int) -> tuple[str, int]:
    """Where block `bid` ends (`m<i>` or `exit`), and how many compares it ran."""
    blocks: dict[str, list[str]] = {}
    label = "<start>"
    for line in lines:
        if line.endswith(":") and not line.startswith(" "):
            label = line[:-1]
            continue
        blocks.setdefault(label, []).append(line)
    at, compares = "<start>", 0
    while at in blocks:
        values: dict[str, bool] = {}
        body = blocks[at]
        if m := SWITCH.match(body[0]):
            cases = {int(c.group(1)): c.group(2) for c in map(CASE.match, body[1:-1])}
            assert body[-1] == "  ]" and len(cases) == len(body) - 2
            return cases.get(bid, m.group(1)), 1
        for line in body:
            if m := CMP.match(line):
                compares += 1
                v = int(m.group(3))
                values[m.group(1)] = bid < v if m.group(2) == "ult" else bid >= v
            elif m := AND.match(line):
                values[m.group(1)] = values[m.group(2)] and values[m.group(3)]
            elif m := BR.match(line):
                at = m.group(2) if values[m.group(1)] else m.group(3)
                break
            elif m := JUMP.match(line):
                at = m.group(1)
                break
            else:
                raise AssertionError(f"unexpected line {line!r}")
    return at, compares


@pytest.mark.parametrize("sizes,grid", [
    ([4, 2], 6), ([3], 3), ([3], 5), ([1] * 8, 8), ([2, 5, 1, 7, 3], 18), ([2, 5, 1, 7, 3], 30),
    ([4, 0, 4], 8), ([1] * 64, 64), ([20, 30], 50), ([40, 0, 40], 80), ([7] * 9, 70),
    ([33], 40), ([10, 20, 30, 40, 50], 150)])
def test_every_block_reaches_its_member(sizes: list[int], grid: int) -> None:
    firsts = [sum(sizes[:i]) for i in range(len(sizes))]
    members = [SimpleNamespace(index=i, first_block=f, blocks=n)
               for i, (f, n) in enumerate(zip(firsts, sizes, strict=True))]
    lines = dispatch(members, "%bid", grid)
    assert lines[0].startswith("  switch") == (grid <= SWITCH_BLOCKS)
    for bid in range(grid):
        want = next((f"m{i}" for i, (f, n) in enumerate(zip(firsts, sizes, strict=True))
                     if f <= bid < f + n), "exit")
        got, compares = walk(lines, bid)
        assert got == want, (bid, lines)
        # a balanced search: at most ceil(log2(members)) splits, plus one bound at a leaf
        assert compares <= ceil(log2(len(sizes))) + 2 if len(sizes) > 1 else compares <= 2
