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
from concurrent.futures import ProcessPoolExecutor

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
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            out = []
            for r in pool.map(build_variant, reqs):
                progress(f"built {r.label}" + (f" (failed: {r.error.splitlines()[0]})"
                                               if r.error else f" in {r.seconds:.1f} s"))
                out.append(r)
        return out, f"process pool ({n} workers)"
    out = []
    for q in reqs:
        r = build_variant(q)
        progress(f"built {r.label}" + (f" (failed: {r.error.splitlines()[0]})" if r.error
                                       else f" in {r.seconds:.1f} s"))
        out.append(r)
    return out, "in process"


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
