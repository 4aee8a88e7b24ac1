"""Verify at scale (issue 16 item 7): the original's runs and each fused order run in worker
processes (sirius.verify.runs); the result is the serial one; --fail-fast stops at the first
mismatch; a pool that cannot be used falls back to serial runs with a note."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading

from codegen_support import replace_launches
from test_codegen import CHAIN_MAPS, chain
from test_verify import Fused, N, fused_chain

from sirius.fusion.codegen.emit import build
from sirius.fusion.spec import GLOBAL, FusedKernelSpec
from sirius.verify import runs
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

ORDERS = ("forward", "reverse", "random:1")


def dropped_launch() -> Fused:
    """The chain with its last launch dropped: d_out keeps its seeded data (every order and
    every element differs; test_verify.test_dropped_launch_fails)."""
    e, _ = chain()
    spec = FusedKernelSpec("chain3", "vertical", tuple(
        e.member(i, param_map=m, mapping=GLOBAL) for i, m in enumerate(CHAIN_MAPS[:3])))
    fm = build(e.program.device_ir, [spec])
    new = fm.kernel("chain3").launch(e.launches[:3])
    return Fused(fm.text, replace_launches(e.host, [0, 1, 2, 3], new))


def _rows(rep) -> list[dict]:
    return [r.to_json() for r in rep.rows]


def test_parallel_runs_give_the_serial_report() -> None:
    e, _ = chain()
    ticks: list[str] = []
    par = verify_fused(e, fused_chain(), jobs=2, launch_progress=ticks.append)
    ser = verify_fused(e, fused_chain(), jobs=1)
    assert par.ok and ser.ok and (par.jobs, ser.jobs) == (2, 1) and not par.notes
    assert _rows(par) == _rows(ser) and len(par.rows) == 3
    assert par.counters() == ser.counters()
    # progress per launch from the workers: the original's 4 launches, each fused run's 1;
    # every fused order agrees with the original, so it runs once
    key = "original forward"
    assert [t for t in ticks if t.startswith(key)] == [
        f"{key}: launch {i} of 4" for i in (1, 2, 3, 4)]
    assert not [t for t in ticks if t.startswith("original reverse")]
    for order in ORDERS:
        assert f"fused {order}: launch 1 of 1" in ticks
    assert "runs: 2 worker processes" in par.render()


def test_fail_fast_stops_after_the_first_mismatch() -> None:
    e, _ = chain()
    lines: list[str] = []
    rep = verify_fused(e, dropped_launch(), jobs=1, fail_fast=True, progress=lines.append)
    assert rep.status == "mismatch"
    assert [(r.order, r.buffer, r.mismatches) for r in rep.rows] == [("forward", "d_out", N)]
    assert rep.not_run == ("reverse", "random:1")
    assert rep.notes == ("--fail-fast: stopped at the first mismatch; not run: reverse, "
                         "random:1",)
    assert not any("fused program (reverse" in s for s in lines)
    # without it every order runs
    assert len(verify_fused(e, dropped_launch(), jobs=1).rows) == 3


def test_fail_fast_with_workers() -> None:
    e, _ = chain()
    rep = verify_fused(e, dropped_launch(), jobs=2, fail_fast=True)
    assert rep.status == "mismatch" and rep.failed()
    ran = [r.order for r in rep.rows]
    assert ran and set(ran) | set(rep.not_run) == set(ORDERS)
    assert all(r.mismatches == N for r in rep.rows)


def test_a_pool_that_cannot_start_falls_back_to_serial(monkeypatch) -> None:
    # a context that does not pickle (a lock in it): no worker gets it
    real = runs.Runner.__init__

    def unpicklable(self, ctx, *a, **k):
        real(self, dataclasses.replace(ctx, keep={**ctx.keep, "lock": threading.Lock()}),
             *a, **k)

    monkeypatch.setattr(runs.Runner, "__init__", unpicklable)
    e, _ = chain()
    lines: list[str] = []
    rep = verify_fused(e, fused_chain(), jobs=2, progress=lines.append)
    assert rep.ok and rep.jobs == 1 and len(rep.rows) == 3
    [note] = rep.notes
    assert note.startswith("the worker processes failed (TypeError: cannot pickle") \
        and note.endswith("the runs go on one after another in this process")
    assert sum("running the fused program" in s for s in lines) == 3
    assert "note: the worker processes failed" in rep.render()


def test_cli_jobs_and_fail_fast_options() -> None:
    prog = str(ROOT / "tests" / "fusion" / "verify_programs" / "qkv_nocopy.cu")
    proc = run_cli("verify", prog, "-j", "2", "--fail-fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the first launch tick always shows (later ones at most every 5 s on a pipe)
    assert re.search(r"(original|fused) \S+: launch \d of \d", proc.stderr)
    assert "runs: 2 worker processes" in proc.stdout
    bad = run_cli("verify", prog, "-j", "0")
    assert bad.returncode == 2 and "'0' is not a number of worker processes" in bad.stderr
    # without -j: $SIRIUS_VERIFY_JOBS (the suite sets 1), checked like -j
    serial = run_cli("verify", prog, "--json", "-q", env_changes={"SIRIUS_VERIFY_JOBS": "1"})
    assert serial.returncode == 0 and json.loads(serial.stdout)["jobs"] == 1
    bad = run_cli("verify", prog, env_changes={"SIRIUS_VERIFY_JOBS": "two"})
    assert bad.returncode == 2 and "SIRIUS_VERIFY_JOBS='two'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_fail_fast_when_the_originals_finish_out_of_order(monkeypatch) -> None:
    """Workers finish in any order: the original's second order may be back before its first
    (CI saw KeyError 'forward'). Reproduced in one process by running the originals last
    submitted first."""
    submit = runs.Runner.submit

    def lifo(self, spec, message=""):
        submit(self, spec, message)
        if spec.side == "original" and self.pool is None:
            self.waiting.insert(0, self.waiting.pop())

    monkeypatch.setattr(runs.Runner, "submit", lifo)
    e, _ = chain()
    rep = verify_fused(e, dropped_launch(), jobs=1, fail_fast=True)
    assert rep.status == "mismatch" and rep.failed()
    assert [(r.order, r.mismatches) for r in rep.rows] == [("forward", N)]
    assert not rep.order_dependent


def test_a_worker_whose_parent_ends_before_its_start_is_quiet() -> None:
    # Ctrl-C can end sirius between forking a worker and sending it its start-up data; the
    # worker then reads EOF, and without `_forkchild` the fork server prints that traceback
    # after "sirius: interrupted" (tests/test_bad_input.py::test_ctrl_c_signal, under load).
    import subprocess
    import sys

    script = """if True:
        import os, sys
        from multiprocessing import forkserver
        from sirius.verify.runs import pool_context
        PRELOAD
        forkserver.ensure_running()
        r, w = os.pipe()
        _, pid = forkserver.connect_to_new_process([r])   # forked, then told nothing
        sys.stderr.write(f"forked {pid}\\n"); sys.stderr.flush()
        os._exit(130)
    """
    def run(preload: str) -> str:
        p = subprocess.run([sys.executable, "-c", script.replace("PRELOAD", preload)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
        return p.stderr  # complete: the pipe closes when the fork server and its child end
    # the unprotected fork server shows the problem (so the check below can fail) ...
    assert "EOFError" in run("import multiprocessing as mp; mp.set_forkserver_preload([])")
    # ... and the pool's context silences it
    assert "Traceback" not in run("pool_context()")


def test_a_worker_start_error_is_quiet_only_once_sirius_has_ended(monkeypatch, capsys) -> None:
    # Under load a Ctrl-C also landed after the pool's semaphores were unlinked: the new
    # worker's unpickling raised FileNotFoundError (rebuilding one), printed after "sirius:
    # interrupted". Quiet only when the sirius process is gone; while it runs, print.
    import os
    import subprocess
    import sys

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # the import below replaces it
    from sirius.verify import _forkchild

    shown: list[type] = []
    monkeypatch.setattr(_forkchild, "_default_hook", lambda tp, v, tb: shown.append(tp))
    err = FileNotFoundError(2, "No such file or directory")
    monkeypatch.setattr(_forkchild, "_SIRIUS", os.getpid())  # alive
    _forkchild._orphan_quiet(FileNotFoundError, err, None)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: no such process
    monkeypatch.setattr(_forkchild, "_SIRIUS", gone.pid)
    _forkchild._orphan_quiet(FileNotFoundError, err, None)
    _forkchild._orphan_quiet(ValueError, ValueError("a bug"), None)
    assert shown == [FileNotFoundError, ValueError]
    # while sirius still runs (its exit handlers unlinked the semaphore, and it may wait for
    # this worker): quiet when the error comes from rebuilding a semaphore
    monkeypatch.setattr(_forkchild, "_SIRIUS", os.getpid())
    from multiprocessing import synchronize

    import pytest

    lock = synchronize.SemLock.__new__(synchronize.SemLock)
    with pytest.raises(FileNotFoundError) as raised:
        lock.__setstate__((0, 1, 1, "/sirius-test-no-such-semaphore"))
    _forkchild._orphan_quiet(FileNotFoundError, raised.value, raised.tb)
    assert shown == [FileNotFoundError, ValueError]


def test_the_resource_tracker_is_started_quiet() -> None:
    # its leaked-semaphore warnings after an interrupted verify (os._exit) reached the terminal
    import sys
    from multiprocessing import util

    from sirius.verify.runs import _TRACKER_QUIET, pool_context

    pool_context()
    assert f"-W{_TRACKER_QUIET}" in util._args_from_interpreter_flags()
    assert sys.warnoptions.count(_TRACKER_QUIET) == 1
    pool_context()
    assert sys.warnoptions.count(_TRACKER_QUIET) == 1


def test_workers_end_when_sirius_is_killed() -> None:
    # SIGTERM or SIGKILL from outside (`timeout`, a CI runner) left the fork server and its
    # workers running for good: a pool worker holds both ends of its own task queue, and
    # keeps the server alive. Now each ends with its parent (`_forkchild`, `procs`).
    import signal
    import subprocess
    import sys
    import time

    script = """if True:
        import os, signal, time
        from concurrent.futures import ProcessPoolExecutor
        from sirius.verify.runs import pool_context
        if __name__ == "__main__":
            pool = ProcessPoolExecutor(1, mp_context=pool_context())
            assert pool.submit(os.getpid).result(timeout=60) > 0  # a worker runs
            pool.submit(time.sleep, 120)
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
    """
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.wait(timeout=60) == -signal.SIGKILL

    def left() -> list[str]:
        return subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True,
                              text=True).stdout.split()

    deadline = time.monotonic() + 15
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = left()
    if survivors:
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)])
    assert not survivors


def test_the_reference_run_started_ahead_gives_the_same_report() -> None:
    from sirius.verify.differential import start_reference

    e, _ = chain()
    said: list[str] = []
    head = start_reference(e, seed=7)
    assert head is not None
    ahead = verify_fused(e, fused_chain(), jobs=2, progress=said.append, head=head)
    plain = verify_fused(e, fused_chain(), jobs=2)
    assert ahead.ok and _rows(ahead) == _rows(plain) and ahead.counters() == plain.counters()
    assert any("started during the fusion" in s for s in said), said
    assert head.pool is None  # ended with the runner
    # with the reference ahead and no -j, every fused order gets a worker of its own
    shared = verify_fused(e, fused_chain(), jobs=None, head=start_reference(e, seed=7))
    assert shared.ok and shared.jobs == max(os.cpu_count() or 1, 3)
    assert _rows(shared) == _rows(plain)
    # a mismatch is still found when the reference came ahead
    bad = verify_fused(e, dropped_launch(), jobs=2, head=start_reference(e, seed=7))
    assert not bad.ok and len(bad.failed()) == 3


def test_a_reference_run_for_other_inputs_is_not_used() -> None:
    from sirius.verify.differential import start_reference

    e, _ = chain()
    said: list[str] = []
    head = start_reference(e, seed=8)  # verify below uses seed 7
    rep = verify_fused(e, fused_chain(), jobs=2, progress=said.append, head=head)
    assert rep.ok and head.pool is None
    assert not any("started during the fusion" in s for s in said)
    assert _rows(rep) == _rows(verify_fused(e, fused_chain(), jobs=1))


def test_cli_verify_starts_the_reference_during_the_fusion_where_it_saves_a_round() -> None:
    prog = str(ROOT / "kernels" / "elementwise_chain.cu")
    started = "running the original program (forward order, seed 7) (started during the fusion)"
    on = {"SIRIUS_HEAD_START": None,  # the defaults (the suite turns them off)
          "SIRIUS_VERIFY_JOBS": None}
    # 3 workers: the 3 fused orders in one round instead of two
    out = run_cli("verify", prog, "-j", "3", env_changes=on)
    assert out.returncode == 0, out.stderr
    assert started in out.stderr
    # no -j: the fused orders share the cores, a worker each
    shared = run_cli("verify", prog, "--json", env_changes=on)
    assert shared.returncode == 0 and started in shared.stderr
    assert json.loads(shared.stdout)["jobs"] == max(os.cpu_count() or 1, 3)
    # 2 workers: two rounds either way (the other cases: test_when_the_head_start_saves_time)
    other = run_cli("verify", prog, "-j", "2", env_changes=on)
    assert other.returncode == 0 and "started during the fusion" not in other.stderr


def test_when_the_head_start_saves_time(monkeypatch) -> None:
    from sirius.cli.fuse import Reference

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.delenv("SIRIUS_HEAD_START", raising=False)
    assert Reference(7, None, 3).wanted()          # the fused runs then share the cores
    assert not Reference(7, 2, 3).wanted()         # 4 runs or 3 on 2 workers: 2 rounds
    assert Reference(7, 3, 3).wanted()             # 3 workers: 1 round instead of 2
    assert Reference(7, None, 1, serial=True).wanted()
    assert not Reference(7, None, 1, serial=True, default=False).wanted()  # sirius fuse
    assert not Reference(7, 1, 3).wanted()
    monkeypatch.setenv("SIRIUS_HEAD_START", "1")
    assert Reference(7, None, 3).wanted()
    assert Reference(7, None, 3, serial=True, default=False).wanted()
    monkeypatch.setenv("SIRIUS_HEAD_START", "0")
    assert not Reference(7, 3, 3, serial=True).wanted()
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    monkeypatch.delenv("SIRIUS_HEAD_START")
    assert not Reference(7, None, 3, serial=True).wanted()


def test_the_fused_module_built_ahead_is_the_one_the_fused_runs_load(tmp_path) -> None:
    # Reference.prebuild: the bounds-checked executor module of the fused program, built in a
    # worker while PTX and ptxas run; the runs must then find it in the cache, not build it
    # (a fresh process: the fork server keeps the environment it started with)
    import subprocess
    import sys

    script = """if True:
        from sirius.cli.fuse import Reference
        from sirius.pipeline import fuse
        from sirius.runtime.cpu.device import jit_speed
        from sirius.runtime.cpu.jit import JitModule
        ref = Reference(7, None, 3)
        res = fuse(["kernels/elementwise_chain.cu"], on_original=ref, on_device_ir=ref.prebuild)
        ref.builder.future.result(120)
        def unwanted():
            raise SystemExit("the module was built again")
        JitModule(unwanted, instrument=True, text=res.device_ir,
                  speed=jit_speed(res.host.data_bytes()))
        ref.close()
        print("cached", ref.builder is None)
    """
    env = dict(os.environ, SIRIUS_CACHE_DIR=str(tmp_path), SIRIUS_PREBUILD="1")
    p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env=env)
    assert p.returncode == 0 and p.stdout.strip() == "cached True", p.stderr[-2000:]


def test_cli_verify_with_the_module_built_ahead() -> None:
    prog = str(ROOT / "kernels" / "elementwise_chain.cu")
    on = {"SIRIUS_HEAD_START": None, "SIRIUS_VERIFY_JOBS": None, "SIRIUS_PREBUILD": "1"}
    out = run_cli("verify", prog, "--json", env_changes=on)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "ok"
    assert "building the fused program's CPU module ahead" in out.stderr
    off = run_cli("verify", prog, "--json", env_changes=dict(on, SIRIUS_PREBUILD="0"))
    assert off.returncode == 0 and "CPU module ahead" not in off.stderr


def test_the_reference_started_ahead_compiles_its_module_in_one_piece(monkeypatch) -> None:
    # it runs during the fusion: a compile on every core would take the fusion's core
    ctx = None  # what _init keeps for the runs; not used here
    monkeypatch.delenv("SIRIUS_JIT_PARTS", raising=False)
    runs._init(ctx, None, "1")
    assert os.environ["SIRIUS_JIT_PARTS"] == "1"
    monkeypatch.setenv("SIRIUS_JIT_PARTS", "3")  # the user's choice stands
    runs._init(ctx, None, "1")
    assert os.environ["SIRIUS_JIT_PARTS"] == "3"
    runs._init(ctx, None)  # the other workers: as the user or jit.py decides
    assert os.environ["SIRIUS_JIT_PARTS"] == "3"
