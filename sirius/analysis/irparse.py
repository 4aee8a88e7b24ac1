"""The view of a module read from its printed text alone, without a call into llvmlite per value.

`irview.build_view` walked the module through llvmlite: an iterator, a type and an operand list
per instruction, each a ctypes call and a wrapper object (two thirds of a view's time, and the
views are a third of a fusion's). LLVM prints every fact the view keeps: instruction names,
opcodes, result and operand types, constants, the blocks of branches and phis. This module reads
them from the one print of the module, strictly: a construct it does not know (an alias, an
operand bundle, a vector GEP, an opcode not in the tables below) raises `Unsupported`, and
`build_view` then walks the module through llvmlite as before. The two agree value for value;
tests/analysis/test_irparse.py compares them on every corpus module and on fused ones.

What llvmlite reports, and this module reproduces (checked by that test): operands in LLVM's
order (a conditional branch's false block before its true block, a call's callee last, an
alloca's element count as an operand, a shufflevector's mask not one); integer constants as
llvmlite's `get_constant_value(signed_int=True)` gives them (unsigned below 64 bits, signed at
64); a named struct type printed with its body (`%struct.S = type { i32, float }`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Collection

import numpy as np

from sirius.analysis.debuginfo import DebugInfo
from sirius.analysis.irlex import (
    DBG_RE,
    DBG_VALUE_RE,
    NAME,
    Unsupported,
    close_group,
    closure,
    definitions,
    instruction_lines,
    read_type,
    split_top,
    unquote,
)
from sirius.analysis.irvalues import (
    Argument,
    Block,
    Const,
    ConstExpr,
    Function,
    Instr,
    ModuleView,
    Value,
)

_FUNC_RE = re.compile(r"^(define|declare) [^\n]*?@(" + NAME + r")\(", re.M)
_GLOBAL_RE = re.compile(r"^@(" + NAME + r") = (.*)$", re.M)
_GLOBAL_KIND_RE = re.compile(r"((?:[-\w()\"]+ )*?)(global|constant|alias|ifunc) ")
_LABEL_RE = re.compile(r"^(" + NAME + r"):(?:\s|$)")
_HEAD_RE = re.compile(r'(?:%(' + NAME + r') = )?(?:(?:tail|musttail|notail) )?([a-z][a-z_]*)\b ?')
_INT_RE = re.compile(r"-?\d+")
_CALLEE_RE = re.compile(r"(?<![\w.$\"])(@" + NAME + r"|%" + NAME + r")\(")
_ASM_RE = re.compile(r"\basm (?:sideeffect |alignstack |inteldialect |unwind )*"
                     r"\"(?:[^\"\\]|\\.)*\", \"(?:[^\"\\]|\\.)*\"\(")
_CALL_WORD_RE = re.compile(r"(\w+)(\([^()]*\))?( \d+)? ")
_INCOMING_RE = re.compile(r"\[ (.+?), %(" + NAME + r") \]")
_DEC_FLOAT_RE = re.compile(r"[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|inf|nan)")

_BINARY = frozenset("add sub mul udiv sdiv urem srem shl lshr ashr and or xor fadd fsub fmul fdiv "
                    "frem".split())
_CASTS = frozenset("trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp ptrtoint inttoptr "
                   "bitcast addrspacecast".split())
_FLAGS = frozenset("nuw nsw exact disjoint nneg samesign fast nnan ninf nsz arcp contract afn "
                   "reassoc inbounds nusw volatile atomic weak".split())
_CONSTEXPR_OPS = frozenset("getelementptr bitcast addrspacecast ptrtoint inttoptr trunc add sub "
                           "mul shl xor".split())
_CALL_WORDS = frozenset("fast nnan ninf nsz arcp contract afn reassoc fastcc coldcc ccc "
                        "ptx_kernel ptx_device noundef zeroext signext inreg noalias nonnull "
                        "dereferenceable dereferenceable_or_null align range nofpclass "
                        "noext".split())


class _Reader:
    """One module's text read into view objects."""

    def __init__(self, text: str, only: Collection[str] | None) -> None:
        self.text = text
        self.structs = dict(re.findall(r"^(%[-\w.$\"]+) = type (.+)$", text, re.M))
        self.globals: dict[str, Value] = {}
        self.functions: dict[str, Function] = {}
        self.consts: dict[tuple[str, str], Value] = {}
        self.bodies = definitions(text)
        self.keep = None if only is None else closure(only, self.bodies)
        self.local: dict[str, Value] = {}

    def tstr(self, t: str) -> str:
        """A type as llvmlite prints it: a named struct with its body."""
        if t.startswith("%"):
            body = self.structs.get(t)
            if body is None:
                raise Unsupported(f"the struct type {t} has no body in the module")
            return f"{t} = type {body}"
        return t

    # ---- values ----

    def value(self, ty: str, tok: str) -> Value:
        """The view value of the operand `tok` of type `ty` (the type as the text writes it)."""
        if not tok:
            raise Unsupported(f"an empty {ty} operand")
        c = tok[0]
        if c == "%":
            v = self.local.get(unquote(tok[1:]))
            if v is None:
                raise Unsupported(f"the local {tok} is not defined")
            return v
        if c == "@":
            name = unquote(tok[1:])
            v = self.globals.get(name) or self.functions.get(name)
            if v is None:
                raise Unsupported(f"the global {tok} is not defined")
            return v
        if ty == "metadata" or ty == "label":
            raise Unsupported(f"a {ty} operand {tok}")
        key = (ty, tok)
        v = self.consts.get(key)
        if v is None:
            v = self.consts[key] = self._constant(ty, tok)
        return v

    def _constant(self, ty: str, tok: str) -> Value:
        t = self.tstr(ty)
        if ty.startswith("i") and ty[1:].isdigit():
            bits = int(ty[1:])
            if tok in ("true", "false"):
                n = int(tok == "true")
            elif _INT_RE.fullmatch(tok):
                n = int(tok)
            elif tok in ("undef", "poison"):
                return Value("undef", "", t)
            else:
                raise Unsupported(f"the integer constant {tok}")
            if bits > 64:
                raise Unsupported(f"a {ty} constant")
            n %= 1 << bits
            if bits == 64 and n >= 1 << 63:
                n -= 1 << 64
            return Const("const", "", t, value=n)
        if ty in ("float", "double", "half", "bfloat"):
            if tok in ("undef", "poison"):
                return Value("undef", "", t)
            return Const("const", "", t, value=_float(ty, tok))
        if tok == "null" and ty.startswith("ptr"):
            return Const("null", "", t, value=0)
        if tok in ("undef", "poison"):
            return Value("undef", "", t)
        if tok == "zeroinitializer" or tok[0] in "<[{" or tok.startswith(("c\"", "splat (")):
            return Value("other", "", t)
        head = tok.split(" ", 1)[0]
        if head in _CONSTEXPR_OPS and "(" in tok:
            return ConstExpr("constexpr", "", t, text=f"{ty} {tok}")
        raise Unsupported(f"the constant {ty} {tok}")

    def typed(self, piece: str) -> tuple[str, Value]:
        """`T value` (a typed operand): its type text and value."""
        j = read_type(piece)
        ty = piece[:j]
        return ty, self.value(ty, piece[j:].strip())

    def block(self, tok: str) -> Block:
        if not tok.startswith("label %"):
            raise Unsupported(f"not a label: {tok}")
        v = self.local.get(unquote(tok[7:]))
        if not isinstance(v, Block):
            raise Unsupported(f"no block {tok}")
        return v

    # ---- module ----

    def read(self) -> ModuleView:
        text = self.text
        global_texts: dict[str, str] = {}
        for m in _GLOBAL_RE.finditer(text):
            name, rest = unquote(m.group(1)), m.group(2)
            k = _GLOBAL_KIND_RE.match(rest)
            if k is None or k.group(2) in ("alias", "ifunc"):
                raise Unsupported(f"the global @{name} is not a variable")
            gty = rest[k.end():k.end() + read_type(rest[k.end():])]
            self.globals[name] = Value("global", name, self.tstr(gty))  # as llvmlite's view
            global_texts[name] = m.group(0)
        for m in _FUNC_RE.finditer(text):
            name = unquote(m.group(2))
            declared = m.group(1) == "declare" or (self.keep is not None and name not in self.keep)
            self.functions[name] = Function("func", name, "ptr", is_declaration=declared)
        debug = DebugInfo.parse(text)
        pending: list[tuple[Instr, str]] = []
        for f in self.functions.values():
            if not f.is_declaration:
                self._function(f, debug, pending)
        return ModuleView(self.functions, self.globals, global_texts, self.structs, debug, text)

    def _function(self, f: Function, debug: DebugInfo, pending) -> None:
        f.text = self.bodies.get(f.name, "")
        if not f.text:
            raise Unsupported(f"no body text for @{f.name}")
        header = f.text.split("{", 1)[0]
        sp = re.search(r"!dbg !(\d+)", header)
        f.subprogram = int(sp.group(1)) if sp else None
        cc = re.search(r"define (?:[\w()]+ )*?(ptx_kernel|ptx_device)\b", header)
        f.calling_conv = cc.group(1) if cc else ""
        self.local = {}
        named = _FUNC_RE.match(header)
        if named is None:
            raise Unsupported(f"the header of @{f.name}")
        open_ = named.end() - 1
        params = header[open_ + 1:close_group(header, open_) - 1].strip()
        unnamed = 0
        for i, p in enumerate(split_top(params) if params else []):
            if p == "...":
                continue
            j = read_type(p)
            last = p.rsplit(" ", 1)[-1]
            pname = unquote(last[1:]) if last.startswith("%") and " " in p else ""
            if pname == "":
                raise Unsupported(f"an unnamed parameter of @{f.name}")  # LLVM prints names
            a = Argument("arg", "" if pname.isdigit() else pname, self.tstr(p[:j]), index=i)
            unnamed += pname.isdigit()
            f.args.append(a)
            self.local[pname] = a
        blocks = self._blocks(f.text, unnamed)
        for bname, lines in blocks:
            b = Block("block", "" if bname.isdigit() else bname, "label", function=f)
            self.local[bname] = b
            f.blocks.append(b)
            for line in lines:
                m = _HEAD_RE.match(line)
                if m is None:
                    raise Unsupported(f"not an instruction: {line!r}")
                iname = unquote(m.group(1)) if m.group(1) else ""
                dbg = DBG_RE.search(line) if "!dbg" in line else None
                ins = Instr("inst", "" if iname.isdigit() else iname, "", opcode=m.group(2),
                            block=b, text=line, dbg=int(dbg.group(1)) if dbg else None)
                if iname:
                    self.local[iname] = ins
                b.instrs.append(ins)
                pending.append((ins, line[m.end():]))
        for ins, rest in pending:
            self._operands(ins, rest)
        pending.clear()
        for m in DBG_VALUE_RE.finditer(f.text):
            var = debug.var_name(int(m.group(2)))
            if var:
                f.var_names.setdefault(m.group(1), var)

    @staticmethod
    def _blocks(body: str, unnamed_args: int) -> list[tuple[str, list[str]]]:
        """(label, instruction lines) of each block; the entry block, when it has no label,
        is numbered as LLVM numbers it (after the unnamed arguments)."""
        out: list[tuple[str, list[str]]] = []
        lines = body.splitlines()[1:-1]
        cur: list[str] | None = None
        for line in lines:
            if not line.strip() or line.lstrip().startswith(";"):
                continue
            if not line.startswith(" "):
                m = _LABEL_RE.match(line)
                if m is None:
                    raise Unsupported(f"not a label: {line!r}")
                cur = []
                out.append((unquote(m.group(1)), cur))
                continue
            if cur is None:
                cur = []
                out.append((str(unnamed_args), cur))
            cur.append(line)
        for _, ls in out:
            ls[:] = instruction_lines("{\n" + "\n".join(ls) + "\n}")
        return out

    # ---- instructions ----

    def _operands(self, ins: Instr, rest: str) -> None:  # noqa: C901 (one table of forms)
        op = ins.opcode
        pieces = [p for p in split_top(rest) if p and not p.startswith("!")]
        ops: list[Value] = []
        ty = "void"
        if op in _BINARY or op in ("icmp", "fcmp"):
            first = _skip_flags(pieces[0])
            if op in ("icmp", "fcmp"):
                first = first.split(" ", 1)[1]
            t, a = self.typed(first)
            ops = [a, self.value(t, pieces[1])]
            ty = t if op in _BINARY else ("i1" if not t.startswith("<") else
                                          re.sub(r"x .*>$", "x i1>", t))
        elif op in _CASTS:
            src, _, dst = _skip_flags(pieces[0]).rpartition(" to ")
            _, a = self.typed(src)
            ops, ty = [a], dst
        elif op == "fneg" or op == "freeze":
            t, a = self.typed(_skip_flags(pieces[0]))
            ops, ty = [a], t
        elif op == "select":
            first = _skip_flags(pieces[0])
            ops = [self.typed(first)[1], *(self.typed(p)[1] for p in pieces[1:3])]
            ty = pieces[1][:read_type(pieces[1])]
        elif op == "load":
            t = _skip_flags(pieces[0])
            if len(pieces) < 2 or read_type(t) != len(t):
                raise Unsupported(f"load form {rest!r}")
            ops, ty = [self.typed(_unordered(pieces[1], rest))[1]], t
            _check_tail(pieces[2:], rest)
        elif op == "store":
            ops = [self.typed(_skip_flags(pieces[0]))[1],
                   self.typed(_unordered(pieces[1], rest))[1]]
            _check_tail(pieces[2:], rest)
        elif op == "getelementptr":
            t = _skip_flags(pieces[0])
            if read_type(t) != len(t):
                raise Unsupported(f"GEP form {rest!r}")
            for p in pieces[1:]:
                if p.startswith(("inrange", "align")):
                    raise Unsupported(f"GEP form {rest!r}")
                pt, v = self.typed(p)
                if pt.startswith("<"):
                    raise Unsupported("a vector GEP")
                ops.append(v)
            ty = self.tstr(pieces[1][:read_type(pieces[1])])
        elif op == "alloca":
            t = pieces[0]
            if read_type(t) != len(t):
                raise Unsupported(f"alloca form {rest!r}")
            count = [p for p in pieces[1:] if not p.startswith(("align", "addrspace"))]
            ops = [self.typed(count[0])[1] if count else self.value("i32", "1")]
            space = [p for p in pieces[1:] if p.startswith("addrspace")]
            ty = f"ptr {space[0]}" if space and space[0] != "addrspace(0)" else "ptr"
        elif op == "call":
            ops, ty = self._call(rest)
        elif op == "br":
            if len(pieces) == 1:
                ops = [self.block(pieces[0])]
            else:
                ops = [self.typed(pieces[0])[1], self.block(pieces[2]), self.block(pieces[1])]
        elif op == "ret":
            if pieces[0] != "void":
                ops = [self.typed(pieces[0])[1]]
        elif op == "unreachable" or op == "fence":
            ops = []
        elif op == "phi":
            t = _skip_flags(rest.split(" [", 1)[0])
            ty = t
            incoming = []
            for m in _INCOMING_RE.finditer(rest, len(t)):
                ops.append(self.value(t, m.group(1)))
                incoming.append(self.local.get(unquote(m.group(2))))
            if not ops or any(not isinstance(b, Block) for b in incoming) or \
                    rest.count("[") != len(ops):
                raise Unsupported(f"phi form {rest!r}")
            ins.incoming = incoming  # type: ignore[assignment]
        elif op == "switch":
            head, _, cases = rest.partition("[")
            hp = split_top(head)
            ops = [self.typed(hp[0])[1], self.block(hp[1])]
            for m in re.finditer(r"\S+ -?\d+, (label %" + NAME + ")", cases):
                ops.append(self.block(m.group(1)))
            if len(ops) - 2 != cases.count("label "):
                raise Unsupported(f"switch form {rest!r}")
        elif op == "extractelement":
            t, v = self.typed(pieces[0])
            ops, ty = [v, self.typed(pieces[1])[1]], _element(t)
        elif op == "insertelement":
            t, v = self.typed(pieces[0])
            ops, ty = [v, self.typed(pieces[1])[1], self.typed(pieces[2])[1]], t
        elif op == "shufflevector":
            t, a = self.typed(pieces[0])
            mask = pieces[2][:read_type(pieces[2])]
            n = re.match(r"<(\d+) x ", mask)
            if n is None:
                raise Unsupported(f"shufflevector form {rest!r}")
            ops, ty = [a, self.typed(pieces[1])[1]], re.sub(r"^<\d+ x", f"<{n.group(1)} x", t)
        elif op == "atomicrmw":
            w = [x for x in pieces[0].split(" ") if x != "volatile"]
            ptr_piece = " ".join(w[1:])
            val_piece = re.sub(r" (?:syncscope\(\"[^\"]*\"\) )?\w+$", "", pieces[1])
            ops = [self.typed(ptr_piece)[1]]
            t, v = self.typed(val_piece)
            ops.append(v)
            ty = t
        elif op == "cmpxchg":
            first = " ".join(x for x in pieces[0].split(" ") if x not in ("weak", "volatile"))
            last = re.sub(r" (?:syncscope\(\"[^\"]*\"\) )?\w+ \w+$", "", pieces[2])
            ops = [self.typed(first)[1], self.typed(pieces[1])[1]]
            t, v = self.typed(last)
            ops.append(v)
            ty = f"{{ {t}, i1 }}"
        elif op == "extractvalue":
            t, v = self.typed(pieces[0])
            ops, ty = [v], self._member(t, [int(p) for p in pieces[1:]])
        elif op == "insertvalue":
            t, v = self.typed(pieces[0])
            ops, ty = [v, self.typed(pieces[1])[1]], t
        else:
            raise Unsupported(f"the opcode {op}")
        ins.operands = ops
        ins.type = self.tstr(ty)

    def _member(self, t: str, path: list[int]) -> str:
        for k in path:
            body = self.structs.get(t, t) if t.startswith("%") else t
            if body.startswith("{") or body.startswith("<{"):
                inner = body.strip("<>")[1:-1].strip()
                t = split_top(inner)[k]
            elif body.startswith("["):
                t = re.match(r"\[\d+ x (.*)\]$", body).group(1)  # type: ignore[union-attr]
            else:
                raise Unsupported(f"extractvalue of {t}")
        return t

    def _call(self, rest: str) -> tuple[list[Value], str]:
        """A call's operands (arguments, then the callee) and its result type."""
        m = _CALLEE_RE.search(rest)
        asm = _ASM_RE.search(rest) if "asm " in rest else None
        if asm is not None and (m is None or asm.start() < m.start()):
            prefix, callee_end = rest[:asm.start()], asm.end() - 1
            callee: Value = Value("other", "", "ptr")
        elif m is not None:
            prefix, callee_end = rest[:m.start()], m.end() - 1
            callee = self.value("ptr", m.group(1))
        else:
            raise Unsupported(f"call form {rest!r}")
        args_end = close_group(rest, callee_end)
        tail = rest[args_end:]
        if "[" in tail.split("!", 1)[0]:
            raise Unsupported("an operand bundle")
        prefix = prefix.strip()
        if prefix.endswith(")"):  # `T (params)`: the callee's function type
            k = len(prefix) - 1
            depth = 0
            while k >= 0:
                depth += prefix[k] == ")"
                depth -= prefix[k] == "("
                if depth == 0:
                    break
                k -= 1
            prefix = prefix[:k].strip()
        words = prefix
        while True:  # the flags, calling convention and return attributes before the type
            w = _CALL_WORD_RE.match(words)
            if w is None or w.group(1) not in _CALL_WORDS or words.startswith("ptr"):
                break
            words = words[w.end():]
        if read_type(words) != len(words):
            raise Unsupported(f"call form {rest!r}")
        ops = []
        inner = rest[callee_end + 1:args_end - 1].strip()
        for a in split_top(inner) if inner else []:
            if a.startswith("metadata"):
                ops.append(Value("other", "", "metadata"))
                continue
            j = read_type(a)
            ops.append(self.value(a[:j], _arg_value(a, j)))
        return [*ops, callee], words


def _arg_value(a: str, j: int) -> str:
    """The value of a call argument `T [attributes] value` (type ending at j)."""
    s = a[j:].strip()
    if not s:
        raise Unsupported(f"an argument without a value: {a!r}")
    if s[-1] in ")]}>":
        # a constant expression or aggregate: from its keyword or bracket to the end
        m = re.search(r"(?:^| )((?:" + "|".join(sorted(_CONSTEXPR_OPS)) + r")\b.*|[\[{<].*)$", s)
        if m is None:
            raise Unsupported(f"argument form {a!r}")
        return m.group(1)
    return s.rsplit(" ", 1)[-1]


def _skip_flags(s: str) -> str:
    while True:
        head, _, rest = s.partition(" ")
        if head in _FLAGS and rest:
            s = rest
        else:
            return s


_ORDERING_RE = re.compile(r' (?:syncscope\("[^"]*"\) )?(?:unordered|monotonic|acquire|release|'
                          r'acq_rel|seq_cst)$')


def _unordered(piece: str, rest: str) -> str:
    """An atomic load's or store's pointer operand without its scope and ordering."""
    return _ORDERING_RE.sub("", piece) if rest.startswith("atomic ") else piece


def _check_tail(pieces: list[str], rest: str) -> None:
    for p in pieces:
        if not p.startswith("align "):
            raise Unsupported(f"memory access form {rest!r}")


def _element(vec: str) -> str:
    m = re.match(r"<(?:vscale x )?\d+ x (.*)>$", vec)
    if m is None:
        raise Unsupported(f"not a vector: {vec}")
    return m.group(1)


def _float(ty: str, tok: str) -> float:
    if tok.startswith("0x"):
        if ty in ("float", "double") and len(tok) == 18:
            return struct.unpack("<d", int(tok[2:], 16).to_bytes(8, "little"))[0]
        if ty == "half" and tok.startswith("0xH"):
            return float(np.array([int(tok[3:], 16)], dtype=np.uint16).view(np.float16)[0])
        if ty == "bfloat" and tok.startswith("0xR"):
            return struct.unpack("<f", (int(tok[3:], 16) << 16).to_bytes(4, "little"))[0]
        raise Unsupported(f"the {ty} constant {tok}")
    if _DEC_FLOAT_RE.fullmatch(tok):
        return float(tok)
    raise Unsupported(f"the {ty} constant {tok}")


def read_view(text: str, only: Collection[str] | None = None) -> ModuleView:
    """The view of the module printed as `text` (see the module docstring); `Unsupported` when
    the text has something this reader does not know."""
    return _Reader(text, only).read()


def _key(v: Value, at: dict[int, tuple]) -> tuple:
    """What identifies a value across two views of one module."""
    if isinstance(v, (Instr, Argument, Block)):
        return at.get(id(v), ("unknown", v.name))
    if isinstance(v, Function) or v.kind == "global":
        return (v.kind, v.name, v.type)
    if isinstance(v, Const):
        return (v.kind, v.type, v.value, type(v.value).__name__)
    if isinstance(v, ConstExpr):
        return (v.kind, v.type, v.text)
    return (v.kind, v.name, v.type)


def _positions(view: ModuleView) -> dict[int, tuple]:
    at: dict[int, tuple] = {}
    for fn, f in view.functions.items():
        for a in f.args:
            at[id(a)] = ("arg", fn, a.index, a.name, a.type)
        for bi, b in enumerate(f.blocks):
            at[id(b)] = ("block", fn, bi, b.name)
            for ii, i in enumerate(b.instrs):
                at[id(i)] = ("inst", fn, bi, ii, i.name, i.type)
    return at


def differences(a: ModuleView, b: ModuleView) -> list[str]:
    """Where two views of one module differ (empty when they agree value for value): the check
    of this reader against llvmlite's walk (`SIRIUS_IRVIEW_CHECK=1`, tests)."""
    out: list[str] = []
    if list(a.functions) != list(b.functions):
        out.append(f"functions: {list(a.functions)} vs {list(b.functions)}")
    if a.struct_bodies != b.struct_bodies:
        out.append("struct types")
    for g in a.globals.keys() | b.globals.keys():
        ga, gb = a.globals.get(g), b.globals.get(g)
        if ga is None or gb is None or ga.type != gb.type or \
                a.global_texts.get(g) != b.global_texts.get(g):
            out.append(f"global @{g}")
    pa, pb = _positions(a), _positions(b)
    for fn, fa in a.functions.items():
        fb = b.functions.get(fn)
        if fb is None:
            continue
        for attr in ("type", "is_declaration", "text", "calling_conv", "attributes", "var_names",
                     "subprogram"):
            if getattr(fa, attr) != getattr(fb, attr):
                out.append(f"@{fn}: {attr}")
        if [pa[id(x)] for x in fa.args] != [pb[id(x)] for x in fb.args]:
            out.append(f"@{fn}: arguments")
        if [len(x.instrs) for x in fa.blocks] != [len(x.instrs) for x in fb.blocks]:
            out.append(f"@{fn}: blocks")
            continue
        for ba, bb in zip(fa.blocks, fb.blocks, strict=True):
            if ba.name != bb.name:
                out.append(f"@{fn}: block {ba.name!r} vs {bb.name!r}")
            for ia, ib in zip(ba.instrs, bb.instrs, strict=True):
                for attr in ("name", "opcode", "type", "text", "dbg"):
                    if getattr(ia, attr) != getattr(ib, attr):
                        out.append(f"@{fn}: {ia.text!r}: {attr} {getattr(ia, attr)!r} vs "
                                   f"{getattr(ib, attr)!r}")
                if [_key(o, pa) for o in ia.operands] != [_key(o, pb) for o in ib.operands] or \
                        [_key(o, pa) for o in ia.incoming] != [_key(o, pb) for o in ib.incoming]:
                    out.append(f"@{fn}: {ia.text!r}: operands "
                               f"{[_key(o, pa) for o in ia.operands]} vs "
                               f"{[_key(o, pb) for o in ib.operands]}")
    return out
