"""`sirius analyze PROGRAM.cu [--json] [--dot FILE]`: the UAR of a program (docs/analyze.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sirius.analysis.host.render import op_lines
from sirius.analysis.program import analyze
from sirius.analysis.uar.build import UAR, Dependence
from sirius.analysis.uar.effects import Statement
from sirius.cli.common import Reporter, clang_flags, program_args, program_argv, report_args

EDGE_STYLE = {  # Graphviz attributes per width; CTRL edges are dotted grey
    "THREAD": 'color="forestgreen", style="solid"',
    "BLOCK": 'color="royalblue", style="dashed"',
    "GLOBAL": 'color="firebrick", style="bold"',
    "CTRL": 'color="grey50", style="dotted"',
}


def _what(st: Statement, uar: UAR) -> str:
    """As `sirius inspect` prints the op; a launch without its arguments."""
    op = st.op.to_json()
    if st.kind == "launch":
        dims = [", ".join(str(x) for x in op[k]) for k in ("grid", "block")]
        return f"launch {op['kernel']}<<<({dims[0]}), ({dims[1]})>>>"
    names = {s.name: f"{s.space} {s.variable}" for s in uar.program.symbols}
    return " ".join(op_lines([op], 0, names)[0][0].split())


def _short_loc(st: Statement) -> str:
    return f"{Path(st.loc.file).name}:{st.loc.line}" if st.loc else ""


def _footprints(uar: UAR) -> list[dict]:
    out = []
    for st in uar.statements:
        for e in uar.effects[st.id]:
            out.append({"statement": st.id, "buffer": e.buffer, "mode": e.mode,
                        "bytes": None if e.box is None else [e.box[0], e.box[1] + 1],
                        "exact": e.exact, "atomic": e.atomic})
    return out


def _dep_json(d: Dependence) -> dict:
    return {"src": d.src, "dst": d.dst, "kind": d.kind, "buffer": d.buffer, "width": d.width,
            "exact": d.exact, "alignment": d.alignment,
            "relation": str(d.relation),
            "mapping": None if d.mapping is None else str(d.mapping)}


def document(uar: UAR, files: list[Path]) -> dict:
    """The `sirius analyze --json` document (docs/analyze.md is its schema)."""
    from sirius._version import __version__

    exact, total = uar.exactness()
    return {
        "sirius": __version__,
        "files": [str(f) for f in files],
        "statements": [{"id": st.id, "kind": st.kind,
                        "kernel": st.op.kernel if st.kind == "launch" else None,
                        "launch_index": st.launch_index, "loops": list(st.vars),
                        "domain": str(st.domain), "what": _what(st, uar),
                        "loc": str(st.loc) if st.loc else None} for st in uar.statements],
        "dependences": [_dep_json(d) for d in uar.dependences],
        "footprints": _footprints(uar),
        "kernels": [_kernel_json(le.summary) for le in _unique_summaries(uar)],
        "exactness": {"exact": exact, "accesses": total},
        "warnings": list(uar.warnings),
        "seconds": {k: round(v, 4) for k, v in uar.seconds.items()},
    }


def _unique_summaries(uar: UAR):
    seen: set[int] = set()
    for le in uar.launch_effects:
        if id(le.summary) not in seen:
            seen.add(id(le.summary))
            yield le


def _kernel_json(s) -> dict:
    return {"kernel": s.name, "loops": [{"name": lp.name, "start": None if lp.start is None
                                         else str(lp.start), "step": lp.step,
                                         "exact": lp.exact} for lp in s.loops],
            "accesses": [{"kind": a.kind, "base": str(a.base),
                          "relation": str(a.relation), "bytes": str(a.extent),
                          "exact": a.exact, "reason": a.reason or None,
                          "line": a.loc.line if a.loc else None} for a in s.accesses]}


def render_text(uar: UAR, files: list[Path]) -> str:
    exact, total = uar.exactness()
    lines = [f"program: {', '.join(str(f) for f in files)}", "",
             f"statements ({len(uar.statements)}):"]
    rows = [(st.id, st.kind, _what(st, uar), str(st.domain), _short_loc(st))
            for st in uar.statements]
    lines += _table(("id", "kind", "what", "domain", "loc"), rows)
    data = [d for d in uar.dependences if d.kind != "CTRL"]
    ctrl = len(uar.dependences) - len(data)
    lines += ["", f"dependences ({len(data)} data, {ctrl} control):"]
    rows = [(d.src, d.dst, d.kind, d.buffer or "", d.width + (f" ({d.alignment})"
                                                              if d.alignment else ""),
             "yes" if d.exact else "no", str(d.relation)) for d in data]
    lines += _table(("src", "dst", "kind", "buffer", "width", "exact", "instances"), rows)
    lines += ["", "footprints (bytes [lo, hi) over all instances):"]
    for st in uar.statements:
        effects = uar.effects[st.id]
        if not effects:
            continue
        parts = []
        for e in effects:
            rng = "empty" if e.box is None else f"[{e.box[0]}, {e.box[1] + 1})"
            flags = ("" if e.exact else " inexact") + (" atomic" if e.atomic else "")
            parts.append(f"{e.mode} {e.buffer} {rng}{flags}")
        lines.append(f"  {st.id} {st.label}: " + "; ".join(parts))
    share = 100.0 * exact / total if total else 100.0
    lines += ["", f"exact accesses: {exact}/{total} ({share:.1f}%)"]
    for le in _unique_summaries(uar):
        for a in le.summary.accesses:
            if not a.exact:
                line = f":{a.loc.line}" if a.loc else ""
                lines.append(f"  inexact: {le.summary.name}{line} {a.kind} "
                             f"{a.base}: {a.reason}")
    lines += [f"warning: {w}" for w in uar.warnings]
    secs = ", ".join(f"{k} {v:.2f} s" for k, v in uar.seconds.items())
    lines += ["", f"time: {secs}"]
    return "\n".join(lines)


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [min(max([len(h)] + [len(r[i]) for r in rows]), 48) for i, h in enumerate(head)]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return [fmt.format(*head).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def render_dot(uar: UAR) -> str:
    lines = ["digraph uar {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    for st in uar.statements:
        shape = "box" if st.kind == "launch" else "ellipse"
        loops = f"[{', '.join(st.vars)}]" if st.vars else ""
        lines.append(f'  {st.id} [label="{st.id}{loops} {st.label}", shape={shape}];')
    for d in uar.dependences:
        style = EDGE_STYLE["CTRL" if d.kind == "CTRL" else d.width]
        label = "CTRL" if d.kind == "CTRL" else f"{d.kind} {d.buffer}" + ("" if d.exact else "?")
        lines.append(f'  {d.src} -> {d.dst} [label="{label}", {style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _cmd_analyze(args: argparse.Namespace) -> int:
    flags = clang_flags(args)
    files = [Path(f) for f in args.files]
    say = Reporter(args.quiet)
    uar = analyze(files, args.entry, args.arch, flags, not args.no_cache, progress=say,
                  argv=program_argv(args))
    say.done()
    if args.dot:
        Path(args.dot).write_text(render_dot(uar))
    if args.json:
        print(json.dumps(document(uar, files), indent=2))
    else:
        print(render_text(uar, files))
    return 0


def register(sub) -> None:
    sp = sub.add_parser("analyze", help="the unified dependence graph (UAR) of a program")
    program_args(sp)
    report_args(sp, "the analysis")
    sp.add_argument("--dot", metavar="FILE", help="write the graph in Graphviz format")
    sp.set_defaults(func=_cmd_analyze)
