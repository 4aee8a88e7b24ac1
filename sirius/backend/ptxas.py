"""Assemble PTX with `ptxas -v` and read its resource report.

`ptxas -v` prints, for every function it compiles (on stderr):

    ptxas info    : Compiling entry function '_Z6matmulPKfS0_Pfiii' for 'sm_80'
    ptxas info    : Function properties for _Z6matmulPKfS0_Pfiii
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem, 388 bytes cmem[0]

`smem` is static shared memory only (the dynamic amount is a launch parameter); `cmem[0]` holds
the kernel parameters after an area the driver reserves (ptxas 13 reports it for sm_80, not for
sm_90), `cmem[2]`/`cmem[3]` constants and `__constant__` data; `lmem` local memory. Absent
fields are 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sirius.diagnostics import SiriusError, ToolchainError


class PtxasError(SiriusError):
    """ptxas rejected the PTX."""


@dataclass(frozen=True, slots=True)
class KernelResources:
    name: str
    entry: bool  # a kernel (.entry), not a non-inlined device function (.func)
    registers: int = 0
    barriers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    smem: int = 0  # static shared memory, bytes
    lmem: int = 0
    cmem: tuple[tuple[int, int], ...] = ()  # (bank, bytes)

    def cmem_bank(self, bank: int) -> int:
        return dict(self.cmem).get(bank, 0)

    def to_json(self) -> dict:
        return {"name": self.name, "entry": self.entry, "registers": self.registers,
                "barriers": self.barriers, "spill_stores": self.spill_stores,
                "spill_loads": self.spill_loads, "stack_frame": self.stack_frame,
                "smem": self.smem, "lmem": self.lmem,
                "cmem": {str(b): n for b, n in self.cmem}}


@dataclass(frozen=True, slots=True)
class PtxasReport:
    arch: str
    functions: dict[str, KernelResources] = field(default_factory=dict)
    log: str = ""

    @property
    def kernels(self) -> dict[str, KernelResources]:
        return {n: r for n, r in self.functions.items() if r.entry}

    def __getitem__(self, name: str) -> KernelResources:
        return self.functions[name]


def toolkit_tool(name: str) -> Path | None:
    """`$CUDA_HOME/bin/NAME` (or `$CUDA_PATH`, `/usr/local/cuda`), else NAME on PATH; None if
    neither has it."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (p := Path(root) / "bin" / name).exists():
            return p
    from shutil import which

    found = which(name)
    return Path(found) if found else None


def find_ptxas() -> Path:
    """`$CUDA_HOME/bin/ptxas` (or `$CUDA_PATH`, `/usr/local/cuda`), else `ptxas` on PATH."""
    if found := toolkit_tool("ptxas"):
        return found
    raise ToolchainError("ptxas was not found (looked in $CUDA_HOME/bin, $CUDA_PATH/bin, "
                         "/usr/local/cuda/bin and PATH); set CUDA_HOME to the toolkit's root")


_COMPILING = re.compile(r"Compiling (entry )?function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_BYTES = re.compile(r"(\d+) bytes (smem|lmem|cmem\[(\d+)\])")


def parse_report(log: str, arch: str) -> PtxasReport:
    """The per-function resources in a `ptxas -v` log."""
    facts: dict[str, dict] = {}
    current: str | None = None
    for line in log.splitlines():
        if m := _COMPILING.search(line):
            current = m.group(2)
            facts.setdefault(current, {"entry": bool(m.group(1))})["entry"] = bool(m.group(1))
            continue
        if m := _PROPS.search(line):
            current = m.group(1)
            facts.setdefault(current, {"entry": False})
            continue
        if current is None:
            continue
        f = facts[current]
        if m := _FRAME.search(line):
            f["stack_frame"], f["spill_stores"], f["spill_loads"] = map(int, m.groups())
        if m := _USED.search(line):
            f["registers"] = int(m.group(1))
            if b := _BARRIERS.search(line):
                f["barriers"] = int(b.group(1))
            cmem: list[tuple[int, int]] = []
            for n, what, bank in _BYTES.findall(line):
                if what == "smem":
                    f["smem"] = int(n)
                elif what == "lmem":
                    f["lmem"] = int(n)
                else:
                    cmem.append((int(bank), int(n)))
            f["cmem"] = tuple(cmem)
    return PtxasReport(arch, {n: KernelResources(n, **f) for n, f in facts.items()}, log)


def assemble(ptx: str, arch: str, extra: tuple[str, ...] = ()) -> PtxasReport:
    """Run `ptxas -v --gpu-name ARCH` on `ptx`; the resource report, or `PtxasError` with
    ptxas's messages when it rejects the code."""
    exe = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="sirius-ptxas-") as d:
        src = Path(d) / "module.ptx"
        src.write_text(ptx)
        cmd = [str(exe), "-v", "--gpu-name", arch, *extra, str(src), "-o", str(Path(d) / "m.o")]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except OSError as e:
            raise ToolchainError(f"cannot run {exe}: {e}") from e
    log = (r.stdout + r.stderr).replace(str(src), "module.ptx")
    if r.returncode != 0:
        errors = [ln for ln in log.splitlines() if "error" in ln.lower()] or log.splitlines()
        raise PtxasError(f"ptxas rejected the PTX for {arch}: " + (errors[0] if errors else
                                                                   f"exit {r.returncode}"),
                         notes=tuple(errors[1:8]))
    return parse_report(log, arch)
