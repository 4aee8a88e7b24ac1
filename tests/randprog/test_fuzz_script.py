"""scripts/fuzz.py as a user runs it: --help, a bad option, Ctrl-C during start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import sigint_default

ROOT = Path(__file__).resolve().parents[2]
FUZZ = [sys.executable, str(ROOT / "scripts" / "fuzz.py")]


def test_help_exits_0() -> None:
    r = subprocess.run([*FUZZ, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--arrangement" in r.stdout and "seed % 3" in r.stdout and "--features" in r.stdout
    assert r.stderr == ""


def test_unknown_feature_is_a_usage_error() -> None:
    r = subprocess.run([*FUZZ, "--features", "+tables", "--count", "1"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert "unknown feature '+tables'" in r.stderr and "Traceback" not in r.stderr


def test_ctrl_c_during_start_up_is_quiet() -> None:
    """SIGINT to the whole process group (what a terminal's Ctrl-C does) while the workers
    start: exit status 130, one line on stderr, no traceback (from the main process or a
    worker), and no worker left running."""
    p = subprocess.Popen([*FUZZ, "--fuse", "--count", "6", "--jobs", "2"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True,
                         preexec_fn=sigint_default)
    time.sleep(1.0)
    assert p.poll() is None, "fuzz.py ended before the signal"
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (out, err)
    assert err == "fuzz: interrupted\n", err
    assert "Traceback" not in out
    deadline = time.monotonic() + 10  # terminated workers may take a moment on a busy machine
    while time.monotonic() < deadline:
        try:
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    raise AssertionError("a worker of the interrupted run is still alive")


def _load_fuzz():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sirius_fuzz_script", FUZZ[1])
    mod = importlib.util.module_from_spec(spec)
    # registered, so its functions pickle to the pool's (forked) workers by name
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _square_or_die(x: int) -> int:
    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)   # what an executor SIGSEGV does to a worker
    return x * x


def test_a_worker_that_dies_is_one_failure() -> None:
    """A program that kills its worker process (the executor crashing with a signal) is
    reported as that program's failure; the run goes on with the others, in order."""
    fuzz = _load_fuzz()
    for jobs in (1, 2):
        got = list(fuzz.outcomes(_square_or_die, [(x,) for x in range(7)], jobs))
        assert got == [(0, 0), (1, 1), (2, 4), (3, fuzz.DIED), (4, 16), (5, 25), (6, 36)]


def _square_or_spin(x: int) -> int:
    while x == 3:   # a program that never finishes (a hang inside isl's C code, say)
        pass
    return x * x


def test_a_program_past_the_time_limit_is_one_failure() -> None:
    """A program that runs past --time-limit CPU seconds is stopped (RLIMIT_CPU, SIGXCPU) and
    reported as that program's failure, not as a crash; the others finish, in order, and the
    limit of one program does not carry over to the next in the same worker."""
    fuzz = _load_fuzz()
    got = list(fuzz.outcomes(_square_or_spin, [(x,) for x in range(6)], 1, limit=1.0))
    assert got == [(0, 0), (1, 1), (2, 4), (3, fuzz.timed_out(1.0)), (4, 16), (5, 25)]
    assert fuzz.timed_out(1.0) != fuzz.DIED


def test_a_bad_time_limit_is_a_usage_error() -> None:
    r = subprocess.run([*FUZZ, "--time-limit", "-1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--time-limit must be >= 0" in r.stderr
