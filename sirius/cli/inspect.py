"""`sirius inspect PROGRAM.cu [--json]`: a program's kernels and host model (docs/host-model.md)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from sirius.analysis.host.render import op_lines, short_loc, variable_labels
from sirius.analysis.program import analyse, document
from sirius.cli.common import clang_flags, program_args, program_argv, report_args


def render_text(doc: dict) -> str:
    lines = [f"program: {', '.join(doc['files'])} (arch {doc['arch']})", ""]
    lines.append(f"kernels ({len(doc['kernels'])}):")
    for k in doc["kernels"]:
        lb = k["launch_bounds"]
        bounds = f"  __launch_bounds__({lb['max_threads']}" + \
            (f", {lb['min_blocks']})" if lb["min_blocks"] else ")") if lb else ""
        lines.append(f"  {k['name']}  [{short_loc(k['loc'])}]{bounds}")
        params = ", ".join(f"{p['type'] or p['ir_type']} {p['name']}".replace("* ", "*")
                           for p in k["params"])
        lines.append(f"    params: ({params})")
        facts = [f"static smem {k['static_smem_bytes']} B",
                 f"barriers {k['barriers']}"]
        if k["dynamic_smem"]:
            facts.append("dynamic smem")
        facts.append("warp ops " + (", ".join(f"{n} x{c}" for n, c in k["warp_ops"].items())
                                    or "none"))
        facts.append("atomics " + (", ".join(f"{n} x{c}" for n, c in k["atomics"].items())
                                   or "none"))
        if k["inline_asm"]:
            facts.append(f"inline asm x{len(k['inline_asm'])}")
        if k["textures"]:
            facts.append("textures")
        lines.append("    " + "; ".join(facts))
    host = doc["host"]
    given = f", arguments {shlex.join(host['argv'])!s}" if "argv" in host else ""
    lines += ["", f"host program (entry {host['entry']}{given}):", "  buffers:"]
    width = max((len(b["name"]) for b in host["buffers"]), default=4)
    for b in host["buffers"]:
        lines.append(f"    {b['name']:<{width}}  {b['bytes']:>10} B  {b['role']:<6}  "
                     f"{short_loc(b['loc'])}")
    if host.get("symbols"):
        lines.append("  device variables copied by the host:")
        width = max(len(f"{s['space']} {s['variable']}") for s in host["symbols"])
        for s in host["symbols"]:
            lines.append(f"    {s['space'] + ' ' + s['variable']:<{width}}  {s['bytes']:>10} B  "
                         f"{s['name']}")
    lines.append("  ops:")
    body = op_lines(host["ops"], 2, variable_labels(host))
    col = min(max((len(t) for t, _ in body), default=0) + 2, 72)
    for text, loc in body:
        sep = " " * max(col - len(text), 2)
        lines.append(f"{text}{sep}{short_loc(loc)}".rstrip())
    return "\n".join(lines)



def _cmd_inspect(args: argparse.Namespace) -> int:
    flags = clang_flags(args)
    paths = [Path(f) for f in args.files]
    program, kernels, host_program = analyse(paths, args.entry, args.arch, flags,
                                             not args.no_cache, program_argv(args))
    doc = document(paths, args.arch, kernels, host_program)
    if args.emit_ir:
        out = Path(args.emit_ir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "device.ll").write_text(program.device_ir)
        (out / "host.ll").write_text(program.host_ir)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(doc))
    return 0


def register(sub) -> None:
    ins = sub.add_parser("inspect", help="show a program's kernels and host model")
    program_args(ins)
    report_args(ins, "the model")
    ins.add_argument("--emit-ir", metavar="DIR", help="also write device.ll and host.ll to DIR")
    ins.set_defaults(func=_cmd_inspect)
