"""Fan-out of variant builds: Ray tasks when Ray is installed and asked for, else a local
process pool (concurrent.futures), else this process. Every path runs the same function,
`variants.build_variant`, on the same picklable requests and returns results in request
order, so the results are the same whichever path ran them.

Workers start with `spawn`: a fresh interpreter imports sirius and analyses the program once
(`variants.session` caches it per process), which is also what a Ray worker on another machine
has to do; nothing unpicklable (isl objects, llvmlite modules) crosses a process boundary.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from sirius.procs import die_with_parent
from sirius.tune.variants import Request, VariantResult, build_variant

Progress = Callable[[str], None]


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def run_requests(requests: Sequence[Request], *, jobs: int = 1, use_ray: bool = False,
                 ray_address: str | None = None,
                 progress: Progress = lambda _: None) -> tuple[list[VariantResult], str]:
    """Build every request; returns the results in order and how they ran
    ("ray", "process pool (N workers)" or "in process")."""
    reqs = list(requests)
    if use_ray:
        if not ray_available():
            from sirius.diagnostics import SiriusError

            raise SiriusError("--ray: Ray is not installed (pip install 'sirius[scale]')")
        return _ray(reqs, ray_address, progress), "ray"
    if jobs > 1 and len(reqs) > 1:
        n = min(jobs, len(reqs))
        return _pool(reqs, n, progress), f"process pool ({n} workers)"
    out = []
    for q in reqs:
        r = build_variant(q)
        _built(r, progress)
        out.append(r)
    return out, "in process"


def _built(r: VariantResult, progress: Progress, how: str = "") -> None:
    progress(f"built {r.label}{how}" + (f" (failed: {r.error.splitlines()[0]})" if r.error
                                        else f" in {r.seconds:.1f} s"))


DIED = ("its worker process died while building it (killed by the system: out of memory? "
        "`dmesg` says; try fewer --jobs)")


def _pool(reqs: list[Request], n: int, progress: Progress,
          build: Callable[[Request], VariantResult] = build_variant) -> list[VariantResult]:
    """`reqs` on a pool of `n` spawned workers, in request order. A worker that dies (the
    kernel's OOM killer, a crash in native code) breaks the whole pool and every build still
    running in it; those are then built again one at a time, each in a pool of its own, so
    that only the build that kills its worker again fails (with DIED), not the tune."""
    ctx = multiprocessing.get_context("spawn")
    out: dict[int, VariantResult] = {}
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx,
                             initializer=die_with_parent) as pool:
        futures = {pool.submit(build, q): i for i, q in enumerate(reqs)}
        try:
            for f in as_completed(futures):
                out[futures[f]] = r = f.result()
                _built(r, progress)
        except BrokenProcessPool:
            pass
    again = [i for i in range(len(reqs)) if i not in out]
    if again:
        progress(f"a worker process died; building {len(again)} variant(s) again, one at a "
                 "time")
    for i in again:
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx,
                                 initializer=die_with_parent) as one:
            try:
                out[i] = one.submit(build, reqs[i]).result()
            except BrokenProcessPool:
                q = reqs[i]
                choices = q.choices if isinstance(q.choices, str) else tuple(q.choices)
                out[i] = VariantResult(q.label, q.split_storage, choices, q.original,
                                       error=DIED, megakernel=q.megakernel, without=q.without,
                                       smem=q.smem)
        _built(out[i], progress, " (alone)")
    return [out[i] for i in range(len(reqs))]


def _ray(reqs: list[Request], address: str | None, progress: Progress) -> list[VariantResult]:
    import ray

    if not ray.is_initialized():
        kw = {"address": address} if address else {"num_cpus": default_jobs()}
        ray.init(include_dashboard=False, log_to_driver=False, **kw)
    task = ray.remote(build_variant)
    refs = [task.remote(q) for q in reqs]
    out = ray.get(refs)
    for r in out:
        progress(f"built {r.label} (ray)" + (" (failed)" if r.error else ""))
    return out
