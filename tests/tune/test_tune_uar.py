"""The UAR picture of the HTML report (sirius/tune/uarplot.py) on a hand-made UAR: edges merged
per pair with the widest width, fused kernels framed, drawn by Graphviz when installed and by
matplotlib otherwise, not drawn when too large."""

from __future__ import annotations

import shutil
from types import SimpleNamespace as NS

import pytest

from sirius.tune.uarplot import MAX_STATEMENTS, graph, picture, to_dot

PNG = b"\x89PNG\r\n\x1a\n"
FUSED = [{"name": "sirius_v0", "arrangement": "vertical", "members": ["S1 scale", "S2 add"]}]


def _uar(n_extra: int = 0):
    kinds = [("copy H2D", "copy"), ("scale", "launch"), ("add", "launch"), ("sync", "sync"),
             ("copy D2H", "copy")] + [("k", "launch")] * n_extra
    st = [NS(id=f"S{i}", vars=("t",) if i == 2 else (), label=lab, kind=k)
          for i, (lab, k) in enumerate(kinds)]

    def dep(a, b, kind, width, buf, exact=True):
        return NS(src=a, dst=b, kind=kind, width=width, buffer=buf, exact=exact)

    deps = [dep("S0", "S1", "RAW", "GLOBAL", "x"), dep("S1", "S2", "RAW", "THREAD", "y"),
            dep("S1", "S2", "WAR", "BLOCK", "z", exact=False),
            dep("S2", "S3", "CTRL", "CTRL", None), dep("S2", "S4", "RAW", "GLOBAL", "w")]
    return NS(statements=st, dependences=deps)


def test_graph_merges_edges_and_groups_fused_launches():
    nodes, edges, caps = graph(_uar(), FUSED)
    assert [n.group for n in nodes] == [None, 0, 0, None, None]
    assert [n.label for n in nodes][:3] == ["S0 copy H2D", "S1 scale", "S2[t] add"]
    assert caps == ["sirius_v0 (vertical)"]
    pair = [e for e in edges if (e.src, e.dst) == ("S1", "S2")]
    assert len(pair) == 1 and pair[0].width == "BLOCK" and pair[0].label == "RAW y, WAR z?"
    assert {(e.src, e.dst): e.width for e in edges}[("S2", "S3")] == "CTRL"
    dot = to_dot(nodes, edges, caps)
    cluster = dot.split("subgraph cluster_0")[1].split("}")[0]
    assert 'label="sirius_v0 (vertical)"' in cluster
    assert "S1 [" in cluster and "S2 [" in cluster and "S0 [" not in cluster
    assert 'S1 -> S2 [label="RAW y, WAR z?", color=royalblue, style=dashed]' in dot


def test_matplotlib_drawing_without_graphviz():
    p = picture(_uar(), FUSED, dot_exe=None)
    assert p.png[:8] == PNG and p.how == "drawn by matplotlib"
    assert p.dot.startswith("digraph uar {")


def test_graphviz_drawing():
    if shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed (apt-get install graphviz)")
    p = picture(_uar(), FUSED)
    assert p.png[:8] == PNG and p.how.startswith("drawn by Graphviz (dot - graphviz version")


def test_large_programs_are_not_drawn():
    p = picture(_uar(MAX_STATEMENTS), FUSED)
    assert p.png is None and p.dot == ""
    assert p.how.startswith(f"not drawn: {MAX_STATEMENTS + 5} statements")
