"""Launch replay between the fused runs (sirius/verify/replay.py), its parts on their own: a
follower replays the leader's record of a launch with the same description and nothing else,
waits for a leader that has not passed the launch yet, and never for one that ended or died."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from sirius.runtime.device import LaunchStats
from sirius.verify.replay import Player, Recorder, ReplaySetup

IR = "define ptx_kernel void @k(ptr %out, ptr readonly %in, i32 %n) {\n  ret void\n}\n"
KERNELS = frozenset({"k"})


def _stats(seconds: float = 1.0) -> LaunchStats:
    return LaunchStats("k", (2, 1, 1), (32, 1, 1), 0, 640, 256, 256, 0, 0, 0, seconds, "fast")


def _args(out: np.ndarray, inp: np.ndarray, n: int = 64) -> list[tuple]:
    return [("buffer", "out", 0, out.view(np.uint8)), ("buffer", "in", 0, inp.view(np.uint8)),
            ("value", n)]


def _lead(setup: ReplaySetup, inp: np.ndarray) -> np.ndarray:
    """The leader's launch: out = 2 * in, recorded."""
    out = np.zeros(64, np.float32)
    rec = Recorder(setup, IR, True)

    def run():
        out[:] = 2 * inp
        return _stats()

    rec.launch("k", (2, 1, 1), (32, 1, 1), 0, _args(out, inp), run)
    rec.finish()
    return out


def _follow(setup: ReplaySetup, inp: np.ndarray, n: int = 64):
    out = np.zeros(64, np.float32)  # as the leader's was: an output is an input too
    ran = []
    player = Player(setup, IR, True)

    def run():
        ran.append(True)
        out[:] = 3 * inp  # not what the leader wrote: shows which path was taken
        return _stats()

    stats = player.launch("k", (2, 1, 1), (32, 1, 1), 0, _args(out, inp, n), run)
    return out, stats, bool(ran), player.replayed


def test_a_follower_replays_the_same_launch_and_runs_any_other():
    inp = np.arange(64, dtype=np.float32)
    setup = ReplaySetup.new(KERNELS)
    try:
        led = _lead(setup, inp)
        out, stats, ran, replayed = _follow(setup, inp)
        assert not ran and replayed == 1 and stats.replayed
        assert out.tolist() == led.tolist() == (2 * inp).tolist()
        assert stats.instructions == 640  # the leader's counters
        other = inp.copy()
        other[5] += 1  # one input byte differs: the kernel runs
        out, stats, ran, replayed = _follow(setup, other)
        assert ran and replayed == 0 and not stats.replayed and out.tolist() == (3 * other).tolist()
        out, _, ran, _ = _follow(setup, inp, n=65)  # a scalar differs
        assert ran
        player = Player(setup, IR, True)  # an output buffer whose contents differ
        dirty, calls = np.ones(64, np.float32), []
        player.launch("k", (2, 1, 1), (32, 1, 1), 0, _args(dirty, inp),
                      lambda: calls.append(1) or _stats())
        assert player.replayed == 0 and calls == [1]
    finally:
        setup.remove()
    assert not os.path.exists(setup.directory)


def test_a_follower_waits_for_the_leader_to_pass_the_launch():
    inp = np.arange(64, dtype=np.float32)
    setup = ReplaySetup.new(KERNELS)  # "leader" holds this process's id: one is to come
    try:
        def later():
            time.sleep(0.3)
            _lead(setup, inp)

        t = threading.Thread(target=later)
        t0 = time.perf_counter()
        t.start()
        out, _, ran, replayed = _follow(setup, inp)
        t.join()
        assert time.perf_counter() - t0 >= 0.3
        assert not ran and replayed == 1 and out.tolist() == (2 * inp).tolist()
    finally:
        setup.remove()


def test_a_follower_does_not_wait_for_a_leader_that_ended_or_died():
    inp = np.arange(64, dtype=np.float32)
    ended = ReplaySetup.new(KERNELS)
    dead = ReplaySetup.new(KERNELS)
    try:
        Recorder(ended, IR, True).finish()  # ended before this launch: no record, no mark
        with open(os.path.join(dead.directory, "leader"), "w") as f:
            f.write("999999999")  # no such process
        for setup in (ended, dead):
            t0 = time.perf_counter()
            out, _, ran, _ = _follow(setup, inp)
            assert ran and time.perf_counter() - t0 < 0.5
    finally:
        ended.remove()
        dead.remove()
