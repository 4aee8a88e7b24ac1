"""The `sirius` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from sirius import __version__
from sirius.diagnostics import SiriusError


def _program(files: list[Path], arch: str, flags: list[str], use_cache: bool):
    from sirius.frontend import compile_program

    return compile_program(files, arch=arch, extra_flags=flags, use_cache=use_cache)


def analyse(files: list[Path], entry: str = "main", arch: str = "sm_80",
            flags: list[str] | None = None, use_cache: bool = True):
    """Compile and extract: (Program, kernel facts, HostProgram)."""
    from sirius.analysis.host import extract_host_program
    from sirius.analysis.irview import build_view
    from sirius.analysis.kernels import kernel_infos

    program = _program(files, arch, flags or [], use_cache)
    device = build_view(program.device_module)
    host = build_view(program.host_module)
    kernels = kernel_infos(device)
    host_program = extract_host_program(host, device, entry)
    return program, kernels, host_program


def inspect_document(files: list[Path | str], entry: str = "main", arch: str = "sm_80",
                     flags: list[str] | None = None, use_cache: bool = True) -> dict:
    """The `sirius inspect --json` document (docs/host-model.md is its schema)."""
    paths = [Path(f) for f in files]
    return _document(paths, arch, *analyse(paths, entry, arch, flags, use_cache)[1:])


def _document(paths: list[Path], arch: str, kernels, host_program) -> dict:
    from sirius.analysis.kernels import kernel_to_json

    return {
        "sirius": __version__,
        "files": [str(p) for p in paths],
        "arch": arch,
        "kernels": [kernel_to_json(k) for k in kernels],
        "host": host_program.to_json(),
    }


# text rendering ------------------------------------------------------------------------------
def _dims(d: list) -> str:
    return "(" + ", ".join(str(x) for x in d) + ")"


def _addr(ref: dict) -> str:
    if "rotating" in ref:
        rot = ref["rotating"]
        return "{" + " | ".join(_addr(c) for c in rot["choices"]) + f"}}[{rot['index']}]"
    off = ref["offset"]
    if off == 0:
        return ref["buffer"]
    return f"{ref['buffer']}+{off}" if isinstance(off, int) else f"{ref['buffer']}+({off})"


def _side(ref: dict) -> str:
    return ref["host"] if "host" in ref else _addr(ref)


def _arg(a: dict) -> str:
    if a["kind"] == "buffer":
        return _addr(a)
    if a["kind"] == "scalar":
        return str(a["value"])
    return "NULL"


def _short_loc(loc: str | None) -> str:
    if not loc:
        return ""
    parts = loc.split(":")
    return f"{Path(parts[0]).name}:{parts[1]}" if len(parts) > 1 else loc


def _op_lines(ops: list[dict], depth: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pad = "  " * depth
    for op in ops:
        kind = op["op"]
        if kind == "loop":
            if op["hi"] is None:
                head = f"loop {op['var']} (trip count unknown: opaque):"
            else:
                step = "" if op["step"] == 1 else f" step {op['step']}"
                head = f"for {op['var']} in [{op['lo']}, {op['hi']}){step}:"
            out.append((pad + head, op["loc"]))
            out.extend(_op_lines(op["body"], depth + 1))
            continue
        if kind == "alloc":
            text = f"alloc  {op['buffer']} ({op['bytes']} B)"
        elif kind == "free":
            text = f"free   {_addr(op)}"
        elif kind == "copy":
            a = " async" if op["async"] else ""
            text = f"copy   {op['kind']}{a} {_side(op['dst'])} <- {_side(op['src'])} " \
                   f"({op['bytes']} B)"
        elif kind == "memset":
            text = f"memset {_addr(op['dst'])} = {op['value']} ({op['bytes']} B)"
        elif kind == "sync":
            text = f"sync   {op['what']}"
        else:
            smem = f", smem {op['smem']}" if op["smem"] != 0 else ""
            args = ", ".join(_arg(a) for a in op["args"])
            text = f"launch {op['kernel']}<<<{_dims(op['grid'])}, {_dims(op['block'])}{smem}>>>" \
                   f"({args})"
        out.append((pad + text, op["loc"]))
    return out


def render_text(doc: dict) -> str:
    lines = [f"program: {', '.join(doc['files'])} (arch {doc['arch']})", ""]
    lines.append(f"kernels ({len(doc['kernels'])}):")
    for k in doc["kernels"]:
        lb = k["launch_bounds"]
        bounds = f"  __launch_bounds__({lb['max_threads']}" + \
            (f", {lb['min_blocks']})" if lb["min_blocks"] else ")") if lb else ""
        lines.append(f"  {k['name']}  [{_short_loc(k['loc'])}]{bounds}")
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
    lines += ["", f"host program (entry {host['entry']}):", "  buffers:"]
    width = max((len(b["name"]) for b in host["buffers"]), default=4)
    for b in host["buffers"]:
        lines.append(f"    {b['name']:<{width}}  {b['bytes']:>10} B  {b['role']:<6}  "
                     f"{_short_loc(b['loc'])}")
    lines.append("  ops:")
    body = _op_lines(host["ops"], 2)
    col = min(max((len(t) for t, _ in body), default=0) + 2, 72)
    for text, loc in body:
        sep = " " * max(col - len(text), 2)
        lines.append(f"{text}{sep}{_short_loc(loc)}".rstrip())
    return "\n".join(lines)


# commands --------------------------------------------------------------------------------------
def _cmd_inspect(args: argparse.Namespace) -> int:
    flags = [f"-I{d}" for d in args.include] + [f"-D{d}" for d in args.define]
    paths = [Path(f) for f in args.files]
    program, kernels, host_program = analyse(paths, args.entry, args.arch, flags,
                                             not args.no_cache)
    doc = _document(paths, args.arch, kernels, host_program)
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


def _cmd_compile_stats(args: argparse.Namespace) -> int:
    program = _program([Path(f) for f in args.files], args.arch, [], not args.no_cache)
    print(f"cache {'hit' if program.cache_hit else 'miss'}: {program.compile_seconds:.3f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sirius", description="Whole-program CUDA kernel fusion.")
    p.add_argument("--version", action="version", version=f"sirius {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("files", nargs="+", metavar="PROGRAM.cu")
        sp.add_argument("--arch", default="sm_80", help="GPU architecture (default sm_80)")
        sp.add_argument("--no-cache", action="store_true", help="recompile, ignore the IR cache")

    ins = sub.add_parser("inspect", help="show a program's kernels and host model")
    common(ins)
    ins.add_argument("--json", action="store_true", help="print the model as JSON")
    ins.add_argument("--entry", default="main", help="host entry function (default main)")
    ins.add_argument("-I", dest="include", action="append", default=[], metavar="DIR")
    ins.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]")
    ins.add_argument("--emit-ir", metavar="DIR", help="also write device.ll and host.ll to DIR")
    ins.set_defaults(func=_cmd_inspect)

    cc = sub.add_parser("compile", help="compile to LLVM IR (through the cache) and time it")
    common(cc)
    cc.set_defaults(func=_cmd_compile_stats)

    # Commands that live beside the stage they drive; each module has
    # `register(sub, common)` adding its parser(s) with `set_defaults(func=...)`.
    import importlib

    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:  # the module exists but something it imports does not
                raise
            continue
        module.register(sub, common)
    return p


_COMMAND_MODULES = (
    "sirius.runtime.cli",        # sirius run
    "sirius.analysis.cli",       # sirius analyze
    "sirius.frontend.tvm_cli",   # sirius import-tvm
    "sirius.fusion.cli",         # sirius fuse, sirius verify
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SiriusError as e:
        print(e.render(), file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a command that stopped reading (head)
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in sirius, not in the user's program
        if os.environ.get("SIRIUS_DEBUG"):
            traceback.print_exc()
        print(f"sirius: internal error: {type(e).__name__}: {e}\n"
              "this is a bug in sirius; rerun with SIRIUS_DEBUG=1 for a traceback and report it",
              file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
