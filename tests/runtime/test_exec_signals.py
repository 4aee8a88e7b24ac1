"""Kernels that crash and launches that take forever: a signal a kernel raises (SIGSEGV, SIGFPE,
SIGILL, a stack overflow) is a reported fault naming the kernel, never the death of the process;
a long launch is announced, shows its progress, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from sirius.runtime.cpu import monitor
from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.device import KernelFault
from sirius.runtime.interpreter import HostInterpreter, run_host_program
from tests.helpers import sigint_default
from tests.runtime.execsupport import ROOT, analysed, program_path

FAULTS = "programs/kernel_faults.cu"
HINT = "re-run with --check-bounds to find the access (its source line and the buffer)"
WHERE = "block (0, 0, 0), thread (37, 0, 0)"


def fault_run(mode: int, check_bounds: bool = False,
              loops: bool = True) -> tuple[HostInterpreter, KernelFault]:
    program, kernels, host = analysed(FAULTS)
    dev = CpuDevice(check_bounds=check_bounds, loops=loops)
    interp = HostInterpreter(host, {k.mangled: k for k in kernels}, dev,
                             dev.load_module(program), seed=1,
                             inputs={"d_mode": np.array([mode], np.int32),
                                     "d_div": np.zeros(1, np.int32)})
    with pytest.raises(KernelFault) as e:
        interp.run()
    return interp, e.value


@pytest.mark.parametrize("mode,kernel,line", [(1, "faulty", 61), (11, "faulty_fibers", 62)])
def test_store_into_the_no_access_region_is_a_fault(mode, kernel, line):
    # out[37 + 8192]: 32916 bytes from the start of d_out (4096 bytes), 28820 past its end
    interp, f = fault_run(mode)
    m = re.fullmatch(rf"invalid memory store to address 0x([0-9a-f]+) in kernel {kernel}, "
                     rf"{re.escape(WHERE)}", f.message)
    assert m, f.message
    assert int(m.group(1), 16) == interp.addr["d_out"] + 4 * (37 + 8192)
    assert f.notes == ("28820 bytes past the end of d_out (4096 bytes)", HINT)
    assert f.loc is not None and f.loc.line == line  # the launch


@pytest.mark.parametrize("mode,kernel", [(2, "faulty"), (12, "faulty_fibers")])
def test_integer_division_by_zero(mode, kernel):
    _, f = fault_run(mode)
    assert f.message == (f"integer division by zero (or overflow) in kernel {kernel}, {WHERE}; "
                         "a GPU gives an undefined result there, the CPU traps")
    assert f.notes == ()


@pytest.mark.parametrize("mode,kernel", [(3, "faulty"), (13, "faulty_fibers")])
def test_trap(mode, kernel):
    _, f = fault_run(mode)
    assert f.message == (f"trap in kernel {kernel}, {WHERE}: the kernel called __trap() or "
                         "reached code the compiler marked unreachable")


@pytest.mark.parametrize("mode,kernel,loops,room", [
    (4, "faulty", True, "threads run on the worker's stack"),
    (14, "faulty_fibers", True, "threads run on the worker's stack"),  # work-item loops
    (14, "faulty_fibers", False, "each thread has 256 KiB of stack")])
def test_stack_overflow(mode, kernel, loops, room):
    _, f = fault_run(mode, loops=loops)
    assert f.message == (f"stack overflow in kernel {kernel}, {WHERE} ({room}: deep or "
                         "unbounded recursion, or large local arrays?)")


@pytest.mark.parametrize("mode,kernel", [(5, "faulty"), (15, "faulty_fibers")])
def test_wild_store_far_from_every_buffer(mode, kernel):
    _, f = fault_run(mode)
    assert f.message == f"invalid memory store to address 0x400000000000 in kernel {kernel}, " \
                        f"{WHERE}"
    assert f.notes == (HINT,)  # no buffer is near 2^46


def test_checked_run_reports_the_access_itself():
    _, f = fault_run(1, check_bounds=True)
    assert f.message.startswith("out-of-bounds store of 4 bytes at address 0x")
    assert f.loc is not None and f.loc.line == 29  # out[i + 8192] = 1.0f


def test_the_device_runs_on_after_faults():
    for mode in (1, 2, 3, 4, 14):
        fault_run(mode)
    program, kernels, host = analysed(FAULTS)
    r = run_host_program(host, program, kernels, CpuDevice(), seed=1,
                         inputs={"d_mode": np.array([0], np.int32)})
    out = r.final["d_out"]
    assert np.all(np.delete(out, 37) == 2.0)  # thread 37 writes nothing in mode 0


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sirius.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, **kw)


@pytest.mark.parametrize("mode,first,notes", [
    (1, r"invalid memory store to address 0x[0-9a-f]+ in kernel faulty, " + re.escape(WHERE),
     ["note: 28820 bytes past the end of d_out (4096 bytes)", f"note: {HINT}"]),
    (4, re.escape(f"stack overflow in kernel faulty, {WHERE} (threads run on the worker's stack: "
                  "deep or unbounded recursion, or large local arrays?)"), [])])
def test_cli_fault_exits_2_with_a_message(tmp_path, mode, first, notes):
    np.save(tmp_path / "mode.npy", np.array([mode], np.int32))
    p = cli("run", str(program_path(FAULTS)), "--input", f"d_mode={tmp_path / 'mode.npy'}")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert re.fullmatch(r"\S+kernel_faults\.cu:61:11: error: " + first, lines[0]), lines[0]
    assert lines[1].strip() == "faulty<<<N / 256, 256>>>(d_mode, d_out, d_div);"
    assert lines[3:] == notes
    assert "Traceback" not in p.stderr


def test_unchecked_store_past_the_end_warns(capsys):
    # oob_store.cu: thread 1000 stores out[1000], one past the end of d_out (1000 floats); the
    # store lands in the red zone, the run finishes, and a warning says so
    program, kernels, host = analysed("programs/oob_store.cu")
    r = run_host_program(host, program, kernels, CpuDevice())
    assert r.final["d_out"].size == 1000
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert re.fullmatch(r"\S+oob_store\.cu:33:15: warning: kernel off_by_one wrote just outside "
                        r"d_out \(4000 bytes\): the red zone around it changed; re-run with "
                        r"--check-bounds to find the access \[out-of-bounds\]", line), line


# ---- long launches -----------------------------------------------------------------------------
HUGE = "programs/huge_launch.cu"  # 2^31 - 1 blocks of 256 threads


def test_cli_warns_and_stops_on_ctrl_c():
    # --jobs 1: the estimate is 2147483647 blocks x (15 ns + 256 x 5 ns) = 2781 s = 46 min
    p = subprocess.Popen([sys.executable, "-m", "sirius.cli", "run", "--jobs", "1",
                          str(program_path(HUGE))], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    try:
        warning = p.stderr.readline()
        time.sleep(1.0)  # the launch runs
        p.send_signal(signal.SIGINT)
        t0 = time.perf_counter()
        out, err = p.communicate(timeout=60)
    finally:  # never leave a 46-minute launch running behind a failed test
        if p.poll() is None:
            p.kill()
            p.wait()
    assert time.perf_counter() - t0 < 10
    assert p.returncode == 130, err
    assert re.fullmatch(r"\S+huge_launch\.cu:16:9: warning: kernel tiny launches 2,147,483,647 "
                        r"blocks of 256 threads; on the CPU executor that takes 46 min at the "
                        r"very least \(Ctrl-C stops it\) \[long-launch\]\n", warning), warning
    assert err == "sirius: interrupted\n"
    assert out == ""


def test_progress_lines_and_interrupt_in_process():
    # Plain progress lines every 0.1 s; SIGINT once three are out: KeyboardInterrupt, soon.
    stream = io.StringIO()

    def progress(kernel: str, total: int) -> monitor.Progress:
        return monitor.Progress(kernel, total, stream=stream, interval=0.1, delay=0.0)

    program, kernels, host = analysed(HUGE)
    dev = CpuDevice(jobs=1, progress=progress)

    def interrupt() -> None:
        while stream.getvalue().count("\n") < 3:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt, daemon=True)
    # Python's own handler, whatever the process had (a worker of a test runner may not)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    t.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_host_program(host, program, kernels, dev)
    finally:
        signal.signal(signal.SIGINT, old)
    assert time.perf_counter() - t0 < 30
    t.join()
    lines = stream.getvalue().splitlines()
    done = []
    for line in lines:
        m = re.fullmatch(r"sirius: kernel tiny: ([\d,]+) of 2,147,483,647 blocks \(\d+\.\d%\), "
                         r"\d+ s(, about [\d.]+ (s|min|h|days|years) left)?", line)
        assert m, line
        done.append(int(m.group(1).replace(",", "")))
    assert done == sorted(done) and done[-1] > 0
    # the device is usable afterwards, with fresh state
    program, kernels, host = analysed("programs/device_counter.cu")
    r = run_host_program(host, program, kernels, CpuDevice())
    assert r.final["d_out"].tolist() == [128, 25, 36]


def test_estimate_and_durations():
    # 1024 blocks x 1024 threads on 2 workers: 1024 (15 + 1024 x 5) ns / 2 = 2.629 ms
    assert monitor.estimate_seconds(1024, 1024, 2, False) == pytest.approx(1024 * 5135e-9 / 2)
    assert monitor.estimate_seconds(10, 100, 1, True) == pytest.approx(10 * 6015e-9)
    assert [monitor.duration(s) for s in (59, 3000, 7300, 86400 * 3, 86400 * 3650)] == \
        ["59 s", "50 min", "2.0 h", "3 days", "10 years"]
