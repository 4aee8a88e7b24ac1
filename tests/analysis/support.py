"""Shared helpers of the UAR tests: analyse a program once, name its statements by role."""

from __future__ import annotations

import functools
from pathlib import Path

from sirius.analysis.program import analyze
from sirius.analysis.uar.build import UAR

ROOT = Path(__file__).resolve().parent.parent.parent
KERNELS = ROOT / "kernels"
PROGRAMS = Path(__file__).resolve().parent / "programs"


@functools.cache
def uar_of(program: str) -> UAR:
    path = Path(program)
    if not path.is_absolute():
        path = KERNELS / program if (KERNELS / program).exists() else PROGRAMS / program
    return analyze([path])


def launches(uar: UAR) -> list[str]:
    """Statement ids of the launches, in host_program.launches() order (L0, L1, ...)."""
    return [st.id for st in uar.statements if st.kind == "launch"]


def names(uar: UAR) -> dict[str, str]:
    """Statement id -> L<i> for launches, else the id itself."""
    return {sid: f"L{i}" for i, sid in enumerate(launches(uar))}


def launch_deps(uar: UAR) -> set[tuple[str, str, str, str, str]]:
    """(src, dst, kind, buffer, width) of every data dependence between two launches, with the
    launches named L0, L1, ... in launch order."""
    n = names(uar)
    return {(n[d.src], n[d.dst], d.kind, d.buffer, d.width) for d in uar.dependences
            if d.kind != "CTRL" and d.src in n and d.dst in n}


def dep(uar: UAR, src: str, dst: str, kind: str, buffer: str):
    """The dependence with launch names (or statement ids) `src` -> `dst`."""
    n = names(uar)
    for d in uar.dependences:
        if (n.get(d.src, d.src), n.get(d.dst, d.dst), d.kind, d.buffer) == (src, dst, kind,
                                                                             buffer):
            return d
    raise KeyError((src, dst, kind, buffer))


def inexact_accesses(uar: UAR) -> list[tuple[str, str, str]]:
    """(kernel, access kind, base) of every inexact static access, over the launches."""
    out = []
    for le in uar.launch_effects:
        for a in le.summary.accesses:
            if not a.exact:
                out.append((le.summary.name, a.kind, f"{a.base.space}:{a.base.ref}"))
    return out
