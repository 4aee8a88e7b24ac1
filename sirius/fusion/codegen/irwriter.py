"""SSA lines of a fused kernel, with quasi-affine expressions emitted once per scope.

`value(expr, env, ranges)` emits the instructions that compute an `Expr` over named values
(`env`: variable -> SSA operand) and returns the operand holding it; subexpressions are reused
while the current block dominates the next one (`scope()` starts a block that does not).
`floor(e/d)` and `e mod d` become `udiv`/`urem` when `ranges` prove `e` non-negative, exact
floor semantics otherwise.
"""

from __future__ import annotations

from sirius.analysis.expr import Expr, FloorDiv, MinMax, Mod


class Writer:
    """SSA lines of the fused kernel, with quasi-affine expressions emitted once per scope."""

    def __init__(self, loc: str):
        self.loc = loc
        self.lines: list[str] = []
        self.n = 0
        self.memo: dict[Expr, str] = {}
        self.entry_memo: dict[Expr, str] | None = None
        self.sregs: list[str] = []

    def emit(self, rhs: str, hint: str = "v") -> str:
        self.n += 1
        name = f"%{hint}{self.n}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def flush(self) -> list[str]:
        out, self.lines = self.lines, []
        return out

    def scope(self) -> None:
        """Start a block that later blocks need not be dominated by (horizontal members)."""
        if self.entry_memo is None:
            self.entry_memo = dict(self.memo)
        self.memo = dict(self.entry_memo)

    def sreg(self, name: str, bound: int) -> str:
        """Read a special register whose value is known to lie in [0, bound): the fused kernel
        is only ever launched with the block and grid it was generated for."""
        self.sregs.append(name)
        return self.emit(f"call range(i32 0, {bound}) i32 @llvm.nvvm.read.ptx.sreg.{name}()",
                         name.replace(".", ""))

    def value(self, e: Expr, env: dict[str, str], ranges: dict[str, tuple[int, int]]) -> str:
        if e.is_const:
            return str(e.const)
        if e in self.memo:
            return self.memo[e]
        acc: str | None = None
        for atom, c in e.terms:
            if isinstance(atom, str):
                v = env[atom]
            else:
                v = self.atom(atom, env, ranges)
            if c != 1:
                v = self.emit(f"mul i32 {v}, {c}")
            acc = v if acc is None else self.emit(f"add i32 {acc}, {v}")
        if e.const:
            acc = self.emit(f"add i32 {acc}, {e.const}")
        assert acc is not None
        self.memo[e] = acc
        return acc

    def atom(self, a: FloorDiv | Mod | MinMax, env: dict[str, str],
             ranges: dict[str, tuple[int, int]]) -> str:
        if isinstance(a, MinMax):
            x, y = (self.value(v, env, ranges) for v in a.args)
            lt = self.emit(f"icmp slt i32 {x}, {y}", "lt")
            first, second = (x, y) if a.kind == "min" else (y, x)
            return self.emit(f"select i1 {lt}, i32 {first}, i32 {second}", a.kind)
        num = self.value(a.num, env, ranges)
        b = a.num.bounds(ranges)
        if b is not None and b[0] >= 0:
            return self.emit(f"{'udiv' if isinstance(a, FloorDiv) else 'urem'} i32 {num}, "
                             f"{a.den}", "q" if isinstance(a, FloorDiv) else "r")
        q = self.emit(f"sdiv i32 {num}, {a.den}", "q")
        r = self.emit(f"srem i32 {num}, {a.den}", "r")
        neg = self.emit(f"icmp slt i32 {r}, 0", "neg")
        if isinstance(a, FloorDiv):
            return self.emit(f"sub i32 {q}, {self.emit(f'zext i1 {neg} to i32', 'adj')}", "q")
        return self.emit(f"add i32 {r}, {self.emit(f'select i1 {neg}, i32 {a.den}, i32 0')}",
                         "r")
