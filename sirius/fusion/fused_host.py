"""The fused host program (sirius/fusion/rounds.py builds it after each code generation round):
the original host program with each region's launches replaced by the launches its groups
became (`group_launches`, keyed by (region index, group index)), and a host loop that now runs
inside its megakernel replaced by that one launch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sirius.analysis.host.model import HostProgram, Launch, Loop, Op
from sirius.fusion.plan.planner import Region

__all__ = ["rewrite_host"]


def rewrite_host(host: HostProgram, regions: list[Region],
                 group_launches: dict[tuple[int, int], list[Launch]],
                 device_looped: frozenset[int] = frozenset()) -> HostProgram:
    """The fused host program: each region's launches replaced by what it became; a loop in
    `device_looped` (ids of host loops that now run inside their megakernel) is replaced by
    the one launch its body (through the loops of a nest) became."""
    by_first = {r.body_key: ri for ri, r in enumerate(regions)}

    def body(ops: Sequence[Op]) -> tuple[Op, ...]:
        out: list[Op] = []
        skip = 0
        for op in ops:
            if skip:
                skip -= 1
                continue
            if isinstance(op, Launch) and id(op) in by_first:
                ri = by_first[id(op)]
                for gi in range(len(regions[ri].groups)):
                    out += group_launches[(ri, gi)]
                skip = len(regions[ri].nodes) - 1
            elif isinstance(op, Loop):
                inner = body(op.body)
                if id(op) in device_looped:  # the loop (nest) runs inside that megakernel
                    while len(inner) == 1 and isinstance(inner[0], Loop):
                        inner = inner[0].body
                    assert len(inner) == 1, "a device loop's body is one launch"
                    out.append(inner[0])
                else:
                    out.append(replace(op, body=inner))
            else:
                out.append(op)
        return tuple(out)

    return replace(host, ops=body(host.ops))
