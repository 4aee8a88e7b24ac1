"""A plain-Python view of an llvmlite module, built once and then read without the binding.

llvmlite's ValueRefs are fresh wrappers on every access and expose neither icmp predicates nor
GEP source types nor debug locations; this view gives every value a stable identity and parses
those facts from the instruction text once. It never mutates IR.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections import OrderedDict
from collections.abc import Collection

import llvmlite.binding as llvm

from sirius.analysis.debuginfo import DebugInfo
from sirius.analysis.irlex import (  # noqa: F401 (the text helpers, as before)
    DBG_RE,
    DBG_VALUE_RE,
    closure,
    definitions,
    instruction_lines,
    without_definitions,
)
from sirius.analysis.irvalues import (  # noqa: F401 (the view's types, as before)
    Argument,
    Block,
    Const,
    ConstExpr,
    Function,
    Instr,
    ModuleView,
    Value,
)


def _addr(ref: llvm.ValueRef) -> int:
    return ctypes.cast(ref._ptr, ctypes.c_void_p).value or 0


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
    """The view of `module`. `only`: the functions a caller
    reads; the view then holds their bodies and those of every function they reference,
    transitively, and the module's other definitions as entries without a body
    (`is_declaration` True, no text): a view of part of a big module (the fused kernels of a
    paper-shape model), which takes a fraction of the time. (A whole view of the same module
    built recently serves instead: read the functions by name.) Global variables are always
    all there. A view is shared: never change one.

    The view is read from the module's text (`irparse`); a module with a construct that reader
    does not know is walked through llvmlite instead (the same view, slower)."""
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
        view = _RECENT[key] = _view_of(module, text, only)
        while len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
        if only is None:
            _WHOLE[text] = view
            while len(_WHOLE) > _RECENT_SIZE:
                _WHOLE.popitem(last=False)
    else:
        _RECENT.move_to_end(key)
    return view


def _view_of(module: llvm.ModuleRef, text: str, only: Collection[str] | None) -> ModuleView:
    from sirius.analysis import irparse

    try:
        view = irparse.read_view(text, only)
    except irparse.Unsupported:
        view = None
    if view is None or os.environ.get("SIRIUS_IRVIEW_CHECK"):
        ref = _build_view(module, text, only)
        if view is not None:  # the check mode: both readers, compared (tests, debugging)
            diffs = irparse.differences(ref, view)
            if diffs:
                raise AssertionError("the text reader's view differs from llvmlite's:\n"
                                     + "\n".join(diffs[:20]))
        view = ref
    return view


def _build_view(module: llvm.ModuleRef, text: str, only: Collection[str] | None) -> ModuleView:
    """The view walked through llvmlite (see `build_view`)."""
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
        lines = iter(instruction_lines(f.text))
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
                m = DBG_RE.search(itext)
                name, opcode = _name_and_opcode(itext, iref)
                ins = Instr("inst", name, types.of(iref), opcode=opcode, block=b,
                            text=itext, dbg=int(m.group(1)) if m else None)
                b.instrs.append(ins)
                by_addr[_addr(iref)] = ins
                pending.append((ins, iref))
        for m in DBG_VALUE_RE.finditer(f.text):
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
