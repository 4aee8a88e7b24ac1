"""Members of a fused kernel from the launches they replace: the fused parameter each member
parameter becomes (launches that pass the same value share one), and runs of launches of one
kernel whose arguments step by constants, which become one repeated member (docs/fusion-codegen.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from math import prod

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import BufferArg, DevRef, Launch, ScalarArg
from sirius.fusion.codegen.dispatch import SWITCH_BLOCKS
from sirius.fusion.spec import BLOCK, Member


def param_maps(members: Sequence[tuple[Member, Launch, Sequence[str]]]) -> list[Member]:
    """Members with parameter maps: member parameters that receive the same host value (and
    have the same IR type) share one fused parameter."""
    index: dict[tuple, int] = {}
    out = []
    for m, launch, types in members:
        pm = []
        for arg, ty in zip(launch.args, types, strict=True):
            key = (repr(arg), ty)
            if key not in index:
                index[key] = len(index)
            pm.append(index[key])
        out.append(replace(m, param_map=tuple(pm)))
    return out


def _steps(a: Launch, b: Launch, types: Sequence[str]) -> tuple[int, ...] | None:
    """What each argument of launch `b` adds to `a`'s, when every difference is a constant a
    repeated member can apply (bytes in one allocation for a pointer, a value for an integer);
    None otherwise."""
    out = []
    for x, y, ty in zip(a.args, b.args, types, strict=True):
        if x == y:
            out.append(0)
            continue
        if isinstance(x, BufferArg) and isinstance(y, BufferArg):
            if not (isinstance(x.address, DevRef) and isinstance(y.address, DevRef)
                    and x.address.buffer == y.address.buffer
                    and re.fullmatch(r"ptr( addrspace\(\d+\))?", ty)):
                return None
            d = y.address.offset - x.address.offset
        elif isinstance(x, ScalarArg) and isinstance(y, ScalarArg):
            if not (isinstance(x.value, Expr) and isinstance(y.value, Expr)
                    and x.type == y.type and re.fullmatch(r"i\d+", ty)):
                return None
            d = y.value - x.value
        else:
            return None
        if not d.is_const:
            return None
        out.append(d.const)
    return tuple(out)


REPEAT_MIN = 9  # a run of fewer launches stays members of their own (see _worth_repeating)


def _worth_repeating(n: int, m: Member) -> bool:
    """Whether a run of `n` launches of `m` becomes one repeated member: when it is long
    (`REPEAT_MIN` or more: the fused kernel would hold that many copies of the code) or its
    blocks are more than a `switch` dispatches. A short run in a small grid stays separate:
    a block finds its member with one switch, and host-constants specialises each member's
    arguments, where a repeated member computes them in every thread (measured on
    row_views.cu, 6 rows of 3 blocks: 1.059 of the original's instructions as 6 members,
    1.706 as one repeated member)."""
    return n >= REPEAT_MIN or n * prod(m.grid) > SWITCH_BLOCKS


def repeat_runs(entries: Sequence[tuple[Member, Launch, Sequence[str]]]
                ) -> list[tuple[Member, Launch, Sequence[str]]]:
    """Horizontal members, with every run of launches of one kernel and shape whose arguments
    step by constants (a host loop's iterations: the k-th launch's argument i is the first's
    plus k * stride_i) made one repeated member where that pays (`_worth_repeating`): its code
    is in the fused kernel once, and each block computes its repetition and arguments, instead
    of finding its member among many."""
    out: list[tuple[Member, Launch, Sequence[str]]] = []
    i = 0
    while i < len(entries):
        m, launch, types = entries[i]
        j, steps = i + 1, None
        if m.mapping == BLOCK and m.blocks is None and m.repeat == 1 and not m.barrier_before:
            while j < len(entries):
                m2, l2, t2 = entries[j]
                s = _steps(launch, l2, types) if (m2 == m and list(t2) == list(types)) else None
                if s is None or (steps is None and not any(s)):
                    break
                k = j - i
                if steps is None:
                    steps = s
                elif s != tuple(k * x for x in steps):
                    break
                j += 1
        if steps is None or not _worth_repeating(j - i, m):
            out.append(entries[i])
            i += 1
            continue
        out.append((replace(m, repeat=j - i, strides=steps), launch, types))
        i = j
    return out


def overlay_shared(members: list[Member], nodes: list) -> tuple[list[Member], bool | None]:
    """`--smem overlay` for one vertical kernel: where two or more of its members use shared
    memory, they overlay it (the fused block needs the largest member's, not the sum), and a
    block barrier goes before each such member that follows another with no barrier between
    (the one before may still read what this one overwrites). A barrier between members at
    the top of the fused kernel only adds order, so the kernel stays correct; what it costs
    (one more barrier per block) against what it saves (shared memory, hence occupancy) is the
    tuner's question. Returns the members and `share_smem` (None: nothing to overlay)."""
    users = [i for i, n in enumerate(nodes) if n.smem or n.static_smem]
    if len(users) < 2:
        return members, None
    out = list(members)
    for prev, cur in zip(users, users[1:], strict=False):
        if not any(out[k].barrier_before for k in range(prev + 1, cur + 1)):
            out[cur] = replace(out[cur], barrier_before=True)
    return out, True
