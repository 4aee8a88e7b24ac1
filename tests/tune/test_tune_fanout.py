"""A worker process that dies while building a variant (the OOM killer, a crash in native code)
fails that variant, not the whole tune: the builds the broken pool lost are built again one at
a time."""

from __future__ import annotations

import os

import pytest

from sirius.diagnostics import SiriusError
from sirius.tune import fanout
from sirius.tune.variants import Request, Source, VariantResult

SRC = Source(("none.cu",), "sm_90")


def fake_build(req: Request) -> VariantResult:
    """A build that kills its worker for the variant labelled 'boom' (module level: spawned
    workers import it)."""
    if req.label == "boom":
        os._exit(9)
    return VariantResult(req.label, req.split_storage, req.choices, req.original, seconds=0.0)


def test_a_dead_worker_fails_its_variant_only():
    reqs = [Request(SRC, label) for label in ("a", "boom", "b", "c")]
    said: list[str] = []
    out = fanout._pool(reqs, 2, said.append, build=fake_build)
    assert [r.label for r in out] == ["a", "boom", "b", "c"]
    assert [r.ok for r in out] == [True, False, True, True]
    assert out[1].error == fanout.DIED
    assert any("a worker process died" in s for s in said)


# the backend: Ray by default when installed, else the local pool, and why -------------------
def _fake_ray(monkeypatch, **kw):
    import sys

    from tests.tune.fakeray import FakeRay

    ray = FakeRay(**kw)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(fanout, "ray_available", lambda: True)
    return ray


def test_ray_is_the_default_unless_jobs_or_no_ray_say_otherwise():
    assert fanout.ray_mode(None, None) == "auto"    # sirius tune with no option
    assert fanout.ray_mode(None, 2) == "off"        # --jobs 2: the local pool
    assert fanout.ray_mode(False, None) == "off"    # --no-ray
    assert fanout.ray_mode(True, 2) == "on"         # --ray --jobs 2: Ray with 2 CPUs


def test_auto_runs_on_ray_when_it_is_installed(monkeypatch):
    ray = _fake_ray(monkeypatch)
    with fanout.Fanout(2, "auto") as fan:
        out = fan.builds([Request(SRC, "a", original=True)])
        assert fan.backend == "ray" and fan.why == ""
    assert ray.inits == [{"include_dashboard": False, "log_to_driver": False, "num_cpus": 2}]
    assert ray.calls == [("build_variant", {})] and out[0].label == "a"
    assert not ray.is_initialized()  # the fan-out shut down the Ray it started


def test_auto_without_ray_is_the_local_pool_and_says_why(monkeypatch):
    monkeypatch.setattr(fanout, "ray_available", lambda: False)
    fan = fanout.Fanout(2, "auto")
    assert fan.start() == "process pool (2 workers)" and fan.why == fanout.NO_RAY
    assert fan.describe()["why_not_ray"] == fanout.NO_RAY
    assert fanout.Fanout(1, "auto").start() == "in process"
    with pytest.raises(SiriusError, match="--ray: Ray is not installed"):
        fanout.Fanout(2, "on").start()


def test_ray_that_cannot_start_falls_back_with_the_reason(monkeypatch):
    _fake_ray(monkeypatch, init_error=ConnectionError("no cluster at ray://x:10001"))
    fan = fanout.Fanout(1, "auto", "ray://x:10001")
    assert fan.start() == "in process"
    assert fan.why == "Ray could not start: ConnectionError: no cluster at ray://x:10001"
    with pytest.raises(SiriusError, match="--ray: Ray could not start: ConnectionError"):
        fanout.Fanout(1, "on", "ray://x:10001").start()


def test_gpu_tasks_on_ray_ask_for_one_gpu_and_fall_back_cleanly(monkeypatch):
    ray = _fake_ray(monkeypatch)
    with fanout.Fanout(2, "on") as fan:
        assert fan.on_gpu(divmod, 7, 2) == ((3, 1), "")
    assert ray.calls == [("divmod", {"num_gpus": 1})]
    ray = _fake_ray(monkeypatch, gpus=0)  # a cluster without a GPU: never submitted
    with fanout.Fanout(2, "on") as fan:
        assert fan.on_gpu(divmod, 7, 2) == (None, "the Ray cluster has no GPU: measured in "
                                                  "this process")
    assert ray.calls == []
    _fake_ray(monkeypatch, task_error=RuntimeError("CUDA_ERROR_NO_DEVICE"))
    with fanout.Fanout(2, "on") as fan:
        got, why = fan.on_gpu(divmod, 7, 2)
    assert got is None and "the Ray task with one GPU failed (RuntimeError: " \
        "CUDA_ERROR_NO_DEVICE): measured in this process" == why
    # without Ray the caller measures in its own process, with nothing to say
    assert fanout.Fanout(2, "off").on_gpu(divmod, 7, 2) == (None, "")
