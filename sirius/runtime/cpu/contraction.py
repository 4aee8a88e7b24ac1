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

import dataclasses
import re

_TYPE = r"(?:float|double|<\d+ x (?:float|double)>)"
_FLAGS = r"((?: (?:fast|contract|reassoc|nnan|ninf|nsz|arcp|afn))*)"
_VAL = r"(%[-\w.$]+|[-+\w.]+)"
_BIN = re.compile(rf"^(\s*)(%[-\w.$]+) = (fadd|fsub|fmul){_FLAGS} ({_TYPE}) {_VAL}, {_VAL}(.*)$")
_LABEL = re.compile(r"^([-\w.$]+|\"[^\"]*\"):")
_USE = re.compile(r"%[-\w.$]+")


def contracted(program):
    """`program` (a dataclass with `device_ir` and `device_module`, as the frontend's Program)
    with its multiply-adds contracted as on the GPU."""
    from sirius.frontend import llvmctx

    ir = like_nvptx(program.device_ir)
    return dataclasses.replace(program, device_ir=ir, device_module=llvmctx.parse(ir))


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
    muls: dict[str, tuple[str, str, str]] = {}  # this block's contract fmuls: type, x, y
    for j in range(start, end):
        line = lines[j]
        if _LABEL.match(line):
            muls = {}
            continue
        m = _BIN.match(line)
        if not m:
            continue
        indent, name, op, flags, ty, a, b, rest = m.groups()
        if "contract" not in flags and "fast" not in flags:
            continue
        if op == "fmul":
            muls[name] = (ty, a, b)
            continue
        ma, mb = (muls[v] if v in muls and muls[v][0] == ty else None for v in (a, b))
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
        _, x, y = ma if pick == "a" else mb
        other = b if pick == "a" else a
        if op == "fadd":
            lines[j] = f"{indent}{name} = {call}({ty} {x}, {ty} {y}, {ty} {other}){rest}"
        elif pick == "a":  # (x * y) - z = fma(x, y, -z)
            lines[j] = (f"{indent}{name}.neg = fneg {ty} {other}\n"
                        f"{indent}{name} = {call}({ty} {x}, {ty} {y}, {ty} {name}.neg)"
                        f"{rest}")
        else:  # z - (x * y) = fma(-x, y, z)
            lines[j] = (f"{indent}{name}.neg = fneg {ty} {x}\n"
                        f"{indent}{name} = {call}({ty} {name}.neg, {ty} {y}, {ty} {other})"
                        f"{rest}")

