"""The UAR as a picture for the HTML report: statements (launches as boxes, copies, memsets and
syncs as ellipses), their dependences coloured by width, and the launches each fused kernel of
the chosen variant took drawn inside one frame.

Drawn by Graphviz's `dot` when it is on PATH (Debian: `apt-get install graphviz`), else by
matplotlib alone (statements top to bottom in program order, dependences as arcs); the report
says which. Programs with more than `MAX_STATEMENTS` statements are not drawn
(`sirius analyze --dot FILE` writes their graph).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

MAX_STATEMENTS = 40
WIDTH_ORDER = ("CTRL", "THREAD", "BLOCK", "GLOBAL")  # an edge of several takes the last
COLOURS = {"THREAD": "forestgreen", "BLOCK": "royalblue", "GLOBAL": "firebrick",
           "CTRL": "grey50"}
_MPL_COLOURS = {"THREAD": "#228b22", "BLOCK": "#4169e1", "GLOBAL": "#b22222", "CTRL": "#7f7f7f"}
STYLES = {"THREAD": "solid", "BLOCK": "dashed", "GLOBAL": "bold", "CTRL": "dotted"}


@dataclass(frozen=True)
class Node:
    sid: str
    label: str
    launch: bool
    group: int | None  # index into the fused kernels, None: not fused


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    width: str   # THREAD | BLOCK | GLOBAL | CTRL (the widest of the pair's dependences)
    label: str


@dataclass(frozen=True)
class Picture:
    png: bytes | None
    how: str       # "drawn by Graphviz ...", "... drawn by matplotlib", or why not drawn
    dot: str = ""  # the Graphviz text (written as uar.dot), empty when not drawn


def graph(uar, fused: Sequence[dict]) -> tuple[list[Node], list[Edge], list[str]]:
    """Nodes, merged edges (one per ordered pair) and fused-kernel captions from a UAR and the
    chosen variant's fused kernels (`VariantResult.fused`: members are 'S3 kernel')."""
    owner: dict[str, int] = {}
    captions = []
    for i, f in enumerate(fused):
        captions.append(f"{f['name']} ({f['arrangement']})")
        for m in f["members"]:
            owner.setdefault(m.split()[0], i)
    nodes = []
    for st in uar.statements:
        loops = f"[{', '.join(st.vars)}]" if st.vars else ""
        nodes.append(Node(st.id, f"{st.id}{loops} {st.label}", st.kind == "launch",
                          owner.get(st.id)))
    pairs: dict[tuple[str, str], list] = {}
    for d in uar.dependences:
        pairs.setdefault((d.src, d.dst), []).append(d)
    edges = []
    for (a, b), ds in pairs.items():
        width = max(("CTRL" if d.kind == "CTRL" else d.width for d in ds),
                    key=WIDTH_ORDER.index)
        labels = sorted({"CTRL" if d.kind == "CTRL" else
                         f"{d.kind} {d.buffer}" + ("" if d.exact else "?") for d in ds})
        edges.append(Edge(a, b, width, ", ".join(labels[:3])
                          + (f" +{len(labels) - 3}" if len(labels) > 3 else "")))
    return nodes, edges, captions


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(nodes: list[Node], edges: list[Edge], captions: list[str]) -> str:
    out = ["digraph uar {", "  rankdir=TB; fontname=Helvetica;",
           '  node [fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=8];']

    def node(n: Node) -> str:
        shape = "box" if n.launch else "ellipse"
        return f"  {n.sid} [label={_q(n.label)}, shape={shape}];"

    for gi, cap in enumerate(captions):
        members = [n for n in nodes if n.group == gi]
        if not members:
            continue
        out.append(f"  subgraph cluster_{gi} {{ label={_q(cap)}; style=filled; "
                   'color="#d8573b"; fillcolor="#fbe9e4";')
        out += ["  " + node(n) for n in members]
        out.append("  }")
    out += [node(n) for n in nodes if n.group is None]
    for e in edges:
        out.append(f"  {e.src} -> {e.dst} [label={_q(e.label)}, color={COLOURS[e.width]}, "
                   f"style={STYLES[e.width]}];")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_png(text: str, exe: str) -> tuple[bytes, str]:
    ver = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=10)
    p = subprocess.run([exe, "-Tpng", "-Gdpi=96"], input=text.encode(), capture_output=True,
                       timeout=60, check=True)
    return p.stdout, (ver.stderr or ver.stdout).strip() or "Graphviz dot"


def _mpl_png(nodes: list[Node], edges: list[Edge], captions: list[str]) -> bytes:
    """Statements top to bottom in program order; dependences as arcs on the right."""
    from sirius.tune.plots import _plt, _png

    plt = _plt()
    y = {n.sid: -i for i, n in enumerate(nodes)}
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(nodes) + 1.0))
    palette = ["#fbe9e4", "#e4eefb", "#e8f4ea", "#f6e8fb", "#fbf6e4"]
    for n in nodes:
        face = "white" if n.group is None else palette[n.group % len(palette)]
        text = n.label + (f"   [{captions[n.group]}]" if n.group is not None else "")
        ax.text(0, y[n.sid], text, ha="left", va="center", fontsize=8,
                bbox={"boxstyle": "square" if n.launch else "round", "fc": face,
                      "ec": "#d8573b" if n.group is not None else "#555"})
    for e in edges:
        dist = abs(y[e.src] - y[e.dst])
        ax.annotate("", xy=(-0.02, y[e.dst]), xytext=(-0.02, y[e.src]),
                    arrowprops={"arrowstyle": "->", "color": _MPL_COLOURS[e.width],
                                "linestyle": ":" if e.width == "CTRL" else
                                "--" if e.width == "BLOCK" else "-",
                                "lw": 2 if e.width == "GLOBAL" else 1,
                                "connectionstyle": f"arc3,rad={0.25 + 0.05 * min(dist, 8)}"})
    for w, c in _MPL_COLOURS.items():
        ax.plot([], [], color=c, label=w)
    ax.set_xlim(-0.6, 1.0)
    ax.set_ylim(-len(nodes) + 0.4, 0.8)
    ax.axis("off")
    ax.legend(fontsize=7, loc="lower right", title="dependence width", title_fontsize=7)
    ax.set_title("UAR: statements in program order, dependences as arcs", fontsize=9)
    return _png(fig)


def picture(uar, fused: Sequence[dict], *, dot_exe: str | None = "auto") -> Picture:
    """The UAR picture; `dot_exe` "auto" looks `dot` up on PATH, None forces the
    networkx + matplotlib drawing."""
    n = len(uar.statements)
    if n > MAX_STATEMENTS:
        return Picture(None, f"not drawn: {n} statements, more than {MAX_STATEMENTS} "
                             "(`sirius analyze --dot FILE` writes the graph)")
    nodes, edges, captions = graph(uar, fused)
    text = to_dot(nodes, edges, captions)
    exe = shutil.which("dot") if dot_exe == "auto" else dot_exe
    if exe:
        try:
            png, ver = _dot_png(text, exe)
            return Picture(png, f"drawn by Graphviz ({ver})", text)
        except (OSError, subprocess.SubprocessError) as e:
            why = f"Graphviz dot failed ({type(e).__name__}); "
    elif dot_exe == "auto":
        why = "Graphviz dot is not installed (apt-get install graphviz); "
    else:
        why = ""
    from sirius.diagnostics import SiriusError

    try:
        return Picture(_mpl_png(nodes, edges, captions), why + "drawn by matplotlib", text)
    except SiriusError as err:  # no matplotlib either
        return Picture(None, why + f"not drawn: {err.message}", text)
