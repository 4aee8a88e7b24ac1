"""The values of the IR view (`irview`): plain Python objects with a stable identity, built
once per module and then read without llvmlite. A view is shared: never change one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

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

    @cached_property
    def _attribute_groups(self) -> dict[int, str]:
        return {int(m.group(1)): m.group(2)
                for m in re.finditer(r"^attributes #(\d+) = \{(.*)\}$", self.text, re.M)}

    def attribute_group(self, n: int) -> str | None:
        """The contents of attribute group `#n` (between the braces), None when the module has
        none. The groups are read from the text once (they sit at its end; one search per
        kernel scanned megabytes of a paper-shape module each time)."""
        return self._attribute_groups.get(n)

    def source_name(self, fn: Function) -> str | None:
        """The function's name in the source (a kernel's `step`, not `_Z4stepPKfPfif`)."""
        return self.debug.string(fn.subprogram, "name")
