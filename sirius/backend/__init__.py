"""PTX emission (llvmlite's NVPTX target, libdevice linked), `ptxas -v` and resource limits.

    from sirius.backend import compile_ir, check
    ptx, report = compile_ir(program.device_ir, "sm_90")
    for name, res in report.kernels.items():
        check(res, "sm_90", block_threads=256)   # ResourceLimitError if it spills or breaks a limit
"""

from sirius.backend.limits import LIMITS, ArchLimits, ResourceLimitError, check, violations
from sirius.backend.ptx import BackendError, PtxModule, compile_ir, emit_ptx
from sirius.backend.ptxas import KernelResources, PtxasError, PtxasReport, assemble

__all__ = [
    "LIMITS", "ArchLimits", "BackendError", "KernelResources", "PtxModule", "PtxasError",
    "PtxasReport", "ResourceLimitError", "assemble", "check", "compile_ir", "emit_ptx",
    "violations",
]
