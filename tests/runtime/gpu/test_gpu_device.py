"""GpuDevice on a fake driver: memory operations, argument packing (byte layouts worked out by
hand from CUDA's parameter-buffer rules), launch checks, dynamic shared memory opt-in,
cooperative launches, CUDA-event timing, and a host program with a loop, a memset, a
device-to-device copy and syncs run by the unchanged interpreter, checked by value."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import (
    Alloc,
    Buffer,
    BufferArg,
    Copy,
    DevRef,
    Free,
    HostProgram,
    HostRef,
    Launch,
    Loop,
    Memset,
    ScalarArg,
    Symbol,
    Sync,
)
from sirius.runtime.device import KernelFault
from sirius.runtime.gpu import GpuDevice, GpuError, GpuUnavailable, PtxProgram, run_on_gpu
from sirius.runtime.gpu import ptx as ptxinfo
from sirius.runtime.gpu.driver import DeviceInfo
from tests.runtime.gpu.fakedriver import FakeDriver

PTX = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry axpy(
	.param .u64 .ptr .align 1 axpy_param_0,
	.param .f32 axpy_param_1,
	.param .u32 axpy_param_2,
	.param .u64 .ptr .align 1 axpy_param_3
)
{ ret; }

.visible .entry mixed(
	.param .u8 mixed_param_0,
	.param .u64 mixed_param_1,
	.param .b16 mixed_param_2,
	.param .f64 mixed_param_3,
	.param .s32 mixed_param_4
)
{ ret; }

.visible .entry byval(
	.param .align 8 .b8 byval_param_0[16]
)
{ ret; }
"""


def axpy(drv: FakeDriver, grid, block, smem, params: bytes) -> None:
    """y[i] += a * x[i] for i < n (the kernel's meaning, in numpy)."""
    x, a, n, y = struct.unpack("<QfIQ", params)  # offsets 0, 8, 12, 16: no padding
    xs = drv.view(x, 4 * n).view(np.float32)
    ys = drv.view(y, 4 * n).view(np.float32)
    ys[:] = ys + np.float32(a) * xs


def device(**kw) -> tuple[GpuDevice, FakeDriver]:
    drv = FakeDriver({"axpy": axpy}, **kw)
    return GpuDevice(drv), drv


def test_memory_round_trip_and_locate() -> None:
    dev, drv = device()
    a = dev.alloc(64, "a")
    b = dev.alloc(64, "b")
    dev.copy_to_device(a, np.arange(16, dtype=np.float32))
    dev.memset(b, 0x7F, 64)
    dev.copy_device(b + 8, a + 4, 8)
    got = dev.copy_from_device(b, 64)
    assert (got[:8] == 0x7F).all() and (got[16:] == 0x7F).all()
    assert got[8:16].view(np.float32).tolist() == [1.0, 2.0]
    assert dev.locate(b + 63) == (b, 63) and dev.label(b) == "b"
    with pytest.raises(GpuError, match="in no allocation"):
        dev.locate(b + 64 + 4096)
    dev.free(a)
    assert a not in drv.mem
    with pytest.raises(GpuError, match="not an allocation"):
        dev.free(a)


def test_parameter_buffer_layout() -> None:
    params = ptxinfo.entries(PTX)
    buf, offsets = ptxinfo.pack(params["axpy"], [0x1122334455667788, 2, 7, 0xAB], "axpy")
    # u64 at 0, f32 at 8, u32 at 12, u64 at 16: 24 bytes
    assert offsets == (0, 8, 12, 16)
    assert buf == (bytes.fromhex("8877665544332211") + bytes.fromhex("00000040")
                   + bytes.fromhex("07000000") + bytes.fromhex("ab00000000000000"))
    buf, offsets = ptxinfo.pack(params["mixed"], [0x1FF, 5, 1.0, 0.5, -2], "mixed")
    # u8 at 0 (masked), u64 at 8, b16 at 16 (a float given: half 1.0 = 0x3c00), f64 at 24,
    # s32 at 32 (two's complement): 36 bytes
    assert offsets == (0, 8, 16, 24, 32)
    assert buf == (b"\xff" + bytes(7) + (5).to_bytes(8, "little") + b"\x00\x3c" + bytes(6)
                   + bytes.fromhex("000000000000e03f") + bytes.fromhex("feffffff"))
    with pytest.raises(GpuError, match="aggregate passed by value"):
        ptxinfo.pack(params["byval"], [0], "byval")
    with pytest.raises(GpuError, match="takes 4 arguments, 3 given"):
        ptxinfo.pack(params["axpy"], [1, 2, 3], "axpy")
    with pytest.raises(GpuError, match="32-bit integer, given 2.5"):
        ptxinfo.pack(params["axpy"], [1, 2.0, 2.5, 4], "axpy")


def test_arch_and_ptx_version_rules() -> None:
    known = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
    assert ptxinfo.compile_arch((9, 0), known) == "sm_90"
    assert ptxinfo.compile_arch((8, 7), known) == "sm_86"
    assert ptxinfo.compile_arch((12, 0), known) == "sm_90"  # newer: the driver JITs sm_90 PTX
    with pytest.raises(GpuError, match="6.1"):
        ptxinfo.compile_arch((6, 1), known)
    assert ptxinfo.driver_ptx(13000) == 90 and ptxinfo.driver_ptx(12040) == 84
    assert ptxinfo.driver_ptx(12070) == 85 and ptxinfo.driver_ptx(11080) is None
    assert ptxinfo.target(PTX) == "sm_80" and ptxinfo.ptx_version(PTX) == 80


def test_module_checks_target_and_driver() -> None:
    old = DeviceInfo("Fake V100", (7, 0), 80, 6 << 20, 16 << 30, 96 * 1024, True, 13000)
    dev = GpuDevice(FakeDriver(info=old))
    with pytest.raises(GpuError, match="targets sm_80, newer than this GPU"):
        dev.load_module(PtxProgram(PTX))
    stale = DeviceInfo("Fake H100", (9, 0), 132, 1 << 20, 80 << 30, 227 * 1024, True, 12040)
    dev = GpuDevice(FakeDriver(info=stale))
    with pytest.raises(GpuError, match=r"loads up to 8.4.*--ptx-version 84"):
        dev.load_module(PtxProgram(PTX.replace(".version 8.0", ".version 8.8")))


def test_launch_checks_and_event_timing() -> None:
    dev, drv = device(costs={"axpy": 12.0}, launch_us=5.0)
    mod = dev.load_module(PtxProgram(PTX))
    x, y = dev.alloc(16), dev.alloc(16)
    dev.copy_to_device(x, np.ones(4, np.float32))
    dev.copy_to_device(y, np.zeros(4, np.float32))
    stats = dev.launch(mod, "axpy", (1, 1, 1), (4, 1, 1), 0, [x, 3.0, 4, y], name="axpy()")
    assert stats.kernel == "axpy()" and stats.mode == "gpu"
    assert stats.seconds == pytest.approx(17e-6)  # CUDA events around the launch
    assert dev.copy_from_device(y, 16).view(np.float32).tolist() == [3.0] * 4
    with pytest.raises(KernelFault, match="not in the loaded module"):
        dev.launch(mod, "nope", (1, 1, 1), (1, 1, 1), 0, [])
    with pytest.raises(KernelFault, match="invalid launch configuration"):
        dev.launch(mod, "axpy", (1, 1, 1), (1024, 2, 1), 0, [x, 1.0, 4, y])
    with pytest.raises(KernelFault, match="takes 4 arguments"):
        dev.launch(mod, "axpy", (1, 1, 1), (4, 1, 1), 0, [x])


def test_dynamic_shared_memory_opt_in() -> None:
    dev, drv = device(static_smem=1024)
    mod = dev.load_module(PtxProgram(PTX))
    x = dev.alloc(16)
    dev.launch(mod, "axpy", (1, 1, 1), (4, 1, 1), 40 * 1024, [x, 1.0, 0, x])
    assert not [c for c in drv.calls if c[0] == "set_max_dynamic_smem"]
    dev.launch(mod, "axpy", (1, 1, 1), (4, 1, 1), 100 * 1024, [x, 1.0, 0, x])
    dev.launch(mod, "axpy", (1, 1, 1), (4, 1, 1), 100 * 1024, [x, 1.0, 0, x])
    assert [c for c in drv.calls if c[0] == "set_max_dynamic_smem"] == \
        [("set_max_dynamic_smem", "axpy", 100 * 1024)]  # once per size
    with pytest.raises(KernelFault, match="allows 232448 per block"):
        dev.launch(mod, "axpy", (1, 1, 1), (4, 1, 1), 227 * 1024, [x, 1.0, 0, x])


def test_cooperative_launch_path() -> None:
    dev, drv = device(max_active=2)
    mod = dev.load_module(PtxProgram(PTX, cooperative_kernels=("axpy",)))
    assert drv.calls[-1] == ("module_load", ("axpy", "mixed", "byval"), True)
    x = dev.alloc(4 * 264)
    dev.launch(mod, "axpy", (264, 1, 1), (1, 1, 1), 0, [x, 1.0, 0, x])
    coop = [c for c in drv.calls if c[0] == "launch_cooperative"]
    assert len(coop) == 1 and coop[0][2] == (264, 1, 1) and coop[0][6] == (0, 8, 12, 16)
    with pytest.raises(KernelFault, match="exceeds the 264 that can be resident"):
        dev.launch(mod, "axpy", (265, 1, 1), (1, 1, 1), 0, [x, 1.0, 0, x])
    dev.launch(mod, "mixed", (1, 1, 1), (1, 1, 1), 0, [0, 0, 0, 0.0, 0])  # not cooperative
    assert [c[0] for c in drv.calls if c[0].startswith("launch")][-1] == "launch"
    with pytest.raises(GpuError, match="not in the PTX"):
        dev.load_module(PtxProgram(PTX, cooperative_kernels=("missing",)))
    no = DeviceInfo("Fake", (9, 0), 132, 1 << 20, 1 << 30, 227 * 1024, False, 13000)
    dev2 = GpuDevice(FakeDriver(info=no))
    m2 = dev2.load_module(PtxProgram(PTX, cooperative_kernels=("axpy",)))
    with pytest.raises(KernelFault, match="does not support"):
        dev2.launch(m2, "axpy", (1, 1, 1), (1, 1, 1), 0, [0, 1.0, 0, 0])


def _program() -> HostProgram:
    """x (input) -> y += (t+1) * x for t in 0..2 -> z = copy of y -> host."""
    n = 256
    nbytes = 4 * n
    t = Expr.var("t")
    launch = Launch("axpy", "axpy", (Expr(2), Expr(1), Expr(1)), (Expr(128), Expr(1), Expr(1)),
                    Expr(0), (BufferArg(DevRef("x")), ScalarArg("float", t + 1),
                              ScalarArg("i32", Expr(n)), BufferArg(DevRef("y"))))
    return HostProgram("main", (Buffer(0, "x", nbytes, "input"), Buffer(1, "y", nbytes, "temp"),
                                Buffer(2, "z", nbytes, "output")), (
        Alloc("x", nbytes), Alloc("y", nbytes), Alloc("z", nbytes),
        Copy("H2D", DevRef("x"), HostRef("hx"), Expr(nbytes)),
        Memset(DevRef("y"), 0, Expr(nbytes)),
        Loop("t", Expr(0), Expr(3), 1, (launch,)),
        Sync("device"),
        Copy("D2D", DevRef("z"), DevRef("y"), Expr(nbytes)),
        Copy("D2H", HostRef("hz"), DevRef("z"), Expr(nbytes)),
        Free(DevRef("x"))))


def test_interpreter_runs_a_host_program_with_a_loop() -> None:
    dev, drv = device()
    f32 = np.dtype(np.float32)
    res = run_on_gpu(_program(), PtxProgram(PTX), [], device=dev, seed=3,
                     dtypes={"x": f32, "y": f32, "z": f32})
    x = res.initial["x"]
    assert x.dtype == np.float32 and np.abs(x).max() > 0  # seeded data, not zeros
    want = np.zeros_like(x)
    for a in (1, 2, 3):
        want = want + np.float32(a) * x
    assert res.final["z"].tobytes() == want.tobytes()
    assert res.host["hz"].view(np.float32).tobytes() == want.tobytes()
    assert [r.stats.kernel for r in res.launches] == ["axpy"] * 3 and res.order == "hardware"
    kinds = [c[0] for c in drv.calls]
    assert kinds.count("launch") == 3 and kinds.count("dtod") == 1 and "synchronize" in kinds
    assert len([c for c in drv.calls if c[0] == "free"]) == 1  # x only: y, z are never freed


def test_symbol_copies_go_to_the_modules_variable() -> None:
    """cudaMemcpyToSymbol / FromSymbol on the GPU seam: the variable's address comes from the
    module (cuModuleGetGlobal), offsets are bytes into it, bytes outside it are refused."""
    dev, drv = device()
    ptx = PTX + "\n.const .align 4 .b8 coef[16];\n"
    coef = Symbol("@coef", "coef", 16, "__constant__", "float")
    host = HostProgram("main", (), (
        Copy("H2D", DevRef("@coef"), HostRef("h1"), Expr(16)),
        Copy("H2D", DevRef("@coef", Expr(8)), HostRef("h2"), Expr(8)),
        Copy("D2H", HostRef("out"), DevRef("@coef"), Expr(16))), symbols=(coef,))
    res = run_on_gpu(host, PtxProgram(ptx), [], device=dev, seed=3)
    h1, h2 = res.host["h1"][:16].view(np.float32), res.host["h2"][:8].view(np.float32)
    want = np.concatenate([h1[:2], h2])
    assert res.host["out"][:16].tobytes() == want.tobytes()
    assert res.final["@coef"].tobytes() == want.tobytes()
    assert res.final["@coef"].dtype == np.float32
    module = dev.load_module(PtxProgram(ptx))
    with pytest.raises(GpuError, match="12 bytes at offset 8 of the device variable 'coef' "
                                       "is out of bounds: it has 16 bytes"):
        dev.copy_to_symbol(module, "coef", 8, np.zeros(12, np.uint8))
    with pytest.raises(GpuError, match="no global nope"):
        dev.copy_from_symbol(module, "nope", 0, 4)


def test_unavailable_says_what_to_install(monkeypatch) -> None:
    import builtins

    from sirius.runtime.gpu import pycuda_driver as drvmod

    real = builtins.__import__

    def no_pycuda(name, *a, **kw):
        if name.startswith("pycuda"):
            raise ModuleNotFoundError("No module named 'pycuda'", name="pycuda")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pycuda)
    monkeypatch.setattr(drvmod, "_DRIVERS", {})
    with pytest.raises(GpuUnavailable, match=r"pycuda is not installed.*make setup-gpu.*\[gpu\]"):
        GpuDevice()
    assert "make setup-gpu" in drvmod.unavailable_reason()


@pytest.mark.parametrize("error, said", [
    ("libcuda.so.1: cannot open shared object file: No such file",
     r"libcuda.so.1\) is not on this machine"),
    ("/x/pycuda/_driver.so: undefined symbol: cuArrayCreate_v2",
     r"lacks cuArrayCreate_v2: no NVIDIA driver here, or one older than"),
])
def test_missing_driver_library_is_said_plainly(monkeypatch, error: str, said: str) -> None:
    import builtins

    from sirius.runtime.gpu import pycuda_driver as drvmod

    real = builtins.__import__

    def no_libcuda(name, *a, **kw):
        if name.startswith("pycuda"):
            raise ImportError(error)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_libcuda)
    monkeypatch.setattr(drvmod, "_DRIVERS", {})
    with pytest.raises(GpuUnavailable, match=said):
        GpuDevice()

