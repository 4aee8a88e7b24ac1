"""What each kernel of a device module is: parameters, launch bounds, shared memory, barriers,
warp-level operations, atomics, inline asm, textures and the device functions it calls.

Facts are counted per IR call site (after clang's -O2: an unrolled loop of N shuffles is N sites),
over the kernel and every device function it reaches through direct calls. A kernel is a function
with the `ptx_kernel` calling convention (clang-22 no longer writes `!nvvm.annotations` kernels).
Parameter C types come from the DILocalVariables (`arg: N`) of the kernel's DISubprogram; a
module compiled with line tables only (`emissionKind: DebugDirectivesOnly`, what plain `-g` gives
optimized device code; sirius's device flags ask for `-debug-info-kind=constructor`) has none:
`type` is then "". `__launch_bounds__` is read from clang-22's "nvvm.maxntid"/"nvvm.minctasm"
function attributes.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from sirius.analysis.debuginfo import DebugInfo
from sirius.analysis.irtypes import type_size
from sirius.analysis.irview import ConstExpr, Function, Instr, ModuleView, Value
from sirius.diagnostics import Location


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str  # C type from debug info, e.g. "const float *"; "" without full debug info
    ir_type: str  # LLVM type, e.g. "ptr", "i32", "float"


@dataclass(frozen=True, slots=True)
class KernelInfo:
    name: str
    mangled: str
    loc: Location
    params: tuple[Param, ...]
    launch_bounds: tuple[int, int | None] | None  # (max threads per block, min blocks per SM)
    static_smem_bytes: int
    dynamic_smem: bool  # an `extern __shared__` array is referenced
    shared_arrays: tuple[tuple[str, int], ...]  # (source name, bytes); extern arrays are 0
    barriers: int
    warp_ops: tuple[tuple[str, int], ...]
    atomics: tuple[tuple[str, int], ...]
    inline_asm: tuple[str, ...]
    textures: bool
    calls: tuple[str, ...]  # non-inlined device functions reachable from the kernel (IR names)
    libdevice: tuple[str, ...]
    indirect_calls: int
    recursive: bool


_SPACES = {0: "generic", 1: "global", 3: "shared", 4: "constant", 5: "local"}
_ADDRSPACE_RE = re.compile(r"addrspace\((\d+)\)")
_ASM_RE = re.compile(
    r'\bcall\b[^"]*?\basm (?:sideeffect |alignstack |inteldialect |unwind )*"([^"]*)"')
_BARRIER_RE = re.compile(r"llvm\.nvvm\.(?:barrier|bar\.sync)")
_ASM_BARRIER_RE = re.compile(r"(?<![\w.])(?:bar|barrier)(?:\.cta)?\.(?:sync|red|arrive)\b")
_TEXTURE_RE = re.compile(r"llvm\.nvvm\.(?:tex|tld4|suld|sust|txq|suq|texsurf)")
_ASM_TEXTURE_RE = re.compile(r"^\s*(?:tex|tld4|suld|sust|txq|suq)\.")
_NVVM_ATOMIC_RE = re.compile(r"llvm\.nvvm\.atomic\.(\w+?)\.gen\.[if]\.(\w+?)\.")
_WARP_OPS = [
    (re.compile(r"llvm\.nvvm\.(shfl(?:\.sync)?\.(?:down|up|bfly|idx))\b"), r"\1"),
    (re.compile(r"llvm\.nvvm\.vote\.(ballot|all|any|uni)\b"), r"vote.\1"),
    (re.compile(r"llvm\.nvvm\.(activemask)$"), r"\1"),
    (re.compile(r"llvm\.nvvm\.match\.(any|all)\.sync\b"), r"match.\1"),
    (re.compile(r"llvm\.nvvm\.redux\.sync\.(\w+)"), r"redux.\1"),
    (re.compile(r"llvm\.nvvm\.bar\.warp\.sync$"), "syncwarp"),
]


@dataclass
class _Facts:
    """What one function's own body does (no callees)."""

    barriers: int = 0
    warp_ops: Counter[str] = field(default_factory=Counter)
    atomics: Counter[str] = field(default_factory=Counter)
    inline_asm: list[str] = field(default_factory=list)
    textures: bool = False
    callees: list[str] = field(default_factory=list)  # direct callees, first-call order
    indirect_calls: int = 0
    globals: set[str] = field(default_factory=set)


def _unescape(s: str) -> str:
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), s)


def _global_space(view: ModuleView, name: str) -> str:
    decl = view.global_texts.get(name, "").split(" = ", 1)[-1]
    m = _ADDRSPACE_RE.search(re.split(r"\b(?:global|constant)\b", decl, maxsplit=1)[0])
    return _SPACES.get(int(m.group(1)) if m else 0, "generic")


def _space(view: ModuleView, v: Value, depth: int = 0) -> str:
    """The address space a pointer value points into, looking through GEPs and casts."""
    if m := _ADDRSPACE_RE.search(v.type):
        return _SPACES.get(int(m.group(1)), "generic")
    if depth > 16:
        return "generic"
    if isinstance(v, Instr):
        if v.opcode in ("getelementptr", "bitcast", "addrspacecast"):
            return _space(view, v.operands[0], depth + 1)
        if v.opcode in ("phi", "select"):
            sources = v.operands if v.opcode == "phi" else v.operands[1:3]
            spaces = {_space(view, o, depth + 1) for o in sources}
            return spaces.pop() if len(spaces) == 1 else "generic"
    if isinstance(v, ConstExpr) and (m := _ADDRSPACE_RE.search(v.text)):
        return _SPACES.get(int(m.group(1)), "generic")
    if v.kind == "global":
        return _global_space(view, v.name)
    return "generic"


def _call_facts(view: ModuleView, ins: Instr, facts: _Facts) -> None:
    if m := _ASM_RE.search(ins.text):
        asm = _unescape(m.group(1))
        facts.inline_asm.append(asm)
        facts.barriers += bool(_ASM_BARRIER_RE.search(asm))
        facts.textures |= bool(_ASM_TEXTURE_RE.match(asm))
        return
    callee = ins.callee
    if not isinstance(callee, Function):
        facts.indirect_calls += 1
        return
    name = callee.name
    if not name.startswith("llvm."):
        facts.callees.append(name)
        return
    facts.barriers += bool(_BARRIER_RE.match(name))
    facts.textures |= bool(_TEXTURE_RE.match(name))
    if m := _NVVM_ATOMIC_RE.match(name):
        op = "cmpxchg" if m.group(1) == "cas" else f"atomicrmw {m.group(1)}"
        facts.atomics[f"{op}.{m.group(2)} {_space(view, ins.args[0])}"] += 1
    for pattern, kind in _WARP_OPS:
        if m := pattern.match(name):
            facts.warp_ops[m.expand(kind)] += 1


def _function_facts(view: ModuleView, f: Function) -> _Facts:
    facts = _Facts()
    facts.globals = {g.strip('"') for g in re.findall(r'@([-\w.$]+|"[^"]+")', f.text)}
    for block in f.blocks:
        for ins in block.instrs:
            if ins.opcode in ("atomicrmw", "cmpxchg"):
                op = re.search(r"\b(atomicrmw (?:volatile )?\w+|cmpxchg)", ins.text)
                scope = re.search(r'syncscope\("([-\w]+)"\)', ins.text)
                kind = (op.group(1).replace("volatile ", "") if op else ins.opcode) + (
                    f".{scope.group(1)}" if scope else "")
                facts.atomics[f"{kind} {_space(view, ins.operands[0])}"] += 1
            elif ins.opcode == "call":
                _call_facts(view, ins, facts)
    return facts


def _reachable(kernel: str, facts: dict[str, _Facts]) -> tuple[list[str], bool]:
    """Functions reachable from `kernel` by direct calls (pre-order), and whether a cycle is."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1 on the DFS stack, 2 done
    recursive = False

    def visit(name: str) -> None:
        nonlocal recursive
        state[name] = 1
        order.append(name)
        for callee in facts[name].callees if name in facts else ():
            if state.get(callee) == 1:
                recursive = True
            elif callee not in state:
                visit(callee)
        state[name] = 2

    visit(kernel)
    return order, recursive


def _c_type(debug: DebugInfo, ref: str | None, depth: int = 0) -> str:
    """Spell a DIType as C does: "const float *", "float *__restrict__", "int"."""
    node = int(ref[1:]) if ref and ref.startswith("!") and ref[1:].isdigit() else None
    if node is None or node not in debug.nodes or depth > 32:
        return "void"
    kind, fields = debug.nodes[node]
    name = debug.string(node, "name")
    if kind != "!DIDerivedType" or fields.get("tag") == "DW_TAG_typedef":
        return name or ("<function>" if kind == "!DISubroutineType" else "<anonymous>")
    base = _c_type(debug, fields.get("baseType"), depth + 1)
    tag = fields.get("tag", "")
    indirect = base.endswith(("*", "&"))
    if tag == "DW_TAG_pointer_type":
        return base + ("*" if indirect else " *")
    if tag in ("DW_TAG_reference_type", "DW_TAG_rvalue_reference_type"):
        return base + ("" if indirect else " ") + ("&" if tag == "DW_TAG_reference_type" else "&&")
    if tag in ("DW_TAG_const_type", "DW_TAG_volatile_type"):
        q = tag[7:-5]
        return f"{base}{q}" if indirect else f"{q} {base}"
    if tag == "DW_TAG_restrict_type":
        return base + "__restrict__" if indirect else base
    return base


def _arg_vars(debug: DebugInfo) -> dict[int, dict[int, tuple[str, str | None]]]:
    """DISubprogram node -> {arg number: (name, type ref)}."""
    out: dict[int, dict[int, tuple[str, str | None]]] = {}
    for _, fields in debug.nodes.of_kind("!DILocalVariable"):
        if "arg" in fields and (scope := fields.get("scope")):
            name = fields.get("name", '""').strip('"')
            out.setdefault(int(scope[1:]), {})[int(fields["arg"])] = (name, fields.get("type"))
    return out


def _launch_bounds(view: ModuleView, header: str) -> tuple[int, int | None] | None:
    groups = re.findall(r"#(\d+)", header.rsplit(")", 1)[-1])
    attrs = header + "".join(a for n in groups if (a := view.attribute_group(int(n))))
    maxntid = re.search(r'"nvvm\.maxntid"="([\d,]+)"', attrs)
    if maxntid is None:
        return None
    minctasm = re.search(r'"nvvm\.minctasm"="(\d+)"', attrs)
    threads = 1
    for n in maxntid.group(1).split(","):  # "x" or "x,y,z"
        threads *= int(n)
    return threads, int(minctasm.group(1)) if minctasm else None


def _shared_name(view: ModuleView, name: str) -> str:
    """Source name of a shared global: its DIGlobalVariable, else the local-static mangling."""
    m = re.search(r"!dbg !(\d+)", view.global_texts.get(name, ""))
    if m is not None:
        var = view.debug.field(int(m.group(1)), "var")
        if (src := view.debug.string(int(var[1:]) if var else None, "name")) is not None:
            return src
    if name.startswith("_ZZ") and (m := re.search(r"E(\d+)(\w+)$", name)):
        return m.group(2)[: int(m.group(1))]
    return name


def kernel_infos(view: ModuleView) -> list[KernelInfo]:
    """Every kernel of a device module view, in module order."""
    facts = {n: _function_facts(view, f) for n, f in view.functions.items() if not f.is_declaration}
    arg_vars = _arg_vars(view.debug)
    shared = {n for n in view.globals if _global_space(view, n) == "shared"}
    out = []
    for f in view.functions.values():
        if f.calling_conv != "ptx_kernel":
            continue
        header = f.text.split("\n", 1)[0]
        sp = f.subprogram
        dbg_args = arg_vars.get(sp, {}) if sp is not None else {}
        params = tuple(
            Param(dbg_args.get(a.index + 1, (a.name, None))[0] or a.name,
                  _c_type(view.debug, dbg_args[a.index + 1][1]) if a.index + 1 in dbg_args else "",
                  a.type)
            for a in f.args)
        reach, recursive = _reachable(f.name, facts)
        parts = [facts[n] for n in reach if n in facts]
        refs = set().union(*(p.globals for p in parts))
        used = [g for g in view.globals if g in shared and g in refs]  # module order
        arrays = tuple((_shared_name(view, g), type_size(view.globals[g].type, view.struct_bodies))
                       for g in used)
        dynamic = any(re.search(r"= (?:\w+ )*external\b", view.global_texts[g]) for g in used)
        callees = [n for n in reach[1:] if not n.startswith("llvm.")]
        out.append(KernelInfo(
            name=view.debug.string(sp, "name") or f.name,
            mangled=f.name,
            loc=view.debug.subprogram_location(sp) or Location("<unknown>", 0),
            params=params,
            launch_bounds=_launch_bounds(view, header),
            static_smem_bytes=sum(size for _, size in arrays),
            dynamic_smem=dynamic,
            shared_arrays=arrays,
            barriers=sum(p.barriers for p in parts),
            warp_ops=tuple(sorted(sum((p.warp_ops for p in parts), Counter()).items())),
            atomics=tuple(sorted(sum((p.atomics for p in parts), Counter()).items())),
            inline_asm=tuple(a for p in parts for a in p.inline_asm),
            textures=any(p.textures for p in parts),
            calls=tuple(n for n in callees if not n.startswith("__nv_")),
            libdevice=tuple(sorted(n for n in callees if n.startswith("__nv_"))),
            indirect_calls=sum(p.indirect_calls for p in parts),
            recursive=recursive,
        ))
    return out


def kernel_to_json(k: KernelInfo) -> dict:
    return {
        "name": k.name,
        "mangled": k.mangled,
        "loc": str(k.loc),
        "params": [{"name": p.name, "type": p.type, "ir_type": p.ir_type} for p in k.params],
        "launch_bounds": None if k.launch_bounds is None else
        {"max_threads": k.launch_bounds[0], "min_blocks": k.launch_bounds[1]},
        "static_smem_bytes": k.static_smem_bytes,
        "dynamic_smem": k.dynamic_smem,
        "shared_arrays": [{"name": n, "bytes": b} for n, b in k.shared_arrays],
        "barriers": k.barriers,
        "warp_ops": dict(k.warp_ops),
        "atomics": dict(k.atomics),
        "inline_asm": list(k.inline_asm),
        "textures": k.textures,
        "calls": list(k.calls),
        "libdevice": list(k.libdevice),
        "indirect_calls": k.indirect_calls,
        "recursive": k.recursive,
    }
