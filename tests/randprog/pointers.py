"""The launch that stores device pointers into device memory (issue 12, program A's `setp`).

One thread stores the addresses it receives, p_k into tab[k] of a pointer table (a `float**`
buffer) or p into a `__device__ float*` variable; later kernels read through them (their slots
bound to the table entry or the variable, see access.py). The numpy reference keeps, for every
table entry and pointer variable, the buffer and element offset it holds
(`RandomProgram.expected`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tests.randprog.access import Bind
from tests.randprog.approx import Approx
from tests.randprog.kernels import Dim3, Slot


@dataclass(frozen=True, slots=True)
class SetPtrs:
    """`target` "": tab[k] = p_k for k < n (slot 0 the table, slots 1..n the pointers);
    otherwise `target` = p0, `target` naming a `__device__ float*` (slot 0 the pointer).
    `mem` "fn": the stores go through the `__noinline__` functions `put_ptr(tab, k, p)` and
    `set_<target>(p)`."""

    kind: ClassVar[str] = "setp"
    n: int
    target: str = ""
    mem: str = ""

    barriers: ClassVar[int] = 0
    static_smem: ClassVar[int] = 0
    smem: ClassVar[int] = 0
    warp_ops: ClassVar[bool] = False
    block: ClassVar[Dim3] = (1, 1, 1)
    grid: ClassVar[Dim3] = (1, 1, 1)
    cost: ClassVar[int] = 20

    @property
    def slots(self) -> tuple[Slot, ...]:
        if self.target:
            return (Slot("a", 0),)
        return (Slot("p", self.n),) + (Slot("a", 0),) * self.n

    def scalars(self) -> list[str]:
        return []

    def source(self, name: str, binds: tuple[Bind, ...] = ()) -> str:
        ps = [f"float* p{k}" for k in range(1 if self.target else self.n)]
        if self.target:
            body = [f"set_{self.target}(p0);" if self.mem == "fn" else f"{self.target} = p0;"]
        else:
            ps.insert(0, "float** tab")
            body = [f"put_ptr(tab, {k}, p{k});" if self.mem == "fn" else f"tab[{k}] = p{k};"
                    for k in range(self.n)]
        return (f"__global__ void {name}({', '.join(ps)}) {{\n"
                + "".join(f"    {line}\n" for line in body) + "}\n")

    def apply(self, ins: list[Approx]) -> list[Approx]:
        return []

    def bound(self, bounds: list[float]) -> float:
        return 0.0
