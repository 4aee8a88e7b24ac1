"""Round like the GPU: the multiply-adds NVPTX contracts into FMAs, contracted in the IR.

The CPU executor rounds every floating-point operation on its own (rounding.py), so that a
kernel rounds the same however it is instrumented or fused. The GPU does not: clang marks CUDA
device arithmetic `contract` (`-ffp-contract=fast`), and NVPTX's instruction selection turns a
`contract` multiply feeding a `contract` add or subtract of the same basic block into one
`fma.rn` (LLVM's DAG combiner, `visitFADDForFMACombine`/`visitFSUBForFMACombine`, with NVPTX's
aggressive fusion: a multiply with several uses is fused into each add it feeds, and stays for
its other uses). One rounding instead of two: matrix products on the GPU differ from the
executor's in the last bits, and an ill-conditioned program (Gaussian elimination, a long ReLU
recurrence) amplifies that to any size.

`like_nvptx(ir)` rewrites a device module the same way, explicitly: each such pair becomes a
call of `llvm.fma`, which the executor keeps (rounding.py strips only the flags). The
executor's run of that module is the reference a GPU run is compared with (`sirius bench`,
`verify --device gpu`); verification of a fusion on the executor does not use it.

The rules, per basic block, for a `fadd`/`fsub` with `contract` (or `fast`) on float or double
scalars or vectors whose operand is such a `fmul` defined in the same block:

- `fadd (fmul x, y), z` -> `fma(x, y, z)`; `fadd z, (fmul x, y)` -> `fma(x, y, z)`; with two
  multiplies, the one with fewer uses (the first on a tie);
- `fsub (fmul x, y), z` -> `fma(x, y, -z)`; `fsub z, (fmul x, y)` -> `fma(-x, y, z)`; with two
  multiplies, the first unless it has more uses than the second.

Not modelled, so a GPU result can still differ in the last bits: what NVPTX's own pipeline
changes before instruction selection (it re-runs LLVM's O3 on the module: a multiply hoisted
out of a loop is no longer in its add's block), contraction through `fneg`/`fpext`, and
libdevice's math functions (the executor calls the host's libm: `expf`, `tanhf` may differ by
an ulp or two). `sirius bench` and `verify --device gpu` compare with verify's tolerances.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TYPE = r"(?:float|double|<\d+ x (?:float|double)>)"
_FLAGS = r"((?: (?:fast|contract|reassoc|nnan|ninf|nsz|arcp|afn))*)"
_VAL = r"(%[-\w.$]+|[-+\w.]+)"
_BIN = re.compile(rf"^(\s*)(%[-\w.$]+) = (fadd|fsub|fmul){_FLAGS} ({_TYPE}) {_VAL}, {_VAL}(.*)$")
_LABEL = re.compile(r"^([-\w.$]+|\"[^\"]*\"):")
_USE = re.compile(r"%[-\w.$]+")


@dataclass(frozen=True)
class Contracted:
    """A device program (what the interpreter loads) whose module is `like_nvptx`'s."""

    device_ir: str
    device_module: object
    files: tuple


def contracted(program) -> Contracted:
    """`program` (device_ir, files) with its multiply-adds contracted as on the GPU."""
    from sirius.frontend import llvmctx

    ir = like_nvptx(program.device_ir)
    return Contracted(ir, llvmctx.parse(ir), tuple(program.files))


@dataclass
class _Op:
    line: int
    name: str
    op: str
    contract: bool
    ty: str
    a: str
    b: str


def _intrinsic(ty: str) -> str:
    if ty.startswith("<"):
        n, elem = re.match(r"<(\d+) x (\w+)>", ty).groups()
        return f"llvm.fma.v{n}{'f32' if elem == 'float' else 'f64'}"
    return "llvm.fma.f32" if ty == "float" else "llvm.fma.f64"


def like_nvptx(ir: str) -> str:
    """The module `ir` with NVPTX's multiply-add contractions made explicit (module doc)."""
    lines = ir.split("\n")
    used: set[str] = set()
    i = 0
    while i < len(lines):
        if lines[i].startswith("define "):
            end = i + 1
            while end < len(lines) and lines[end] != "}":
                end += 1
            _function(lines, i + 1, end, used)
            i = end
        i += 1
    decls = []
    for ty, name in sorted(used):
        if f"@{name}(" not in ir:
            decls.append(f"declare {ty} @{name}({ty}, {ty}, {ty})")
    return "\n".join(lines + decls) + ("\n" if decls else "")


def _function(lines: list[str], start: int, end: int, used: set) -> None:
    uses: dict[str, int] = {}
    for j in range(start, end):
        text = lines[j].split(" = ", 1)[1] if " = " in lines[j] else lines[j]
        for u in _USE.findall(text.split(", !")[0]):
            uses[u] = uses.get(u, 0) + 1
    block: dict[str, _Op] = {}
    for j in range(start, end):
        line = lines[j]
        if _LABEL.match(line):
            block = {}
            continue
        m = _BIN.match(line)
        if not m:
            continue
        indent, name, op, flags, ty, a, b, rest = m.groups()
        contract = "contract" in flags or "fast" in flags
        here = _Op(j, name, op, contract, ty, a, b)
        block[name] = here
        if op == "fmul" or not contract:
            continue
        ma, mb = (_mul(block, v, ty) for v in (a, b))
        if ma and mb:  # two multiplies: the one with fewer uses, the first on a tie
            pick = "b" if uses.get(a, 0) > uses.get(b, 0) else "a"
        else:
            pick = "a" if ma else "b" if mb else None
        if pick is None:
            continue
        fn = _intrinsic(ty)
        used.add((ty, fn))
        keep = " ".join(f for f in flags.split() if f != "reassoc")
        call = f"call {keep + ' ' if keep else ''}{ty} @{fn}"
        mul = ma if pick == "a" else mb
        other = b if pick == "a" else a
        if op == "fadd":
            lines[j] = f"{indent}{name} = {call}({ty} {mul.a}, {ty} {mul.b}, {ty} {other}){rest}"
        elif pick == "a":  # (x * y) - z = fma(x, y, -z)
            lines[j] = (f"{indent}{name}.neg = fneg {ty} {other}\n"
                        f"{indent}{name} = {call}({ty} {mul.a}, {ty} {mul.b}, {ty} {name}.neg)"
                        f"{rest}")
        else:  # z - (x * y) = fma(-x, y, z)
            lines[j] = (f"{indent}{name}.neg = fneg {ty} {mul.a}\n"
                        f"{indent}{name} = {call}({ty} {name}.neg, {ty} {mul.b}, {ty} {other})"
                        f"{rest}")


def _mul(block: dict[str, _Op], v: str, ty: str) -> _Op | None:
    op = block.get(v)
    return op if op is not None and op.op == "fmul" and op.contract and op.ty == ty else None
