"""Planted bugs (tests/runtime/programs): races that the schedules expose, out-of-bounds
accesses that --check-bounds reports, and divergent barriers that are reported, not hung on."""

from __future__ import annotations

import ctypes
import json
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.device import KernelFault
from sirius.runtime.interpreter import HostInterpreter
from tests.runtime.execsupport import ROOT, analysed, program_path, run

F32 = np.float32
REDZONE_BYTE = 0xCD  # CpuDevice fills the red zones around every allocation with it


# ---- (a) races ---------------------------------------------------------------------------------
def test_interblock_race_depends_on_block_order():
    # Block 0 writes data[t] = t + 1000, block 1 copies data[t] to out[t], in one launch.
    # jobs=1: the forward order on one core is one schedule (with more workers, blocks of the
    # forward order run concurrently and the race would be timing-dependent).
    zeros = {"d_data": np.zeros(64, np.int32)}
    fwd = [run("programs/race_blocks.cu", order="forward", jobs=1, inputs=zeros)
           for _ in range(2)]
    rev = [run("programs/race_blocks.cu", order="reverse", inputs=zeros) for _ in range(2)]
    # forward: the producer block ran first; reverse: the consumer saw the old zeros
    assert fwd[0].final["d_out"].tolist() == [t + 1000 for t in range(64)]
    assert rev[0].final["d_out"].tolist() == [0] * 64
    # each schedule is reproducible
    for a, b in (fwd, rev):
        assert np.array_equal(a.final["d_out"], b.final["d_out"])
    # the producer's own output does not depend on the order
    assert fwd[0].final["d_data"].tolist() == rev[0].final["d_data"].tolist()
    # a random order is one of the two, and the same again for the same seed
    rnd = [run("programs/race_blocks.cu", order="random:3", inputs=zeros).final["d_out"].tolist()
           for _ in range(2)]
    assert rnd[0] == rnd[1] and rnd[0] in ([t + 1000 for t in range(64)], [0] * 64)


def test_intrablock_race_depends_on_thread_order():
    # s[t] = t, then (no barrier) out[t] = s[(t + 1) % 64]; every s[k] was -1 before.
    fwd = run("programs/race_threads.cu", order="forward").final["d_out"].tolist()
    rev = run("programs/race_threads.cu", order="reverse").final["d_out"].tolist()
    # forward: thread t runs before t + 1 has stored (-1); the last thread sees s[0] = 0
    assert fwd == [-1] * 63 + [0]
    # reverse: t + 1 already stored; thread 63 runs first and sees thread 0's -1
    assert rev == list(range(1, 64)) + [-1]
    assert run("programs/race_threads.cu", order="reverse").final["d_out"].tolist() == rev


# ---- (b) out-of-bounds accesses ----------------------------------------------------------------
class ProbeDevice(CpuDevice):
    """A CpuDevice that remembers, for every allocation, its label and size, and just before it
    is freed the 8 bytes after its end (the start of its red zone)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.extent: dict[int, tuple[str, int]] = {}
        self.tail: dict[str, bytes] = {}

    def alloc(self, nbytes: int, label: str = "") -> int:
        address = super().alloc(nbytes, label)
        self.extent[address] = (label, nbytes)
        return address

    def free(self, address: int) -> None:
        label, n = self.extent.pop(address)
        self.tail[label] = ctypes.string_at(address + n, 8)
        super().free(address)


def interpreter(name: str, device: CpuDevice, inputs: dict) -> HostInterpreter:
    program, kernels, host = analysed(name)
    return HostInterpreter(host, {k.mangled: k for k in kernels}, device,
                           device.load_module(program), seed=1, inputs=inputs)


OOB_INPUTS = {"d_in": np.arange(1000, dtype=F32) / 8, "d_guard": np.full(64, -1.0, F32)}


def test_check_bounds_reports_one_past_the_end_store():
    dev = ProbeDevice(check_bounds=True, jobs=1)
    interp = interpreter("programs/oob_store.cu", dev, OOB_INPUTS)
    with pytest.raises(KernelFault) as e:
        interp.run()
    fault = e.value
    # i = 1000 = 3 * 256 + 232: thread 232 of block 3 stores at out + 4000 bytes
    m = re.fullmatch(r"out-of-bounds store of 4 bytes at address 0x([0-9a-f]+) in kernel "
                     r"off_by_one, block \(3, 0, 0\), thread \(232, 0, 0\)", fault.message)
    assert m, fault.message
    assert int(m.group(1), 16) == interp.addr["d_out"] + 4000
    assert fault.notes == ("0 bytes past the end of d_out (4000 bytes)",)
    assert fault.loc is not None and fault.loc.file.endswith("oob_store.cu")
    assert fault.loc.line == 17  # the store `out[i] = 2.0f * v + 1.0f`
    # nothing outside d_out was touched: the other buffers hold their inputs, and the faulting
    # store did not reach the red zone after d_out either
    for name in ("d_in", "d_guard"):
        got = dev.copy_from_device(interp.addr[name], OOB_INPUTS[name].nbytes)
        assert got.tobytes() == OOB_INPUTS[name].tobytes(), name
    assert ctypes.string_at(interp.addr["d_out"] + 4000, 4) == bytes([REDZONE_BYTE]) * 4


def test_without_check_bounds_the_store_lands_in_the_red_zone():
    # Unchecked, the program runs to the end: every allocation has 256 bytes of red zone on each
    # side, so the one-past-the-end store writes the red zone, not a neighbouring buffer.
    dev = ProbeDevice(jobs=1)
    interp = interpreter("programs/oob_store.cu", dev, OOB_INPUTS)
    interp.run()
    expected = F32(2) * OOB_INPUTS["d_in"] + F32(1)
    assert np.array_equal(interp.final["d_out"], expected)
    assert interp.final["d_guard"].tobytes() == OOB_INPUTS["d_guard"].tobytes()
    assert interp.final["d_in"].tobytes() == OOB_INPUTS["d_in"].tobytes()
    assert dev.tail["d_out"][:4] == struct.pack("<f", 1.0)  # 2 * 0 + 1 from thread 1000
    assert dev.tail["d_out"][4:] == bytes([REDZONE_BYTE]) * 4


def test_check_bounds_reports_load_before_the_start():
    with pytest.raises(KernelFault) as e:
        run("programs/oob_load.cu", check_bounds=True)
    assert re.fullmatch(r"out-of-bounds load of 4 bytes at address 0x[0-9a-f]+ in kernel "
                        r"left_sum, block \(0, 0, 0\), thread \(0, 0, 0\)", e.value.message)
    assert e.value.notes == ("4 bytes before the start of d_in",)
    assert e.value.loc is not None and e.value.loc.line == 14


def test_check_bounds_after_the_site_range_is_known():
    """In reverse order thread 0 of block 0 runs last: every earlier thread's load at the same
    site was inside d_in, and the inline check compares against that range; the load before
    the start is outside it and still reported."""
    with pytest.raises(KernelFault) as e:
        run("programs/oob_load.cu", check_bounds=True, order="reverse", jobs=1)
    assert "left_sum, block (0, 0, 0), thread (0, 0, 0)" in e.value.message
    assert e.value.notes == ("4 bytes before the start of d_in",)


@pytest.mark.parametrize("name", ["tvm/op_dense.cu",
                                  "tvm/op_conv2d.cu"])
def test_check_bounds_rounds_as_unchecked(name):
    """Checked and unchecked runs of kernels full of multiply-adds give the same bits: the
    executor contracts no multiply and add into an FMA, whatever the shape the inline bounds
    checks give the code (a deepspeech2 convolution once differed in the last bit)."""
    plain = run(name, seed=3)
    checked = run(name, seed=3, check_bounds=True)
    assert plain.final and plain.final.keys() == checked.final.keys()
    for buf in plain.final:
        assert plain.final[buf].tobytes() == checked.final[buf].tobytes(), buf


def test_the_executor_contracts_nothing():
    """The rewritten module keeps no `contract`/`fast` flag (TVM's CUDA has one on almost every
    fadd and fmul), so the host backend fuses no FMA, and explicit fma calls stay."""
    from sirius.analysis.irview import build_view
    from sirius.runtime.cpu.jit import JitModule

    program, _, _ = analysed("tvm/op_dense.cu")
    assert re.search(r"= fmul contract ", program.device_ir)
    for instrument in (False, True):
        text = JitModule(build_view(program.device_module), instrument=instrument).host.text
        assert re.search(r"= fmul ", text)
        assert not re.search(r"= (fadd|fsub|fmul|fdiv|fneg|call)( \w+)* (contract|fast|reassoc) ",
                             text)


def test_without_check_bounds_the_load_reads_the_red_zone():
    x = np.linspace(-1, 1, 512).astype(F32)
    r = run("programs/oob_load.cu", inputs={"d_in": x})
    red = np.array([0xCDCDCDCD], np.uint32).view(F32)[0]  # about -4.3e8
    assert r.final["d_out"][0] == red + x[0]
    assert np.array_equal(r.final["d_out"][1:], x[:-1] + x[1:])


def test_check_bounds_passes_a_correct_program_unchanged():
    plain = run("elementwise_chain.cu", seed=3)
    checked = run("elementwise_chain.cu", seed=3, check_bounds=True)
    for name in plain.final:
        assert plain.final[name].tobytes() == checked.final[name].tobytes(), name


# ---- (c) divergent barriers and warp operations ------------------------------------------------
_SCRIPT = """
import json, sys
from sirius.runtime.device import KernelFault
from sirius.runtime.interpreter import run_program
for program, order, buffer in json.loads(sys.argv[1]):
    try:
        r = run_program([program], order=order)
        print(json.dumps(["done", r.final[buffer].tolist()]), flush=True)
    except KernelFault as e:
        print(json.dumps(["fault", e.message]), flush=True)
"""
CASES = [("programs/divergent_barrier.cu", "forward", "d_x"),
         ("programs/divergent_barrier.cu", "reverse", "d_x"),
         ("programs/divergent_shuffle.cu", "forward", "d_x")]


@pytest.fixture(scope="module")
def isolated() -> dict[tuple[str, str], list]:
    """Outcomes of CASES, run in one child process with a hard timeout, so that a hang fails
    these tests instead of stalling the suite."""
    cases = [(str(program_path(p)), o, b) for p, o, b in CASES]
    p = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(cases)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == len(CASES), p.stdout + p.stderr
    return {(c[0], c[1]): json.loads(line) for c, line in zip(CASES, lines, strict=True)}


@pytest.mark.parametrize("order,block", [("forward", 0), ("reverse", 1)])
def test_divergent_barrier_is_reported(isolated, order, block):
    kind, msg = isolated[("programs/divergent_barrier.cu", order)]
    assert kind == "fault", msg
    # the first block the order runs is the one reported
    assert msg.startswith(f"divergent barrier in kernel half_barrier, block ({block}, 0, 0)")
    assert "16 of 64 threads wait at the barrier" in msg
    assert "divergent_barrier.cu:16" in msg  # the __syncthreads under the condition


def test_half_warp_full_mask_shuffle_does_not_hang(isolated):
    # Undefined on a GPU (the mask names lanes that never arrive). The executor must either
    # report it or complete the shuffle for the lanes that came once the others have exited;
    # it must not hang. If it completes: lanes 0..14 read lane + 1, lanes 16..31 kept x.
    kind, value = isolated[("programs/divergent_shuffle.cu", "forward")]
    if kind == "fault":
        assert "half_shuffle" in value
    else:
        x = run("programs/divergent_shuffle.cu").initial["d_x"].tolist()
        assert value[:15] == x[1:16] and value[16:] == x[16:]


# ---- inline PTX loads and stores ---------------------------------------------------------------
def test_inline_ptx_accesses_are_counted_and_bounds_checked():
    """`ld.global`/`st.global` in inline PTX are lifted to ordinary accesses: the values are
    right, their bytes are counted, and --check-bounds reports the one past the end."""
    x = np.arange(1001, dtype=F32) / 4
    res = run("programs/asm_ldst.cu", inputs={"d_in": x})
    assert np.array_equal(res.final["d_tag"], (np.arange(1000) & 255).astype(np.uint8))
    shift, tag, _ = res.launches
    assert (shift.stats.global_load_bytes, shift.stats.global_store_bytes) == (4000, 4000)
    assert tag.stats.global_store_bytes == 1000
    assert np.array_equal(res.final["d_out"], 2 * x[1:])  # past_end's store went to the red zone
    with pytest.raises(KernelFault) as e:
        run("programs/asm_ldst.cu", inputs={"d_in": x}, check_bounds=True, jobs=1)
    assert re.fullmatch(r"out-of-bounds store of 4 bytes at address 0x[0-9a-f]+ in kernel "
                        r"past_end, block \(3, 0, 0\), thread \(232, 0, 0\)", e.value.message), \
        e.value.message
    assert e.value.notes == ("0 bytes past the end of d_out (4000 bytes)",)


@pytest.mark.parametrize("order", ["forward", "reverse", "random:3"])
def test_check_bounds_reports_a_read_past_a_shared_tile(order):
    """Shared-memory sites are checked against the static arrays' bytes first (checks.py):
    the other 127 threads' reads pass there, the read one past the tile does not, and the
    runtime reports it as any out-of-bounds access."""
    with pytest.raises(KernelFault) as e:
        run("programs/oob_shared.cu", check_bounds=True, order=order, jobs=1)
    assert re.fullmatch(r"out-of-bounds load of 4 bytes at address 0x[0-9a-f]+ in kernel "
                        r"right_sum, block \([01], 0, 0\), thread \(127, 0, 0\)",
                        e.value.message), e.value.message
    assert e.value.loc is not None and e.value.loc.line == 17
