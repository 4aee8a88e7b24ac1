"""A host program as text: the lines `sirius inspect` prints, from `HostProgram.to_json()`."""

from __future__ import annotations

from pathlib import Path


def _dims(d: list) -> str:
    return "(" + ", ".join(str(x) for x in d) + ")"


def variable_labels(host: dict) -> dict[str, str]:
    """`@name` -> how a listing shows a device variable (`__constant__ coef`), from the
    `symbols` of a host program's JSON."""
    return {s["name"]: f"{s['space']} {s['variable']}" for s in host.get("symbols", ())}


def _addr(ref: dict, names: dict[str, str] | None = None) -> str:
    if "rotating" in ref:
        rot = ref["rotating"]
        return "{" + " | ".join(_addr(c, names) for c in rot["choices"]) + \
            f"}}[{rot['index']}]"
    off = ref["offset"]
    buf = (names or {}).get(ref["buffer"], ref["buffer"])
    if off == 0:
        return buf
    return f"{buf}+{off}" if isinstance(off, int) else f"{buf}+({off})"


def _side(ref: dict, names: dict[str, str] | None) -> str:
    return ref["host"] if "host" in ref else _addr(ref, names)


def _arg(a: dict) -> str:
    if a["kind"] == "buffer":
        return _addr(a)
    if a["kind"] == "scalar":
        return str(a["value"])
    return "NULL"


def short_loc(loc: str | None) -> str:
    if not loc:
        return ""
    parts = loc.split(":")
    return f"{Path(parts[0]).name}:{parts[1]}" if len(parts) > 1 else loc


def op_lines(ops: list[dict], depth: int, names: dict[str, str] | None = None
             ) -> list[tuple[str, str]]:
    """(text, loc) per op; `names` shows device variables by source name
    (`variable_labels`)."""
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
            out.extend(op_lines(op["body"], depth + 1, names))
            continue
        if kind == "alloc":
            text = f"alloc  {op['buffer']} ({op['bytes']} B)"
        elif kind == "free":
            text = f"free   {_addr(op)}"
        elif kind == "copy":
            a = " async" if op["async"] else ""
            text = f"copy   {op['kind']}{a} {_side(op['dst'], names)} <- " \
                   f"{_side(op['src'], names)} ({op['bytes']} B)"
            if op.get("pointers"):
                held = ", ".join(f"@{p['at']}: {_addr(p)}" for p in op["pointers"])
                text += f" holding device addresses {held}"
            if op.get("via"):
                via = ", ".join((names or {}).get(v, v) for v in op["via"])
                text += f" (bytes copied back from {via})"
        elif kind == "memset":
            text = f"memset {_addr(op['dst'])} = {op['value']} ({op['bytes']} B)"
        elif kind == "sync":
            text = f"sync   {op['what']}"
            if op.get("observed"):
                text += f" (kept: {op['observed']})"
        else:
            smem = f", smem {op['smem']}" if op["smem"] != 0 else ""
            args = ", ".join(_arg(a) for a in op["args"])
            text = f"launch {op['kernel']}<<<{_dims(op['grid'])}, {_dims(op['block'])}{smem}>>>" \
                   f"({args})"
        out.append((pad + text, op["loc"]))
    return out




def render_ops(ops, depth: int = 0, names: dict[str, str] | None = None) -> str:
    """Host ops as `sirius inspect` prints them (without locations)."""
    return "\n".join(text for text, _ in op_lines([op.to_json() for op in ops], depth, names))
