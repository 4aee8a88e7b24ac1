"""Lift inline PTX assembly to LLVM IR, for the CPU executor only.

CUDA's `cuda_fp16.hpp` and `cuda_bf16.hpp`, and TVM's fp16 prelude built on them, do half and
bfloat arithmetic in inline PTX (`{add.f16 $0,$1,$2;}`, `cvt.rn.f16.f32`, `setp.lt.f16` with a
predicate, `mov.b32 {lo,hi}` packing, `shfl.sync` on packed halves, ...). Before the executor's
rewrite (`rewrite.py`), `lift(text)` replaces every asm call whose template it can translate:

  * a template that is one `shfl.sync.{bfly,up,down,idx}.b32` becomes the equivalent
    `llvm.nvvm.shfl.sync.*.i32` call in place, so it takes the executor's warp-shuffle path
    (call site and source line unchanged);
  * any other template becomes a call of an internal function `@__sirius_ptx_N` (one per
    distinct template and signature) whose body is the template translated instruction by
    instruction through the table in `ptxops.py`; PTX registers become SSA values (templates
    are straight-line code; a guarded instruction `@p` becomes a select). `ld`/`st` of one
    scalar in the generic or .global space (an `"l"` address operand, `[$0+8]`) become LLVM
    loads and stores, so the rewrite counts and bounds-checks them like any other access and
    the tracer records them (inline asm stores in hand-written code and the fuzzer's programs).

The asm call and its replacement are both one instruction, and the executor's counters skip
the bodies of the lifted functions, so instruction counts stay those of the original IR. A
template with an instruction not in the table stays as it is; the rewrite then refuses the
kernel with the template's text and the reason (`refusal`). PTX emission never sees any of
this: it compiles the original module, asm included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.runtime.cpu.ptxfloat import Builder, ity
from sirius.runtime.cpu.ptxops import TABLE, TYPES, Instr, Unsupported, width

PREFIX = "__sirius_ptx_"

_CALL = re.compile(
    r'^(?P<indent>\s*)(?:(?P<res>%[-\w.$"]+) = )?(?:(?:tail|musttail|notail) )?call '
    r'(?P<pre>[^"]*?)\basm (?P<flags>(?:(?:sideeffect|alignstack|inteldialect|unwind) )*)'
    r'"(?P<tpl>(?:[^"\\]|\\.)*)", "(?P<cons>[^"]*)"\((?P<args>.*)\)(?P<tail>[^()]*)$')
_WIDTH = {"h": 16, "r": 32, "l": 64, "f": 32, "d": 64}
_FLOATS = {"half": 16, "bfloat": 16, "float": 32, "double": 64}
_RET_WORDS = {"noundef", "zeroext", "signext", "inreg", "fast", "nnan", "ninf", "nsz", "arcp",
              "contract", "afn", "reassoc"}
_ARG_WORDS = {"noundef", "zeroext", "signext", "inreg", "nonnull"}
_SHFL = re.compile(r"shfl\.sync\.(bfly|up|down|idx)\.b32")
_IMM = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?")


@dataclass(frozen=True, slots=True)
class AsmCall:
    res: str | None
    ret: str                       # the call's return type ("void", "i16", "{ i16, i16 }")
    template: str                  # decoded PTX text
    constraints: tuple[str, ...]
    args: tuple[tuple[str, str], ...]  # (type, value)
    dbg: str


@dataclass(frozen=True, slots=True)
class Lifted:
    text: str
    lifted: int     # asm calls replaced
    functions: int  # lifted functions added


def _split_top(s: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(s[start:i].strip())
            start = i + 1
    last = s[start:].strip()
    return out + [last] if last or out else out


def parse_call(line: str) -> AsmCall | None:
    m = _CALL.match(line)
    if not m:
        return None
    tpl = re.sub(r"\\([0-9A-Fa-f]{2})", lambda h: chr(int(h.group(1), 16)), m["tpl"])
    pre = m["pre"].strip()
    if pre.endswith("}"):
        ret = pre[pre.index("{"):]
    else:
        words = [w for w in pre.split() if w not in _RET_WORDS]
        ret = words[-1] if words else "void"
    args = []
    for a in _split_top(m["args"]):
        ty, _, rest = a.partition(" ")
        if rest.startswith("addrspace("):
            space, _, rest = rest.partition(" ")
            ty = f"{ty} {space}"
        words = rest.split()
        while len(words) > 1 and words[0] in _ARG_WORDS:
            words.pop(0)
        args.append((ty, " ".join(words)))  # a constant expression keeps its spaces
    dbg = re.search(r", !dbg !\d+", m["tail"])
    return AsmCall(m["res"], ret, tpl.replace("$$", "\x00"),
                   tuple(c.strip() for c in m["cons"].split(",") if c.strip()),
                   tuple(args), dbg.group(0) if dbg else "")


def _statements(tpl: str) -> list[str]:
    """Statements of a template, with "{" and "}" for the scopes that braces open and close."""
    tpl = re.sub(r"//[^\n]*", "", tpl)
    out: list[str] = []
    buf, vec = "", 0
    for ch in tpl:
        if ch in "{}" and not buf.strip() and (ch == "{" or vec == 0):
            out.append(ch)
            buf = ""
            continue
        vec += {"{": 1, "}": -1}.get(ch, 0)
        if ch == ";" and vec == 0:
            out.append(" ".join(buf.split()))
            buf = ""
        else:
            buf += ch
    if buf.strip():
        raise Unsupported(f"unterminated statement `{buf.strip()}`")
    return out


class _Template:
    """The translation of one template into the body of a lifted function."""

    def __init__(self, call: AsmCall):
        self.b = Builder()
        self.ops: dict[int, tuple[str, int]] = {}   # operand number -> (value, bits)
        self.out_w: dict[int, int] = {}
        self.scopes: list[dict[str, list]] = [{}]
        self.guard: str | None = None
        outputs = [c for c in call.constraints if c.startswith("=")]
        inputs = [c for c in call.constraints if not c.startswith(("=", "~"))]
        if len(inputs) != len(call.args):
            raise Unsupported("constraints and arguments do not match")
        for k, c in enumerate(outputs):
            letter = c.lstrip("=&")
            if letter not in _WIDTH:
                raise Unsupported(f"output constraint `{c}`")
            self.out_w[k] = _WIDTH[letter]
        self.params = []
        for i, (c, (ty, _)) in enumerate(zip(inputs, call.args, strict=True)):
            n = len(outputs) + i
            p = f"%a{i}"
            self.params.append(f"{ty} {p}")
            if ty.startswith("ptr"):  # an address ("l"): its 64 bits, for ld/st
                bits, v = 64, self.b(f"ptrtoint {ty} {p} to i64")
            else:
                bits = _FLOATS.get(ty) or (int(ty[1:]) if re.fullmatch(r"i\d+", ty) else None)
                if bits is None:
                    raise Unsupported(f"an operand of type {ty}")
                v = self.b(f"bitcast {ty} {p} to i{bits}") if ty in _FLOATS else p
            want = _WIDTH.get(c, bits)
            if c.isdigit():  # tied to an output: its initial value
                want = self.out_w[int(c)]
            if want != bits:
                v = self.b(f"{'zext' if want > bits else 'trunc'} i{bits} {v} to i{want}")
            self.ops[int(c) if c.isdigit() else n] = (v, want)

    # registers ----------------------------------------------------------------------------------
    def _reg(self, name: str) -> list | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def read(self, tok: str, bits: int) -> str:
        tok = tok.strip()
        if tok.startswith("!"):
            return self.b(f"xor i1 {self.read(tok[1:], 1)}, true")
        if tok.startswith("$"):
            n = int(tok[1:])
            if n not in self.ops:
                raise Unsupported(f"reads {tok} before writing it")
            v, w = self.ops[n]
        elif (reg := self._reg(tok)) is not None:
            if reg[0] is None:
                raise Unsupported(f"reads register {tok} before writing it")
            v, w = reg
        elif tok == "WARP_SZ":
            return "32"
        elif m := re.fullmatch(r"0[fF]([0-9a-fA-F]{8})|0[dD]([0-9a-fA-F]{16})", tok):
            return str(_wrap(int(m.group(1) or m.group(2), 16), bits))
        elif _IMM.fullmatch(tok):
            return str(_wrap(int(tok.rstrip("uU"), 0), bits))
        else:
            raise Unsupported(f"operand `{tok}`")
        if w == bits:
            return v
        if w > bits:
            return self.b(f"trunc i{w} {v} to {ity(bits)}")
        raise Unsupported(f"{tok} has {w} bits where {bits} are needed")

    def width_of(self, tok: str) -> int:
        if tok.startswith("$"):
            return self.out_w.get(int(tok[1:])) or self.ops[int(tok[1:])][1]
        reg = self._reg(tok)
        if reg is None:
            raise Unsupported(f"writes undeclared `{tok}`")
        return reg[1]

    def write(self, tok: str, value: str, bits: int) -> None:
        w = self.width_of(tok)
        if w != bits:
            if w < bits or bits == 1:
                raise Unsupported(f"{tok} has {w} bits where {bits} are written")
            value = self.b(f"zext {ity(bits)} {value} to i{w}")
        if self.guard is not None:
            old = self.read(tok, w) if self._known(tok) else "0"
            value = self.b(f"select i1 {self.guard}, {ity(w)} {value}, {ity(w)} {old}")
        if tok.startswith("$"):
            self.ops[int(tok[1:])] = (value, w)
        else:
            self._reg(tok)[0] = value

    def _known(self, tok: str) -> bool:
        if tok.startswith("$"):
            return int(tok[1:]) in self.ops
        return self._reg(tok)[0] is not None

    # statements --------------------------------------------------------------------------------
    def run(self, template: str) -> None:
        for st in _statements(template):
            if st == "{":
                self.scopes.append({})
            elif st == "}":
                if len(self.scopes) == 1:
                    raise Unsupported("unbalanced braces")
                self.scopes.pop()
            elif st:
                self.statement(st.replace("\x00", "$"))

    def statement(self, st: str) -> None:
        if m := re.fullmatch(r"\.reg\s*\.(\w+)\s+(.*)", st):
            ty = m.group(1)
            if ty not in TYPES or ty == "b8":
                raise Unsupported(f"a register of type .{ty}")
            for name in m.group(2).split(","):
                if not re.fullmatch(r"[\w$%]+", name.strip()):
                    raise Unsupported(f"register declaration `{name.strip()}`")
                self.scopes[-1][name.strip()] = [None, width(ty)]
            return
        self.guard = None
        if m := re.match(r"@(!?)([\w$%]+)\s+(.*)", st):
            self.guard = self.read(("!" if m.group(1) else "") + m.group(2), 1)
            st = m.group(3)
        opcode, _, rest = st.partition(" ")
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in TYPES]
        mods = [p for p in parts[1:] if p not in TYPES]
        key = ".".join([parts[0], *types])
        entry = TABLE.get(key)
        if entry is None:
            raise Unsupported(f"the PTX instruction `{opcode}` is not in the table")
        extra = set(mods) - entry.mods
        if extra:
            raise Unsupported(f"`{opcode}`: modifier .{sorted(extra)[0]} is not lifted")
        operands = _split_top(rest)
        entry.handler(self.b, Instr(parts[0], mods, types, operands, self.read, self.write,
                                    self.width_of))
        self.guard = None


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits > 1 and v >> (bits - 1) else v


def _body(call: AsmCall, name: str) -> tuple[str, dict[str, str]]:
    """The definition of the lifted function for `call` (raises Unsupported)."""
    t = _Template(call)
    t.run(call.template)
    rets = _split_top(call.ret[1:-1]) if call.ret.startswith("{") else \
        ([] if call.ret == "void" else [call.ret])
    if len(rets) != len(t.out_w):
        raise Unsupported("the outputs and the call's type do not match")
    vals = []
    for k, ty in enumerate(rets):
        if k not in t.ops:
            raise Unsupported(f"output ${k} is never written")
        v, w = t.ops[k]
        bits = _FLOATS.get(ty) or int(ty[1:])
        if bits != w:
            v = t.b(f"{'trunc' if bits < w else 'zext'} i{w} {v} to i{bits}")
        vals.append(t.b(f"bitcast i{bits} {v} to {ty}") if ty in _FLOATS else v)
    b = t.b
    if len(rets) == 1:
        ret = f"ret {rets[0]} {vals[0]}"
    elif not rets:
        ret = "ret void"
    else:
        agg = "poison"
        for k, v in enumerate(vals):
            agg = b(f"insertvalue {call.ret} {agg}, {rets[k]} {v}, {k}")
        ret = f"ret {call.ret} {agg}"
    text = (f"define internal {call.ret} @{name}({', '.join(t.params)}) alwaysinline nounwind {{\n"
            "entry:\n" + "\n".join(b.lines) + f"\n  {ret}\n}}")
    return text, b.decls


def _shuffle(call: AsmCall) -> tuple[str, str] | None:
    """A template that is one shfl.sync.*.b32: the intrinsic call that replaces it."""
    try:
        sts = [s for s in _statements(call.template) if s not in ("{", "}", "")]
    except Unsupported:
        return None
    if len(sts) != 1 or not (m := _SHFL.fullmatch(sts[0].partition(" ")[0])):
        return None
    ops = _split_top(sts[0].partition(" ")[2].replace("\x00", "$"))
    if len(ops) != 5 or ops[0] != "$0" or call.ret != "i32" or call.constraints[0] != "=r":
        return None
    vals = []
    for op in ops[1:]:
        if op.startswith("$"):
            ty, v = call.args[int(op[1:]) - 1]
            if ty != "i32":
                return None
            vals.append(v)
        elif _IMM.fullmatch(op):
            vals.append(str(_wrap(int(op.rstrip("uU"), 0), 32)))
        else:
            return None
    a, lane, clamp, mask = vals
    fn = f"llvm.nvvm.shfl.sync.{m.group(1)}.i32"
    return (f"call i32 @{fn}(i32 {mask}, i32 {a}, i32 {lane}, i32 {clamp})",
            f"declare i32 @{fn}(i32, i32, i32, i32)")


def refusal(line: str) -> str:
    """Why the asm call on `line` is not lifted, with its template (for the rewrite's message)."""
    call = parse_call(line)
    if call is None:
        return "contains inline PTX assembly that the CPU executor cannot read"
    shown = " ".join(call.template.replace("\x00", "$").split())
    try:
        _body(call, "probe")
        why = "its form is not lifted"
    except Unsupported as e:
        why = str(e)
    return (f"contains inline PTX assembly that the CPU executor cannot lift ({why}): "
            f"`{shown}`")


def lift(text: str) -> Lifted:
    """`text` with every liftable asm call replaced (see the module docstring)."""
    if " asm " not in text:
        return Lifted(text, 0, 0)
    out: list[str] = []
    made: dict[tuple, str | None] = {}  # (template, constraints, ret, arg types) -> function
    defs: list[str] = []
    decls: dict[str, str] = {}
    lifted = 0
    for line in text.splitlines():
        call = parse_call(line) if " asm " in line else None
        if call is None:
            out.append(line)
            continue
        lhs = f"{line[:len(line) - len(line.lstrip())]}{call.res + ' = ' if call.res else ''}"
        if (sh := _shuffle(call)) is not None:
            out.append(f"{lhs}{sh[0]}{call.dbg}")
            decls[sh[0].split("@")[1].split("(")[0]] = sh[1]
            lifted += 1
            continue
        key = (call.template, call.constraints, call.ret, tuple(t for t, _ in call.args))
        if key not in made:
            name = f"{PREFIX}{len(defs)}"
            try:
                body, more = _body(call, name)
                defs.append(body)
                decls.update(more)
                made[key] = name
            except Unsupported:
                made[key] = None
        name = made[key]
        if name is None:
            out.append(line)
            continue
        args = ", ".join(f"{t} {v}" for t, v in call.args)
        out.append(f"{lhs}call {call.ret} @{name}({args}){call.dbg}")
        lifted += 1
    have = set(re.findall(r'^(?:declare|define)\b[^@]*@("[^"]+"|[-\w.$]+)\(', text, re.M))
    new_decls = [d for fn, d in decls.items() if fn not in have]
    return Lifted("\n".join(out + new_decls + defs) + "\n", lifted, len(defs))
