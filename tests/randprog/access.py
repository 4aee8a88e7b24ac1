"""How a kernel of a random program reaches the memory of its pointer slots.

A slot is bound (`Bind`) to a pointer parameter (the default), to an entry of a pointer table
in device memory (a `float**` parameter, the kernel loading `t[k]`, maybe adding an offset to
the loaded pointer), to a `__device__ float*` variable, or to a `__device__` float array or
scalar. `bind_kernel` rewrites a kernel's text for its bindings: the bound slots' parameters
are replaced (a table parameter) or dropped, and the kernel starts by computing the pointer
under the parameter's old name, so the body is unchanged:

    __global__ void k(float** x_t, float* y, ...) {
        const float* x = x_t[1] - 12;
        ...

`access` writes one load or store of a slot in the style an op asks for ("", "fn", "gfn",
"asm"; see kernels.Elementwise), and `helpers` the device functions those styles call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ASM_STORE = 'asm volatile("st.global.f32 [%0], %1;" :: "l"({ptr}), "f"({val}) : "memory");'

LD_F = ("__device__ __noinline__ float ld_f(const float* p, int i) { return p[i]; }\n")
ST_F = ("__device__ __noinline__ void st_f(float* p, int i, float v) { p[i] = v; }\n")
PUT_PTR = ("__device__ __noinline__ void put_ptr(float** t, int k, float* p) { t[k] = p; }\n")


@dataclass(frozen=True, slots=True)
class Bind:
    kind: str = "param"     # "param", "table", "gptr" or "global"
    name: str = ""          # the `__device__` variable ("gptr", "global")
    index: int = 0          # the table entry ("table")
    offset: int = 0         # elements added to the loaded pointer ("table", "gptr")
    scalar: bool = False    # the `__device__` variable is a float scalar ("global")


PARAM = Bind()


def _offset(k: int) -> str:
    return f" + {k}" if k > 0 else f" - {-k}" if k < 0 else ""


def bind_kernel(text: str, binds: Sequence[Bind]) -> str:
    """`text` (a `__global__` function whose first parameters are its slots' pointers, in slot
    order) with its slots bound as `binds` says."""
    head, sep, body = text.partition(") {\n")
    assert sep, text
    pre, _, params = head.partition("(")
    kept, prologue = [], []
    for k, param in enumerate(params.split(", ")):
        b = binds[k] if k < len(binds) else PARAM
        if b.kind == "param":
            kept.append(param)
            continue
        ctype, name = param.rsplit(" ", 1)
        if b.kind == "table":
            kept.append(f"float** {name}_t")
            value = f"{name}_t[{b.index}]{_offset(b.offset)}"
        elif b.kind == "gptr":
            value = f"{b.name}{_offset(b.offset)}"
        else:
            value = f"&{b.name}" if b.scalar else b.name
        prologue.append(f"    {ctype} {name} = {value};\n")
    return f"{pre}({', '.join(kept)}) {{\n" + "".join(prologue) + body


def access(mem: str, binds: Sequence[Bind], slot: int, var: str, idx: str,
           val: str | None = None) -> str:
    """A load of `var[idx]` (val None, an expression) or a store of `val` there (a statement),
    `var` being the pointer of slot `slot`, in style `mem`."""
    b = binds[slot] if slot < len(binds) else PARAM
    if mem == "gfn" and b.kind == "global":
        args = [] if b.scalar else [idx]
        if val is None:
            return f"get_{b.name}({', '.join(args)})"
        return f"set_{b.name}({', '.join(args + [val])});"
    if mem in ("fn", "gfn"):
        return f"ld_f({var}, {idx})" if val is None else f"st_f({var}, {idx}, {val});"
    if val is None:
        return f"{var}[{idx}]"
    if mem == "asm":
        return ASM_STORE.format(ptr=f"{var} + {idx}" if idx != "0" else var, val=val)
    return f"{var}[{idx}] = {val};"


def global_accessors(name: str, scalar: bool) -> str:
    """The `__noinline__` getter and setter of a `__device__` float array or scalar."""
    if scalar:
        return (f"__device__ __noinline__ float get_{name}() {{ return {name}; }}\n"
                f"__device__ __noinline__ void set_{name}(float v) {{ {name} = v; }}\n")
    return (f"__device__ __noinline__ float get_{name}(int i) {{ return {name}[i]; }}\n"
            f"__device__ __noinline__ void set_{name}(int i, float v) {{ {name}[i] = v; }}\n")


def pointer_setter(name: str) -> str:
    """The `__noinline__` setter of a `__device__ float*`."""
    return f"__device__ __noinline__ void set_{name}(float* p) {{ {name} = p; }}\n"
