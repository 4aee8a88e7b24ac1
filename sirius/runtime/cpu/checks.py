"""The bounds checker's inline part, added to an instrumented JIT module (rewrite.py).

Each access site keeps the range (shared memory or one allocation) its last access was in, in
`@__sirius_site_range`; an access inside it costs a few compares, one outside it calls the
runtime's `sirius_rt_access`, which decides (sirius_rt.c) and sets the range. The device
clears the ranges at every launch (allocations change between launches); while tracing, the
runtime never sets one, so every access reaches it.

A site whose pointer comes from a static `__shared__` array (lowering.access_lines) is checked
against the static arrays' part of `@__sirius_smem`, whose size is a constant of the module: no
load, where the site's range costs two that LLVM reloads after every store it cannot tell apart
from them; an access outside that part goes to the runtime, which decides as for any site (it
is out of bounds, or in the launch's dynamic area). Paper resnext50's bounds-checked run: its
tiled convolutions (shared-memory tiles) took 4.5x their unchecked time with the range alone.
"""

from __future__ import annotations

# the inline check; an access at a fixed offset of one buffer never leaves it
_ACCESS_CHECK = """@__sirius_site_range = global [{n} x i64] zeroinitializer, align 64
define internal void @__sirius_access(ptr %p, i32 %size, i32 %kind, i32 %site) alwaysinline {{
  %a = ptrtoint ptr %p to i64
  %s = zext i32 %site to i64
  %i = shl i64 %s, 1
  %lop = getelementptr i64, ptr @__sirius_site_range, i64 %i
  %lo = load i64, ptr %lop, align 8
  %hip = getelementptr i64, ptr %lop, i64 1
  %hi = load i64, ptr %hip, align 8
  %off = sub i64 %a, %lo
  %lim = sub i64 %hi, %lo
  %sz = zext i32 %size to i64
  %end = add i64 %off, %sz
  %in = icmp ult i64 %off, %lim
  %fits = icmp ule i64 %end, %lim
  %ok = and i1 %in, %fits
  br i1 %ok, label %done, label %slow
slow:
  call void @sirius_rt_access(ptr @__sirius_ctx, ptr %p, i32 %size, i32 %kind, i32 %site)
  br label %done
done:
  ret void
}}"""


# the check of a static shared array's site: inside the static arrays, else the runtime decides
_SHARED_CHECK = """define internal void @__sirius_access_shared(ptr %p, i32 %size, i32 %kind, \
i32 %site) alwaysinline {{
  %a = ptrtoint ptr %p to i64
  %off = sub i64 %a, ptrtoint (ptr @__sirius_smem to i64)
  %sz = zext i32 %size to i64
  %end = add i64 %off, %sz
  %in = icmp ult i64 %off, {static}
  %fits = icmp ule i64 %end, {static}
  %ok = and i1 %in, %fits
  br i1 %ok, label %done, label %other
other:
  call void @sirius_rt_access(ptr @__sirius_ctx, ptr %p, i32 %size, i32 %kind, i32 %site)
  br label %done
done:
  ret void
}}"""


def access_check_ir(sites: int, smem_static: int) -> list[str]:
    """The lines of `@__sirius_site_range` (room for `sites` sites), `@__sirius_access` and
    `@__sirius_access_shared` (`smem_static`: the static shared arrays' bytes)."""
    return (_ACCESS_CHECK.format(n=2 * max(1, sites))
            + "\n" + _SHARED_CHECK.format(static=smem_static)).splitlines()
