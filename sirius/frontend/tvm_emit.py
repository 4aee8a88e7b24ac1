"""Write an imported TVM model as a whole CUDA program plus its JSON description (no TVM needed).

The `.cu` file is: a header comment (TVM version, the command that made it), TVM's CUDA source
verbatim, then a generated host `main` in the plain style `sirius inspect` reads: one
`cudaMalloc` per input, parameter and TVM storage; host values filled in C loops and copied to the
device; the launches in TVM's order with TVM's launch dimensions (pointer arguments at constant
byte offsets into the storages); a device synchronize; the outputs copied back; every buffer freed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from sirius.frontend.tvm_model import ProgramPlan, c_type

SCHEMA = "sirius-tvm-import/1"

_PROTO_RE = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\((?P<bounds>\d+)\) )?'
                       r"(?P<name>\w+)\((?P<params>[^)]*)\)\s*;")


@dataclass(frozen=True, slots=True)
class KernelDecl:
    name: str
    launch_bounds: int | None
    param_types: tuple[str, ...]  # C types, `__restrict__` dropped


def kernel_decls(source: str) -> dict[str, KernelDecl]:
    """The kernels TVM declares at the top of its CUDA source (its forward declarations)."""
    out: dict[str, KernelDecl] = {}
    for m in _PROTO_RE.finditer(source):
        types = []
        for p in m["params"].split(","):
            p = p.replace("__restrict__", " ").strip()
            if not p:
                continue
            ident = re.search(r"(\w+)\s*$", p)
            assert ident is not None
            types.append(re.sub(r"\s+", " ", p[:ident.start()]).strip().replace(" *", "*"))
        bounds = int(m["bounds"]) if m["bounds"] else None
        out[m["name"]] = KernelDecl(m["name"], bounds, tuple(types))
    return out


def _float_literal(x: float) -> str:
    return float(np.float32(x)).hex() + "f"


def _ptr_expr(buffer: str, offset: int, base_is_bytes: bool) -> str:
    if offset == 0:
        return buffer
    return f"{buffer} + {offset}" if base_is_bytes else f"(char*){buffer} + {offset}"


_PRELUDE = """\
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define SIRIUS_CHECK(call)                                                              \\
    do {                                                                                \\
        cudaError_t err_ = (call);                                                      \\
        if (err_ != cudaSuccess) {                                                      \\
            fprintf(stderr, "%s:%d: %s\\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \\
            exit(1);                                                                    \\
        }                                                                               \\
    } while (0)

// value[i] = (float)((((i % 2001) * 7919 + seed) % 2001) - 1000) * scale  (sirius Fill)
static void sirius_fill(float* p, long n, int seed, float scale) {
    for (long i = 0; i < n; ++i)
        p[i] = (float)((int)((i % 2001) * 7919 + seed) % 2001 - 1000) * scale;
}

// float -> IEEE half bits, rounded to nearest even (numpy's astype(float16))
static unsigned short sirius_f2h(float f) {
    unsigned int x;
    memcpy(&x, &f, 4);
    unsigned int sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e == 0xffu) return (unsigned short)(sign | 0x7c00u | (m ? 0x200u : 0u));
    int exp = (int)e - 127 + 15;
    if (exp >= 31) return (unsigned short)(sign | 0x7c00u);
    if (exp <= 0) {  // a subnormal half (or zero)
        if (exp < -10) return (unsigned short)sign;
        m |= 0x800000u;
        unsigned int shift = (unsigned int)(14 - exp), h = m >> shift;
        unsigned int rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1u))) ++h;
        return (unsigned short)(sign | h);
    }
    unsigned int h = ((unsigned int)exp << 10) | (m >> 13), rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
    return (unsigned short)(sign | h);
}

static void sirius_fill_half(unsigned short* p, long n, int seed, float scale) {
    for (long i = 0; i < n; ++i)
        p[i] = sirius_f2h((float)((int)((i % 2001) * 7919 + seed) % 2001 - 1000) * scale);
}

static double sirius_checksum(const float* p, long n) {
    double s = 0.0;
    for (long i = 0; i < n; ++i) s += p[i];
    return s;
}
"""


def emit_host(plan: ProgramPlan, decls: dict[str, KernelDecl]) -> str:
    """The host part of the program: helpers and `main`."""
    lines = [_PRELUDE, "int main() {"]
    w = lines.append
    is_bytes = {b.name: b.role == "temp" for b in plan.buffers}
    ctype = {b.name: ("char" if b.role == "temp" else c_type(b.dtype)) for b in plan.buffers}
    w("    // device buffers: inputs, parameters, TVM's storages (shared by tensors whose")
    w("    // lifetimes do not overlap), outputs")
    for b in plan.buffers:
        note = f"  // {b.role} {b.relax_name}" + (f" {list(b.shape)}" if b.shape else "")
        if b.tensors:
            note += ": " + ", ".join(b.tensors)
        w(f"    {ctype[b.name]}* {b.name};{note}")
        w(f"    SIRIUS_CHECK(cudaMalloc((void**)&{b.name}, {b.bytes}));")
    w("")
    w("    // host values of inputs and parameters (sirius Fill), copied to the device")
    for b in plan.buffers:
        if b.fill is None:
            continue
        h = "h_" + b.name[2:]
        n = b.bytes // np.dtype(b.dtype).itemsize
        w(f"    {ctype[b.name]}* {h} = ({ctype[b.name]}*)malloc({b.bytes});")
        fill = "sirius_fill_half" if b.dtype == "float16" else "sirius_fill"
        w(f"    {fill}({h}, {n}, {b.fill.seed}, {_float_literal(b.fill.scale)});")
        w(f"    SIRIUS_CHECK(cudaMemcpy({b.name}, {h}, {b.bytes}, cudaMemcpyHostToDevice));")
    w("")
    w(f"    // {len(plan.launches)} launches in TVM's order (Relax calls -> kernels)")
    for launch in plan.launches:
        decl = decls[launch.kernel]
        if len(decl.param_types) != len(launch.args):
            raise ValueError(f"{launch.kernel}: {len(launch.args)} arguments for "
                             f"{len(decl.param_types)} parameters")
        args = []
        for a, ty in zip(launch.args, decl.param_types, strict=True):
            if a.buffer is None:
                args.append(f"({ty})({a.scalar})")
            elif ty == f"{ctype[a.buffer]}*" and a.offset == 0:
                args.append(a.buffer)
            else:
                args.append(f"({ty})({_ptr_expr(a.buffer, a.offset, is_bytes[a.buffer])})")
        grid = ", ".join(map(str, launch.grid))
        block = ", ".join(map(str, launch.block))
        if launch.smem > 48 * 1024:
            w(f"    SIRIUS_CHECK(cudaFuncSetAttribute({launch.kernel}, "
              f"cudaFuncAttributeMaxDynamicSharedMemorySize, {launch.smem}));")
        w(f"    {launch.kernel}<<<dim3({grid}), dim3({block}), {launch.smem}>>>(" +
          ", ".join(args) + f");  // {launch.primfunc}")
    w("    SIRIUS_CHECK(cudaGetLastError());")
    w("    SIRIUS_CHECK(cudaDeviceSynchronize());")
    w("")
    w("    // outputs back to the host")
    for o in plan.outputs:
        if o.source is not None:
            w(f"    SIRIUS_CHECK(cudaMemcpy({o.name}, "
              f"{_ptr_expr(o.source, o.offset, is_bytes[o.source])}, {o.bytes}, "
              "cudaMemcpyDeviceToDevice));")
    for o in plan.outputs:
        h = "h_" + o.name[2:]
        ty = c_type(o.dtype)
        w(f"    {ty}* {h} = ({ty}*)malloc({o.bytes});")
        w(f"    SIRIUS_CHECK(cudaMemcpy({h}, {o.name}, {o.bytes}, cudaMemcpyDeviceToHost));")
        if o.dtype == "float32":
            w(f'    printf("{plan.name}: {o.name[2:]} checksum %.6e\\n", '
              f"sirius_checksum({h}, {o.bytes // 4}));")
    w("")
    for b in plan.buffers:
        w(f"    SIRIUS_CHECK(cudaFree({b.name}));")
    for b in plan.buffers:
        if b.fill is not None:
            w(f"    free(h_{b.name[2:]});")
    for o in plan.outputs:
        w(f"    free(h_{o.name[2:]});")
    w("    return 0;")
    w("}")
    return "\n".join(lines) + "\n"


def emit_program(plan: ProgramPlan, kernel_source: str, header: list[str]) -> str:
    """The whole `.cu`: header comment, TVM's kernels verbatim, the generated host program."""
    head = "".join(f"// {line}".rstrip() + "\n" for line in header)
    body = kernel_source if kernel_source.endswith("\n") else kernel_source + "\n"
    return (head + "\n// ===== TVM's CUDA source, verbatim =====\n" + body +
            "\n// ===== host program, generated by sirius import-tvm =====\n" +
            emit_host(plan, kernel_decls(kernel_source)))


def plan_json(plan: ProgramPlan, decls: dict[str, KernelDecl], meta: dict) -> dict:
    """The `NAME.json` document (docs/tvm-import.md is its schema)."""
    used = sorted({launch.kernel for launch in plan.launches})
    return {
        "schema": SCHEMA,
        **meta,
        "name": plan.name,
        "buffers": [b.to_json() for b in plan.buffers],
        "outputs": [o.to_json() for o in plan.outputs],
        "kernels": [{"name": k, "launch_bounds": decls[k].launch_bounds} for k in used],
        "relax_calls": list(plan.calls),
        "launches": [launch.to_json() for launch in plan.launches],
    }


def json_text(doc: dict) -> str:
    """`doc` as JSON with one list element per line (readable diffs of regenerated files)."""
    lines = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            lines.append(f" {json.dumps(key)}: [")
            for j, x in enumerate(value):
                sep = "," if j < len(value) - 1 else ""
                lines.append("  " + json.dumps(x) + sep)
            lines.append(" ]" + comma)
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"
