"""CUDA text of a random program, in the style of kernels/*.cu: kernels, then a `main` that
allocates, fills host arrays and copies them in, launches (host loops, pointer swaps, offsets
affine in the loop variables), copies results out and frees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.randprog import kernels as K
from tests.randprog.program import Call, DevCopy, HostLoop, HostTable, Step, Sync

if TYPE_CHECKING:
    from tests.randprog.generator import Builder


@dataclass(frozen=True, slots=True)
class Style:
    check: bool       # wrap runtime calls in CHECK(...)
    dim3_vars: bool   # 2-D launch shapes through named dim3 variables


def _dims3(d: tuple[int, int, int]) -> str:
    return str(d[0]) if d[1] == d[2] == 1 else f"dim3({d[0]}, {d[1]})"


def _launch(c: Call, indent: str, style: Style, k: int) -> list[str]:
    args = [p.c_expr() for p in c.ptrs if p.is_arg]
    args += c.op.scalars()
    g, b = c.op.grid, c.op.block
    smem = f", {c.op.smem}" if getattr(c.op, "smem", 0) else ""
    pre: list[str] = []
    if style.dim3_vars and (g[1] > 1 or b[1] > 1):
        pre = [f"{indent}dim3 grid{k}({g[0]}, {g[1]}, {g[2]});",
               f"{indent}dim3 block{k}({b[0]}, {b[1]}, {b[2]});"]
        shape = f"grid{k}, block{k}{smem}"
    else:
        shape = f"{_dims3(g)}, {_dims3(b)}{smem}"
    return pre + [f"{indent}{c.kernel}<<<{shape}>>>({', '.join(args)});"]


def _loop(lines: list[str], s: HostLoop, indent: str, style: Style, k: int) -> int:
    lines.append(f"{indent}for (int {s.var} = 0; {s.var} < {s.trips}; ++{s.var}) {{")
    inner = indent + "    "
    for c in s.body:
        if isinstance(c, HostLoop):
            k = _loop(lines, c, inner, style, k)
        else:
            lines += _launch(c, inner, style, k)
            k += 1
    if s.swap:
        x, y = s.swap
        lines += [f"{inner}float* tmp = {x};", f"{inner}{x} = {y};", f"{inner}{y} = tmp;"]
    lines.append(f"{indent}}}")
    return k


def render(b: Builder, outs: list[str], style: Style, seed: int | None) -> str:
    """The CUDA text of the program `b` built, copying `outs` back to the host."""
    def rt(call: str) -> str:
        return f"CHECK({call});" if style.check else f"{call};"

    lines = [f"// randprog {'seed ' + str(seed) if seed is not None else '(hypothesis)'}: "
             "a random whole program (tests/randprog/generator.py).", "//"]
    lines += ["// " + s for s in summarize(b.steps).splitlines()]
    lines += ["#include <cmath>", "#include <cstdio>", "#include <cstdlib>",
              "#include <cuda_runtime.h>", ""]
    if style.check:
        lines += ["#define CHECK(call)                                                   \\",
                  "    do {                                                              \\",
                  "        cudaError_t err_ = (call);                                    \\",
                  "        if (err_ != cudaSuccess) {                                    \\",
                  '            fprintf(stderr, "%s\\n", cudaGetErrorString(err_));      \\',
                  "            exit(1);                                                  \\",
                  "        }                                                             \\",
                  "    } while (0)", ""]
    for n in b.gorder:
        g = b.vars[n]
        lines.append(f"__device__ float {n};" if g.scalar else f"__device__ float {n}[{g.elems}];")
    lines += [f"__device__ float* {n};" for n in b.gpointers]
    if b.gorder or b.gpointers:
        lines.append("")
    lines += list(b.helpers.values())
    if b.uses_warp_sum:
        lines.append(K.WARP_SUM)
    lines += b.kernel_sources
    lines += ["int main() {"]
    host = {n: "h_" + n.removeprefix("d_") for n in b.order}
    tables = [n for n in b.order if b.vars[n].kind == "table"]
    floats = [n for n in b.order if b.vars[n].kind != "table"]
    need_host = [n for n in b.order if b.vars[n].input] + [n for n in outs
                                                             if not b.vars[n].input]
    for k, n in enumerate(need_host):
        e = b.vars[n].elems
        lines.append(f"    float* {host[n]} = (float*)malloc({e} * sizeof(float));")
        if b.vars[n].input:
            lines.append(f"    for (int i = 0; i < {e}; ++i) {host[n]}[i] = "
                         f"(float)((i * {7 + 2 * k}) % 17) * 0.125f - 1.0f;")
    for n in tables:
        if b.vars[n].host:
            lines.append(f"    float* {host[n]}[{b.vars[n].elems}];")
    lines.append("    float " + ", ".join("*" + n for n in floats) + ";")
    if tables:
        lines.append("    float " + ", ".join("**" + n for n in tables) + ";")
    for n in b.order:
        elem = "float*" if n in tables else "float"
        lines.append("    " + rt(f"cudaMalloc(&{n}, {b.vars[n].elems} * sizeof({elem}))"))
    for n in b.order:
        v = b.vars[n]
        if v.memset:
            lines.append("    " + rt(f"cudaMemset({n}, 0, {v.elems} * sizeof(float))"))
        if v.input:
            lines.append("    " + rt(f"cudaMemcpy({n}, {host[n]}, {v.elems} * sizeof(float), "
                                     "cudaMemcpyHostToDevice)"))
    k = 0
    for s in b.steps:
        if isinstance(s, Call):
            lines += _launch(s, "    ", style, k)
            k += 1
            continue
        if isinstance(s, Sync):
            lines.append("    " + rt("cudaDeviceSynchronize()"))
            continue
        if isinstance(s, DevCopy):
            lines.append("    " + rt(f"cudaMemcpy({s.dst}, {s.src}, {b.vars[s.src].elems} * "
                                     "sizeof(float), cudaMemcpyDeviceToDevice)"))
            continue
        if isinstance(s, HostTable):
            h = host[s.table]
            lines += [f"    {h}[{k}] = {p.c_expr()};" for k, p in enumerate(s.ptrs)]
            lines.append("    " + rt(f"cudaMemcpy({s.table}, {h}, {len(s.ptrs)} * sizeof(float*), "
                                     "cudaMemcpyHostToDevice)"))
            continue
        k = _loop(lines, s, "    ", style, k)
    lines.append("    " + rt("cudaGetLastError()"))
    lines.append("    " + rt("cudaDeviceSynchronize()"))
    for n in outs:
        lines.append("    " + rt(f"cudaMemcpy({host[n]}, {n}, {b.vars[n].elems} * sizeof(float),"
                                 " cudaMemcpyDeviceToHost)"))
    first = outs[0]
    lines.append(f'    printf("randprog: %f\\n", {host[first]}[0]);')
    for n in b.order:
        lines.append("    " + rt(f"cudaFree({n})"))
    for n in need_host:
        lines.append(f"    free({host[n]});")
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def _ptrs(c: Call) -> str:
    return ", ".join(f"{p}:{slot.mode}" for p, slot in zip(c.ptrs, c.op.slots, strict=True))


def _summary(steps: Sequence[Step | HostLoop], indent: str) -> list[str]:
    out = []
    for s in steps:
        if isinstance(s, Call):
            out.append(f"{indent}{s.kernel}({_ptrs(s)}) {s.op!r}")
        elif isinstance(s, DevCopy):
            out.append(f"{indent}copy D2D {s.dst} <- {s.src}")
        elif isinstance(s, Sync):
            out.append(f"{indent}sync")
        elif isinstance(s, HostTable):
            out.append(f"{indent}copy H2D {s.table} <- host table "
                       f"{{{', '.join(map(str, s.ptrs))}}}")
        else:
            swap = f", swap {s.swap[0]} <-> {s.swap[1]}" if s.swap else ""
            out.append(f"{indent}for {s.var} < {s.trips}{swap}:")
            out += _summary(s.body, indent + "    ")
    return out


def summarize(steps: Sequence[Step]) -> str:
    return "\n".join(_summary(steps, ""))
