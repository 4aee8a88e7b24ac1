"""`host-constants{max-clones=8}`: host -> kernel constant propagation (the SIRIUS paper, 5.2).

The host model knows every launch's arguments and dimensions. A scalar argument (integer,
float, double, or a null pointer) that has the same constant value in every launch of a kernel,
and a launch dimension (`blockDim`, `gridDim`) that is the same constant in all of them, become
constants in that kernel: the kernel is renamed `K.sirius.body` (internal, always inlined), its
reads of `llvm.nvvm.read.ptx.sreg.ntid/nctaid` with a known value are replaced by the value,
and a new kernel `K` with the old signature calls it with the constants in place of those
parameters. `llvm-opt` after it inlines the body and folds the index arithmetic (`i < n` with
`n` known, `blockIdx.x * blockDim.x` a multiply by a constant).

Launches of one kernel that pass different constants get a clone each (`K`, `K_sirius_hc1`,
...; the first keeps the name, the host program's later launches are renamed), up to
`max_clones` clones; beyond that only what all launches agree on is propagated.

Left alone: a kernel that no launch names, one whose arguments do not match its parameters one
to one, one with byval/byref/sret/inalloca parameters, an optnone kernel, values that
depend on a host loop variable, and half/bfloat or vector scalars.
Requires the fused host program (`sirius fuse`); on a bare file (`sirius opt`) it is refused.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import Launch, Loop, NullArg, Op, ScalarArg
from sirius.postopt.base import HostRewrite, ModulePass, PassContext, PassInput
from sirius.postopt.kernel_text import BODY_SUFFIX, KernelText, ModuleEdit

__all__ = ["HostConstants", "scalar_constant"]

CLONE = "_sirius_hc"  # kernel (.entry) names: ptxas reads a dot in one as a suffix
_DIMS = ("ntid", "nctaid")  # blockDim, gridDim
_SREG = re.compile(r"^(\s*%[-\w.$]+ = )(?:tail |notail )?call\b[^@]*\bi32 "
                   r"@llvm\.nvvm\.read\.ptx\.sreg\.(ntid|nctaid)\.([xyz])\(\).*$")


def _const(e: Expr | float | int) -> int | float | None:
    if isinstance(e, Expr):
        return e.const if e.is_const else None
    return e


def _float_text(v: float, single: bool) -> str:
    if single:  # an LLVM float literal is the double of the exactly representable float
        v = struct.unpack("<f", struct.pack("<f", v))[0]
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


def scalar_constant(arg: object, ir_type: str) -> str | None:
    """The IR constant (`i32 5`, `float 0x3FE0000000000000`, `ptr null`) an argument passes to
    a parameter of `ir_type`, or None when it is not a constant the pass propagates."""
    if isinstance(arg, NullArg):
        return f"{ir_type} null" if ir_type.startswith("ptr") else None
    if not isinstance(arg, ScalarArg) or arg.type != ir_type:
        return None
    v = _const(arg.value)
    if v is None:
        return None
    m = re.fullmatch(r"i(\d+)", ir_type)
    if m:
        if not float(v).is_integer():
            return None
        bits = int(m.group(1))
        x = int(v) & ((1 << bits) - 1)
        if bits > 1 and x >= 1 << (bits - 1):
            x -= 1 << bits
        return f"{ir_type} {x}"
    if ir_type in ("float", "double"):
        return f"{ir_type} {_float_text(float(v), ir_type == 'float')}"
    return None


@dataclass(frozen=True, slots=True)
class _Config:
    """What one clone knows: per parameter the IR constant or None; per dimension likewise."""

    args: tuple[str | None, ...]
    dims: tuple[int | None, ...]  # ntid x y z, nctaid x y z

    def known(self) -> bool:
        return any(a is not None for a in self.args) or any(d is not None for d in self.dims)


def _common(configs: Sequence[_Config]) -> _Config:
    def agree(vals):
        return vals[0] if all(v == vals[0] for v in vals) else None

    n = len(configs[0].args)
    return _Config(tuple(agree([c.args[i] for c in configs]) for i in range(n)),
                   tuple(agree([c.dims[i] for c in configs]) for i in range(6)))


def _launch_config(op: Launch, k: KernelText, read: set[int]) -> _Config:
    """The launch's constants for `k`: arguments, and the dimensions the kernel reads (`read`:
    indices into ntid x y z, nctaid x y z); a dimension it does not read is no reason to
    rewrite it."""
    args = tuple(scalar_constant(a, p.type) for a, p in zip(op.args, k.params, strict=True))
    dims = [_const(e) if i in read else None for i, e in enumerate((*op.block, *op.grid))]
    return _Config(args, tuple(int(d) if d is not None else None for d in dims))


def _dims_read(lines: list[str], k: KernelText) -> set[int]:
    """Which of ntid x y z, nctaid x y z the kernel's own body reads."""
    out = set()
    for line in lines[k.start + 1:k.end]:
        m = _SREG.match(line)
        if m:
            out.add(_DIMS.index(m.group(2)) * 3 + "xyz".index(m.group(3)))
    return out


@dataclass(frozen=True, slots=True)
class HostConstants(ModulePass):
    """Constant scalar arguments and launch dimensions from the host become kernel constants."""

    name: ClassVar[str] = "host-constants"
    requires: ClassVar[tuple[str, ...]] = ("host_program",)
    max_clones: int = 8

    def __post_init__(self) -> None:
        if not 1 <= self.max_clones <= 64:
            raise ValueError(f"max_clones must be between 1 and 64, not {self.max_clones}")

    def run(self, module: PassInput, ctx: PassContext) -> str | HostRewrite:
        host = ctx.host_program
        assert host is not None  # `requires` makes the pass manager check it
        edit = ModuleEdit(module.text)
        launches = host.launches_by_kernel()
        renames: dict[int, str] = {}  # id(Launch) -> clone name
        for name, k in edit.kernels.items():
            ops = launches.get(name)
            if not ops or any(len(op.args) != len(k.params) for op in ops) or \
                    not edit.wrappable(k, BODY_SUFFIX):
                continue
            read = _dims_read(edit.lines, k)
            configs = [_launch_config(op, k, read) for op in ops]
            distinct = list(dict.fromkeys(configs))
            if len(distinct) > self.max_clones:
                distinct = [_common(distinct)]
                picked = [distinct[0]] * len(ops)
            else:
                picked = configs
            if not any(c.known() for c in distinct):
                continue
            dims = _common(distinct).dims  # the body is shared: dimensions all launches agree on
            text = [edit.body(k, BODY_SUFFIX, lambda line, d=dims: _dims_known(line, d))]
            for i, c in enumerate(distinct):
                clone = name if i == 0 else f"{name}{CLONE}{i}"
                args = [c.args[j] or f"{p.type} %a{j}" for j, p in enumerate(k.params)]
                text.append("\n".join(k.wrapper(clone, args)))
            for op, c in zip(ops, picked, strict=True):
                i = distinct.index(c)
                if i:
                    renames[id(op)] = f"{name}{CLONE}{i}"
            edit.replace(name, text)
        if not edit.changed():
            return module.text
        if not renames:
            return edit.text()
        return HostRewrite(edit.text(), replace(host, ops=_rename(host.ops, renames)))


def _dims_known(line: str, dims: tuple[int | None, ...]) -> str:
    """A read of blockDim/gridDim whose value is known, as that constant."""
    m = _SREG.match(line)
    if m:
        v = dims[_DIMS.index(m.group(2)) * 3 + "xyz".index(m.group(3))]
        if v is not None:
            return f"{m.group(1)}add i32 {v}, 0"
    return line


def _rename(ops: tuple[Op, ...], renames: dict[int, str]) -> tuple[Op, ...]:
    out: list[Op] = []
    for op in ops:
        if isinstance(op, Launch) and id(op) in renames:
            out.append(replace(op, mangled=renames[id(op)]))
        elif isinstance(op, Loop):
            out.append(replace(op, body=_rename(op.body, renames)))
        else:
            out.append(op)
    return tuple(out)

