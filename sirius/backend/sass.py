"""Static SASS instruction counts per function: `ptxas` to a cubin, `nvdisasm -c` to text.

nvdisasm prints every function as a section `.text.NAME` followed by lines of the form

        /*0040*/                   ISETP.GE.U32.AND P0, PT, R0, 0x20, PT ;

A function's count is its instruction lines, less the `NOP`s that pad the code to its alignment
after the final `EXIT`/`BRA`. These are static counts (the code's size, not what runs); the
executor counts what runs. nvdisasm comes with the CUDA toolkit or from NVIDIA's PyPI package
`nvidia-cuda-nvdisasm` (a dev dependency of sirius); no GPU is needed.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from sirius.backend.ptxas import PtxasError, find_ptxas, toolkit_tool
from sirius.diagnostics import ToolchainError

_SECTION = re.compile(r"^//-+ \.text\.(\S+)\s")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def find_nvdisasm() -> Path:
    """nvdisasm from the CUDA toolkit (`$CUDA_HOME`, `$CUDA_PATH`, /usr/local/cuda), PATH, or
    the `nvidia-cuda-nvdisasm` wheel in this Python environment."""
    if found := toolkit_tool("nvdisasm"):
        return found
    try:
        import nvidia  # namespace package of NVIDIA's wheels
        for base in nvidia.__path__:
            for p in sorted(Path(base).glob("*/bin/nvdisasm")):
                return p
    except ImportError:
        pass
    raise ToolchainError("nvdisasm was not found (CUDA toolkit, PATH, or `pip install "
                         "nvidia-cuda-nvdisasm`); it is needed for SASS instruction counts")


def count_sass(listing: str) -> dict[str, int]:
    """Instructions per function in `nvdisasm -c` output, alignment NOPs not counted."""
    counts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in listing.splitlines():
        if m := _SECTION.match(line):
            current = counts.setdefault(m.group(1), [])
        elif current is not None and (m := _INSTRUCTION.match(line)):
            current.append(m.group(1))
    out = {}
    for name, ops in counts.items():
        while ops and ops[-1] == "NOP":
            ops.pop()
        out[name] = len(ops)
    return out


def sass_counts(ptx: str, arch: str) -> dict[str, int]:
    """Assemble `ptx` for `arch` and count each function's SASS instructions."""
    ptxas, nvdisasm = find_ptxas(), find_nvdisasm()
    with tempfile.TemporaryDirectory(prefix="sirius-sass-") as d:
        src, cubin = Path(d) / "module.ptx", Path(d) / "module.cubin"
        src.write_text(ptx)
        r = subprocess.run([str(ptxas), "--gpu-name", arch, str(src), "-o", str(cubin)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise PtxasError(f"ptxas rejected the PTX for {arch}: "
                             + (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0])
        r = subprocess.run([str(nvdisasm), "-c", str(cubin)], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise ToolchainError(f"nvdisasm failed on the cubin for {arch}: {r.stderr.strip()}")
    return count_sass(r.stdout)
