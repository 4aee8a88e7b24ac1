"""Fan-out of a tune's work: Ray tasks by default when Ray is installed (a local Ray, or a
cluster at `ray_address`), else a local process pool (concurrent.futures), else this process.
One `Fanout` serves a whole tune: the variant builds, the verification of the candidates and,
on Ray, the GPU measurement (a task asking for one GPU). Every backend runs the same
module-level functions on the same picklable requests and returns results in request order,
so the results are the same whichever ran them.

Workers start with `spawn`: a fresh interpreter imports sirius and analyses the program once
(`variants.session` caches it per process), which is also what a Ray worker on another machine
has to do; nothing unpicklable (isl objects, llvmlite modules) crosses a process boundary. The
pool and Ray are started on first use and kept for the tune, so verification reuses the
workers (and their analysis) that built the variants.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from sirius.diagnostics import SiriusError
from sirius.procs import die_with_parent
from sirius.tune.variants import Request, VariantResult, build_variant

Progress = Callable[[str], None]
RAY_MODES = ("auto", "on", "off")  # auto: Ray when it is installed and starts, else the pool
NO_RAY = "Ray is not installed (pip install 'sirius[scale]')"


def ray_available() -> bool:
    """Whether `import ray` would find Ray (without importing it: that takes seconds)."""
    return importlib.util.find_spec("ray") is not None


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def ray_mode(use_ray: bool | None, jobs: int | None) -> str:
    """The Ray mode of `tune(use_ray=, jobs=)`: True on, False off; None (not said) auto,
    unless a number of local jobs was given (`--jobs N` asks for the local pool)."""
    if use_ray is not None:
        return "on" if use_ray else "off"
    return "auto" if jobs is None else "off"


class Fanout:
    """The backend of one tune. `ray` is one of RAY_MODES: `on` is an error (SiriusError)
    when Ray is missing or cannot start; `auto` falls back to the local pool and says why
    (`why`). Nothing starts before the first `map`; `close` ends what was started."""

    def __init__(self, jobs: int = 1, ray: str = "off", ray_address: str | None = None,
                 progress: Progress = lambda _: None):
        if ray not in RAY_MODES:
            raise ValueError(f"ray mode {ray!r}: one of {', '.join(RAY_MODES)}")
        self.jobs, self.ray, self.address, self.progress = max(1, jobs), ray, ray_address, \
            progress
        self.backend = ""      # "ray", "process pool (N workers)", "in process"
        self.why = ""          # why not Ray when it was wanted (auto) but did not run
        self._pool: Executor | None = None
        self._ray_owned = False

    # which backend -------------------------------------------------------------------------
    def start(self) -> str:
        """Start the backend (once) and return its name."""
        if self.backend:
            return self.backend
        if self.ray != "off":
            why = NO_RAY if not ray_available() else self._start_ray()
            if not why:
                self.backend = "ray"
                return self.backend
            if self.ray == "on":
                raise SiriusError(f"--ray: {why}")
            self.why = why
        self.backend = (f"process pool ({self.jobs} workers)" if self.jobs > 1
                        else "in process")
        return self.backend

    def _start_ray(self) -> str:
        """'' when Ray runs, else why it could not start."""
        try:
            import ray

            if not ray.is_initialized():
                kw = {"address": self.address} if self.address else {"num_cpus": self.jobs}
                ray.init(include_dashboard=False, log_to_driver=False, **kw)
                self._ray_owned = True
        except Exception as e:  # noqa: BLE001 - any reason Ray cannot start here
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return f"Ray could not start: {type(e).__name__}: {first}"
        return ""

    def describe(self) -> dict:
        """What ran, for tune.json: the backend, the Ray mode asked for, and why not Ray."""
        return {"backend": self.backend or "not started", "ray": self.ray,
                "ray_address": self.address, "why_not_ray": self.why or None}

    # running work ---------------------------------------------------------------------------
    def map(self, fn: Callable[[Any], Any], items: Sequence, done: Callable[[Any], str],
            died: Callable[[Any], Any]) -> list:
        """fn(item) for every item, in item order, on the backend; `done(result)` is said as
        each finishes; `died(item)` is the result of an item whose worker process died."""
        items = list(items)
        backend = self.start()
        if backend == "ray":
            return _ray(fn, items, done, self.progress)
        if backend == "in process" or not items:
            out = []
            for x in items:
                out.append(fn(x))
                self.progress(done(out[-1]))
            return out
        if self._pool is None:
            self._pool = _new_pool(self.jobs)
        try:
            return _pool(items, self.jobs, self.progress, fn, self._pool, done, died)
        finally:
            if getattr(self._pool, "_broken", False):
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def builds(self, reqs: Sequence[Request]) -> list[VariantResult]:
        return self.map(build_variant, reqs, built_text, died_build)

    def on_gpu(self, fn: Callable[..., Any], *args) -> tuple[Any, str]:
        """fn(*args) as a Ray task asking for one GPU when on Ray and the cluster has a GPU:
        (its result, ''); else (None, why not), for the caller to run it in this process."""
        if self.start() != "ray":
            return None, ""
        import ray

        if ray.cluster_resources().get("GPU", 0) < 1:
            return None, "the Ray cluster has no GPU: measured in this process"
        try:
            task = ray.remote(fn).options(num_gpus=1)
            return ray.get(task.remote(*args)), ""
        except Exception as e:  # noqa: BLE001 - a failed task falls back to this process
            first = str(e).strip().splitlines()[-1] if str(e).strip() else ""
            return None, (f"the Ray task with one GPU failed ({type(e).__name__}: {first}): "
                          "measured in this process")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._ray_owned:
            import ray

            ray.shutdown()
            self._ray_owned = False

    def __enter__(self) -> Fanout:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_requests(requests: Sequence[Request], *, jobs: int = 1, use_ray: bool = False,
                 ray_address: str | None = None,
                 progress: Progress = lambda _: None) -> tuple[list[VariantResult], str]:
    """Build every request on a fan-out of its own: (results in order, the backend)."""
    with Fanout(jobs, "on" if use_ray else "off", ray_address, progress) as fan:
        return fan.builds(requests), fan.backend


def built_text(r: VariantResult, how: str = "") -> str:
    return f"built {r.label}{how}" + (f" (failed: {r.error.splitlines()[0]})" if r.error
                                      else f" in {r.seconds:.1f} s")


DIED = ("its worker process died while building it (killed by the system: out of memory? "
        "`dmesg` says; try fewer --jobs)")


def died_build(q: Request) -> VariantResult:
    choices = q.choices if isinstance(q.choices, str) else tuple(q.choices)
    return VariantResult(q.label, q.split_storage, choices, q.original, error=DIED,
                         megakernel=q.megakernel, without=q.without, smem=q.smem)


def _new_pool(n: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with_parent)


def _pool(reqs: list, n: int, progress: Progress,
          build: Callable[[Any], Any] = build_variant, pool: Executor | None = None,
          done: Callable[[Any], str] = built_text,
          died: Callable[[Any], Any] = died_build) -> list:
    """`reqs` on `pool` (else a pool of `n` spawned workers of its own), in request order. A
    worker that dies (the kernel's OOM killer, a crash in native code) breaks the whole pool
    and every task still running in it; those are then run again one at a time, each in a
    pool of its own, so that only the task that kills its worker again fails (`died`), not
    the tune."""
    out: dict[int, Any] = {}
    own = pool is None
    pool = pool or _new_pool(n)
    try:
        futures = {pool.submit(build, q): i for i, q in enumerate(reqs)}
        try:
            for f in as_completed(futures):
                out[futures[f]] = r = f.result()
                progress(done(r))
        except BrokenProcessPool:
            pass
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    again = [i for i in range(len(reqs)) if i not in out]
    if again:
        progress(f"a worker process died; running {len(again)} task(s) again, one at a time")
    for i in again:
        with _new_pool(1) as one:
            try:
                out[i] = one.submit(build, reqs[i]).result()
            except BrokenProcessPool:
                out[i] = died(reqs[i])
        progress(done(out[i]) + " (alone)")
    return [out[i] for i in range(len(reqs))]


def _ray(fn: Callable[[Any], Any], items: list, done: Callable[[Any], str],
         progress: Progress) -> list:
    import ray

    task = ray.remote(fn)
    out = ray.get([task.remote(x) for x in items])
    for r in out:
        progress(done(r) + " (ray)")
    return out
