"""A plain-Python view of an llvmlite module, built once and then read without the binding.

llvmlite's ValueRefs are fresh wrappers on every access and expose neither icmp predicates nor
GEP source types nor debug locations; this view gives every value a stable identity and parses
those facts from the instruction text once. It never mutates IR.
"""

from __future__ import annotations

import ctypes
import re
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from sirius.analysis.debuginfo import DebugInfo
from sirius.diagnostics import Location


@dataclass(eq=False)
class Value:
    kind: str  # inst, arg, const, null, undef, global, func, constexpr, block, other
    name: str
    type: str

    def __repr__(self) -> str:
        return f"<{self.kind} %{self.name}: {self.type}>"


@dataclass(eq=False, repr=False)
class Const(Value):
    value: int | float | None = None


@dataclass(eq=False, repr=False)
class ConstExpr(Value):
    text: str = ""


@dataclass(eq=False, repr=False)
class Instr(Value):
    opcode: str = ""
    operands: list[Value] = field(default_factory=list)
    block: Block | None = None
    incoming: list[Block] = field(default_factory=list)  # phi only
    text: str = ""
    dbg: int | None = None

    @property
    def predicate(self) -> str:
        m = re.search(r"= [if]cmp (?:samesign |fast |nnan |ninf |nsz )*(\w+) ", self.text)
        return m.group(1) if m else ""

    def switch_cases(self) -> list[tuple[int, Block]]:
        """A switch's (case value, destination) pairs, in order. LLVM 22 keeps the case values
        out of the operand list (operands: condition, default, then the destinations), so the
        values are read from the instruction's text."""
        values = re.findall(r"\bi\d+ (-?\d+), label ", self.text.split("[", 1)[-1])
        dests = [o for o in self.operands[2:] if isinstance(o, Block)]
        if len(values) != len(dests):
            raise ValueError(f"cannot read the cases of {self.text!r}")
        return [(int(v), d) for v, d in zip(values, dests, strict=True)]

    @property
    def callee(self) -> Value | None:
        return self.operands[-1] if self.opcode in ("call", "invoke") else None

    @property
    def args(self) -> list[Value]:
        return self.operands[:-1] if self.opcode == "call" else self.operands[:-3]

    @property
    def source_type(self) -> str:
        """The element type a GEP indexes or an alloca allocates."""
        if self.opcode == "getelementptr":
            m = re.search(r"getelementptr (?:(?:inbounds|nuw|nusw|inrange\(\S+\)) )*(.+?), ptr",
                          self.text)
        elif self.opcode == "alloca":
            m = re.search(r"alloca (?:inalloca )?(.+?)"
                          r"(?:, (?:i\d+ \S+|align \d+|addrspace).*)?(?:, !|$)", self.text)
        else:
            m = None
        return m.group(1).strip() if m else ""

    def successors(self) -> list[Block]:
        """Branch targets in order: for `br i1 %c, label %T, label %F` that is [T, F]."""
        if self.opcode == "br":
            blocks = [o for o in self.operands if isinstance(o, Block)]
            return list(reversed(blocks)) if len(self.operands) == 3 else blocks
        if self.opcode == "switch":
            blocks = [o for o in self.operands if isinstance(o, Block)]
            return blocks
        if self.opcode in ("invoke", "callbr"):
            return [o for o in self.operands if isinstance(o, Block)]
        return []


@dataclass(eq=False, repr=False)
class Block(Value):
    instrs: list[Instr] = field(default_factory=list)
    function: Function | None = None

    @property
    def terminator(self) -> Instr:
        return self.instrs[-1]

    @property
    def succs(self) -> list[Block]:
        return self.terminator.successors()


@dataclass(eq=False, repr=False)
class Argument(Value):
    index: int = 0


@dataclass(eq=False, repr=False)
class Function(Value):
    args: list[Argument] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    is_declaration: bool = True
    text: str = ""
    calling_conv: str = ""
    attributes: str = ""
    var_names: dict[str, str] = field(default_factory=dict)  # SSA name -> source variable
    subprogram: int | None = None  # the DISubprogram of the definition, when compiled with -g

    @property
    def entry(self) -> Block:
        return self.blocks[0]


@dataclass
class ModuleView:
    functions: dict[str, Function]
    globals: dict[str, Value]
    global_texts: dict[str, str]
    struct_bodies: dict[str, str]
    debug: DebugInfo
    text: str

    def loc(self, inst: Instr) -> Location | None:
        return self.debug.location(inst.dbg) if inst.dbg is not None else None

    def source_name(self, fn: Function) -> str | None:
        """The function's name in the source (a kernel's `step`, not `_Z4stepPKfPfif`)."""
        return self.debug.string(fn.subprogram, "name")


def _addr(ref: llvm.ValueRef) -> int:
    return ctypes.cast(ref._ptr, ctypes.c_void_p).value or 0


_DBG_RE = re.compile(r", !dbg !(\d+)")
_DBG_VALUE_RE = re.compile(r"#dbg_(?:value|declare)\((?:[^,%]*?) %([-\w.$]+), !(\d+),")


_DEFINE_RE = re.compile(r"^define [^\n]*?@(\"[^\"]+\"|[-\w.$]+)\(.*?^}$", re.M | re.S)


def _instruction_lines(body: str) -> list[str]:
    """The instruction lines of one function's text, in order (labels, records, blanks dropped)."""
    out: list[str] = []
    for line in body.splitlines()[1:-1]:
        s = line.strip()
        if not s or s.startswith(";") or s.startswith("#dbg_") or not line.startswith("  "):
            continue
        if out and (line.startswith("   ") or s.startswith("]")):
            # an instruction printed on several lines (instructions are indented by two
            # spaces): a switch's cases and its `]`, invoke's `to label .. unwind label ..`,
            # a landingpad's clauses
            out[-1] += " " + s
            continue
        out.append(s)
    return out


_GLOBAL_REF_RE = re.compile(r'@("(?:[^"\\]|\\.)*"|[-\w.$]+)')


def definitions(text: str) -> dict[str, str]:
    """Each function a module's text defines, by name: its `define ... { ... }` text."""
    return {m.group(1).strip('"'): m.group(0) for m in _DEFINE_RE.finditer(text)}


def without_definitions(text: str, keep: Collection[str]) -> str:
    """A module's text with the definitions of the functions not in `keep` left out (their
    uses must be too: see `closure`)."""
    return _DEFINE_RE.sub(lambda m: m.group(0) if m.group(1).strip('"') in keep else "", text)


def closure(roots: Collection[str], bodies: dict[str, str]) -> set[str]:
    """`roots` and every function their bodies reference (`@name`: calls, function pointers),
    transitively, among the functions `bodies` defines."""
    todo = [n for n in roots if n in bodies]
    seen = set(todo)
    while todo:
        for m in _GLOBAL_REF_RE.finditer(bodies[todo.pop()]):
            name = m.group(1).strip('"')
            if name in bodies and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


# The last views built, by (module text, `only`): one program's device module is viewed by the
# frontend's kernel facts, the kernel summaries and the executor, each from its own call. Views
# are never changed after they are built, so the same view serves every caller; keyed by the
# text, a module changed in place (a pass run on it) gets a view of its own.
_RECENT: OrderedDict[tuple[str, frozenset[str] | None], ModuleView] = OrderedDict()
_RECENT_SIZE = 3
# The last whole views (only=None), by text, apart: they also serve a caller that asks for part
# of the same module (code generation reads the members of the module the analysis viewed
# whole), and the partial views built in between do not push them out.
_WHOLE: OrderedDict[str, ModuleView] = OrderedDict()


def build_view(module: llvm.ModuleRef, only: Collection[str] | None = None) -> ModuleView:
    """The view of `module`. `only`: the functions a caller reads; the view then holds their
    bodies and those of every function they reference, transitively, and the module's other
    definitions as entries without a body (`is_declaration` True, no text): a view of part of
    a big module (the fused kernels of a paper-shape model), which takes a fraction of the
    time. (A whole view of the same module built recently serves instead: read the functions
    by name.) Global variables are always all there. A view is shared: never change one."""
    # Metadata numbers are only consistent within one print of the whole module, so every text
    # this view keeps (instructions, function bodies) is cut out of that one print.
    text = str(module)
    key = (text, None if only is None else frozenset(only))
    view = _RECENT.get(key)
    if view is None and only is not None:  # a whole view serves any part of its module
        view = _WHOLE.get(text)
        if view is not None:
            _WHOLE.move_to_end(text)
            return view
    if view is None:
        view = _RECENT[key] = _build_view(module, text, only)
        while len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
        if only is None:
            _WHOLE[text] = view
            while len(_WHOLE) > _RECENT_SIZE:
                _WHOLE.popitem(last=False)
    else:
        _RECENT.move_to_end(key)
    return view


def _build_view(module: llvm.ModuleRef, text: str, only: Collection[str] | None) -> ModuleView:
    bodies = definitions(text)
    keep = None if only is None else closure(only, bodies)
    debug = DebugInfo.parse(text)
    by_addr: dict[int, Value] = {}
    functions: dict[str, Function] = {}
    globals_: dict[str, Value] = {}
    global_texts: dict[str, str] = {}
    for gv in module.global_variables:
        v = Value("global", gv.name, str(gv.global_value_type))
        globals_[gv.name] = v
        by_addr[_addr(gv)] = v
        global_texts[gv.name] = str(gv)
    fn_refs = list(module.functions)
    for fref in fn_refs:
        f = Function("func", fref.name, "ptr", is_declaration=fref.is_declaration or (
            keep is not None and fref.name not in keep))
        functions[f.name] = f
        by_addr[_addr(fref)] = f
    # First pass: create every block, argument and instruction so operands can be resolved.
    pending: list[tuple[Instr, llvm.ValueRef]] = []
    types = _Types()
    for fref in fn_refs:
        f = functions[fref.name]
        if f.is_declaration:
            continue
        f.text = bodies.get(fref.name, "")
        lines = iter(_instruction_lines(f.text))
        header = f.text.split("{", 1)[0]
        sp = re.search(r"!dbg !(\d+)", header)
        f.subprogram = int(sp.group(1)) if sp else None
        cc = re.search(r"define (?:[\w()]+ )*?(ptx_kernel|ptx_device)\b", header)
        f.calling_conv = cc.group(1) if cc else ""
        for i, aref in enumerate(fref.arguments):
            a = Argument("arg", aref.name, str(aref.type), index=i)
            f.args.append(a)
            by_addr[_addr(aref)] = a
        for bref in fref.blocks:
            b = Block("block", bref.name, "label", function=f)
            by_addr[_addr(bref)] = b
            f.blocks.append(b)
            for iref in bref.instructions:
                itext = next(lines, "") or str(iref).strip()
                m = _DBG_RE.search(itext)
                name, opcode = _name_and_opcode(itext, iref)
                ins = Instr("inst", name, types.of(iref), opcode=opcode, block=b,
                            text=itext, dbg=int(m.group(1)) if m else None)
                b.instrs.append(ins)
                by_addr[_addr(iref)] = ins
                pending.append((ins, iref))
        for m in _DBG_VALUE_RE.finditer(f.text):
            var = debug.var_name(int(m.group(2)))
            if var:
                f.var_names.setdefault(m.group(1), var)
    for ins, iref in pending:
        ins.operands = [_operand(o, by_addr, types) for o in iref.operands]
        if ins.opcode == "phi":
            ins.incoming = [by_addr[_addr(b)] for b in iref.incoming_blocks]  # type: ignore[misc]
    structs = dict(re.findall(r"^(%[-\w.$\"]+) = type (.+)$", text, re.M))
    return ModuleView(functions, globals_, global_texts, structs, debug, text)


# `%name = ` (or nothing), then the opcode, as LLVM prints an instruction
_HEAD_RE = re.compile(r'(?:%("(?:[^"\\]|\\.)*"|[-\w.$]+) = )?(?:(?:tail|musttail|notail) )?'
                      r'([a-z][a-z_]*)\b')


def _name_and_opcode(text: str, ref: llvm.ValueRef) -> tuple[str, str]:
    """An instruction's name and opcode read from its printed text (two calls into llvmlite
    fewer per instruction: a fifth of the time of a big host module's view); from llvmlite
    where the text has a quoted name or does not look like an instruction."""
    m = _HEAD_RE.match(text)
    if m is None or (m.group(1) or "").startswith('"'):
        return ref.name, ref.opcode
    name = m.group(1) or ""
    return ("" if name.isdigit() else name), m.group(2)


class _Types:
    """Type texts by the type's address: LLVM types are uniqued per context, so each is printed
    once per view (the printing is most of the llvmlite calls of a big module's view)."""

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}

    def of(self, ref: llvm.ValueRef) -> str:
        t = ref.type
        key = _addr(t)
        got = self.texts.get(key)
        if got is None:
            self.texts[key] = got = str(t)
        return got


def _operand(o: llvm.ValueRef, by_addr: dict[int, Value], types: _Types) -> Value:
    addr = _addr(o)
    known = by_addr.get(addr)
    if known is not None:
        return known
    kind = o.value_kind.name
    ty = types.of(o)
    if kind == "constant_int":
        v: Value = Const("const", "", ty, value=o.get_constant_value(signed_int=True))
    elif kind == "constant_fp":
        v = Const("const", "", ty, value=float(o.get_constant_value()))
    elif kind == "constant_pointer_null":
        v = Const("null", "", ty, value=0)
    elif kind in ("undef_value", "poison_value"):
        v = Value("undef", "", ty)
    elif kind == "constant_expr":
        v = ConstExpr("constexpr", "", ty, text=str(o))
    else:
        return Value("other", o.name, ty)
    # constants are uniqued by LLVM too: one immutable view object per constant
    by_addr[addr] = v
    return v
