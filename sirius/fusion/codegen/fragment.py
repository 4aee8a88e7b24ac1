"""Member kernels as fragments: what a kernel body touches, and the rewrites that make a copy of
it a function of its ids.

A fragment is an internal copy of a kernel that takes twelve more i32 parameters,
`%__sirius.tid.x .. %__sirius.nctaid.z`, and reads its thread/block ids and dims from them
instead of from `llvm.nvvm.read.ptx.sreg.*`. Functions it calls are inlined into it first
(copies marked alwaysinline), so sreg reads, barriers and shared arrays in callees are rewritten
too; a callee that cannot be inlined (recursion) and touches any of them is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sirius.analysis.irview import Function, ModuleView
from sirius.fusion.codegen import irtext
from sirius.fusion.spec import CodegenError, FusedKernelSpec

SREG_KINDS = ("tid", "ctaid", "ntid", "nctaid")
ID_PARAMS = tuple(f"__sirius.{k}.{a}" for k in SREG_KINDS for a in "xyz")
WARP_OPS = re.compile(r"^llvm\.nvvm\.(shfl|vote|match|activemask|bar\.warp\.sync|redux)")
BARRIER = re.compile(r"^llvm\.nvvm\.(barrier|bar\.sync|bar\.red)")
# barriers a partial fragment can have rewritten into counted ones
SYNC_ALL = re.compile(r"^llvm\.nvvm\.(barrier\.cta\.sync(\.aligned)?\.all|barrier0)$")
RED_ALL = re.compile(r"^llvm\.nvvm\.barrier\.cta\.red\.(popc|and|or)(\.aligned)?\.all$")
ASM_CONTEXT = re.compile(r"%(tid|ntid|ctaid|nctaid|laneid|warpid|lanemask|cluster)|\bbar(rier)?\b"
                         r"|\bexit\b|\btrap\b")


@dataclass
class Facts:
    """What one function's body does that depends on its block context (direct, not callees)."""

    sregs: set[str] = field(default_factory=set)  # "tid.x", "laneid", ...
    barriers: list[tuple[str, str]] = field(default_factory=list)  # (intrinsic, id operand)
    warp_ops: set[str] = field(default_factory=set)
    shared: set[str] = field(default_factory=set)  # addrspace(3) globals it names
    asm: list[str] = field(default_factory=list)  # inline asm that touches ids or barriers
    calls: set[str] = field(default_factory=set)  # defined functions it calls
    indirect: bool = False

    def merge(self, o: Facts) -> None:
        self.sregs |= o.sregs
        self.barriers += o.barriers
        self.warp_ops |= o.warp_ops
        self.shared |= o.shared
        self.asm += o.asm
        self.calls |= o.calls
        self.indirect |= o.indirect

    @property
    def context(self) -> bool:
        """Whether it depends on which block/thread runs it, beyond plain memory accesses."""
        return bool(self.sregs or self.barriers or self.warp_ops or self.shared or self.asm)


def shared_globals(view: ModuleView) -> dict[str, bool]:
    """addrspace(3) globals -> whether external (the dynamic shared area)."""
    out = {}
    for name, text in view.global_texts.items():
        if re.search(r"= (?:[\w()]+ )*addrspace\(3\) (global|constant)", text):
            out[name] = bool(re.search(r"= (?:[\w()]+ )*?external\b", text))
    return out


def function_facts(view: ModuleView, fn: Function, shared: dict[str, bool]) -> Facts:
    f = Facts()
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.opcode != "call":
                continue
            callee = ins.callee
            if isinstance(callee, Function):
                name = callee.name
                if name.startswith("llvm.nvvm.read.ptx.sreg."):
                    f.sregs.add(name[len("llvm.nvvm.read.ptx.sreg."):])
                elif BARRIER.match(name):
                    first = ins.args[0] if ins.args else None
                    val = getattr(first, "value", None)
                    f.barriers.append((name, "" if val is None else str(val)))
                elif WARP_OPS.match(name):
                    f.warp_ops.add(name)
                elif not callee.is_declaration:
                    f.calls.add(name)
            elif re.search(r"\bcall\b[^@]*\basm\b", ins.text):
                if ASM_CONTEXT.search(ins.text):
                    f.asm.append(ins.text)
            else:
                f.indirect = True
    for g in shared:
        if re.search(re.escape(irtext.global_ref(g)) + r"(?![-\w.$])", fn.text):
            f.shared.add(g)
    return f


def closure(view: ModuleView, name: str, shared: dict[str, bool],
            cache: dict[str, Facts]) -> tuple[Facts, set[str]]:
    """Facts of `name` and everything it calls, and the defined functions reached."""
    total = Facts()
    seen: set[str] = set()
    todo = [name]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in cache:
            cache[n] = function_facts(view, view.functions[n], shared)
        total.merge(cache[n])
        todo.extend(cache[n].calls)
    return total, seen - {name}


# rewriting instruction lines -------------------------------------------------------------------
_CALL = re.compile(r"^(\s*)(?:(%" + irtext.NAME + r") = )?(?:(?:tail|musttail|notail) )?call ")


@dataclass(frozen=True, slots=True)
class Call:
    indent: str
    result: str | None
    callee: str
    ret: str
    args: tuple[str, ...]
    attachments: str  # ", !dbg !12" ...


def parse_call(line: str) -> Call | None:
    m = _CALL.match(line)
    if not m:
        return None
    at = line.find("@", m.end())
    paren = re.match(r"@(" + irtext.NAME + r")\(", line[at:]) if at >= 0 else None
    if not paren:
        return None
    ret = line[m.end():at].strip().split()[-1] if line[m.end():at].strip() else "void"
    i, depth = at + paren.end(), 1
    start = i
    while depth:
        c = line[i]
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        i += 1
    rest = re.sub(r"^\s*#\d+", "", line[i:])
    atts = "".join(re.findall(r", ![\w.]+ !\d+", rest))
    return Call(m.group(1), m.group(2), irtext.unquote(paren.group(1)), ret,
                tuple(irtext.split_top(line[start:i - 1])), atts)


def rewrite_sreg(line: str) -> str | None:
    """The replacement of a `sreg.{tid,ctaid,ntid,nctaid}.{x,y,z}` read, else None."""
    c = parse_call(line)
    if c is None or c.result is None:
        return None
    m = re.fullmatch(r"llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid|ntid|nctaid)\.([xyz])", c.callee)
    if not m:
        return None
    return f"{c.indent}{c.result} = add i32 %__sirius.{m.group(1)}.{m.group(2)}, 0{c.attachments}"


def rewrite_barrier(line: str, bar_id: int, count: int) -> tuple[str, str] | None:
    """A block barrier as a counted one (`bar.sync id, count`): (new line, intrinsic used), or
    None when the line is no barrier this can rewrite."""
    c = parse_call(line)
    if c is None:
        return None
    if SYNC_ALL.match(c.callee):
        name = "llvm.nvvm.barrier.cta.sync.count"
        return f"{c.indent}call void @{name}(i32 {bar_id}, i32 {count}){c.attachments}", name
    m = RED_ALL.match(c.callee)
    if m and c.result is not None:
        name = f"llvm.nvvm.barrier.cta.red.{m.group(1)}.count"
        pred = c.args[-1]
        return (f"{c.indent}{c.result} = call {c.ret} @{name}(i32 {bar_id}, i32 {count}, {pred})"
                f"{c.attachments}", name)
    return None


def substitute_global(text: str, name: str, replacement: str) -> str:
    return re.sub(re.escape(irtext.global_ref(name)) + r"(?![-\w.$\"])",
                  lambda _: replacement, text)


# step 1: the fragments ----------------------------------------------------------------------
def fragment_name(spec: FusedKernelSpec, index: int) -> str:
    return f"{spec.name}.m{index}"


_LINKAGE = re.compile(r"\b(dso_local|dso_preemptable|linkonce_odr|weak_odr|linkonce|weak|"
                      r"available_externally|private|internal|external|common|extern_weak|"
                      r"hidden|protected|dllexport|dllimport|ptx_kernel) ")


def make_fragments(text: str, view: ModuleView, specs: Sequence[FusedKernelSpec]
                    ) -> tuple[str, dict[tuple[int, int], str], bool]:
    """Step 1 of `build`: fragment copies of the member kernels (and alwaysinline copies of
    their callees) appended to the module text; also returns the fragment name of each
    (spec, member) and whether callees were copied (the always-inliner must run). The sreg reads
    are still there: step 2 rewrites them once the callees are inlined."""
    md = irtext.metadata(text)
    next_md = irtext.max_metadata_id(text) + 1
    groups = irtext.attr_groups(text)
    next_group = max(groups, default=-1) + 1
    new_groups: dict[tuple[int | None, bool], int] = {}
    out_funcs: list[str] = []
    out_md: dict[int, str] = {}
    shared = shared_globals(view)
    cache: dict[str, Facts] = {}

    def group(orig: int | None, inline: bool) -> int:
        nonlocal next_group
        key = (orig, inline)
        if key not in new_groups:
            attrs = irtext.edit_attrs(groups.get(orig, "") if orig is not None else "",
                                      drop=("noinline", "optnone", "alwaysinline"),
                                      drop_prefix=("nvvm.",),
                                      add=("alwaysinline",) if inline else ())
            new_groups[key] = next_group
            next_group += 1
            groups[new_groups[key]] = attrs
        return new_groups[key]

    def copy(name: str, new_name: str, prefix: str, extra: tuple[str, ...], inline: bool,
             callees: set[str]) -> str:
        nonlocal next_md
        fn_text = view.functions[name].text
        head_line, body = fn_text.split("\n", 1)
        h = irtext.parse_header(head_line)
        sp = h.subprogram
        suffix = f" #{group(h.attr_group, inline)}" + (f" !dbg !{sp}" if sp is not None else "")
        for c in callees:
            body = re.sub(re.escape(irtext.global_ref(c)) + r"\(",
                          lambda _, c=c: irtext.global_ref(c + ".sirius.inl") + "(", body)
        if sp is not None:
            both, nodes = irtext.clone_scope(md, suffix + "\n" + body, sp, next_md, new_name)
            next_md += len(nodes)
            out_md.update(nodes)
            suffix, body = both.split("\n", 1)
        header = irtext.Header(prefix, new_name, h.params + extra, suffix + " {")
        return header.render() + "\n" + body

    frags: dict[tuple[int, int], str] = {}
    callees_all: set[str] = set()
    for si, s in enumerate(specs):
        for mi, m in enumerate(s.members):
            facts, callees = closure(view, m.kernel, shared, cache)
            if facts.indirect:
                raise CodegenError(f"{s.name}: member {mi} ({m.kernel}) makes an indirect call; "
                                   "its block context cannot be threaded through it")
            name = fragment_name(s, mi)
            frags[(si, mi)] = name
            ids = tuple(f"i32 noundef %{p}" for p in ID_PARAMS)
            out_funcs.append(copy(m.kernel, name, "define internal void ", ids, False, callees))
            callees_all |= callees
    for c in sorted(callees_all):
        _, inner = closure(view, c, shared, cache)
        h = irtext.parse_header(view.functions[c].text.split("\n", 1)[0])
        prefix = "define internal " + _LINKAGE.sub("", h.prefix[len("define "):])
        out_funcs.append(copy(c, c + ".sirius.inl", prefix, (), True, inner))
    extra = ["", *out_funcs]
    extra += [f"attributes #{n} = {{ {groups[n]} }}" for n in sorted(set(new_groups.values()))]
    extra += [f"!{n} = {t}" for n, t in sorted(out_md.items())]
    return text + "\n".join(extra) + "\n", frags, bool(callees_all)
