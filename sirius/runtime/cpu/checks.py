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

# An inline check: [p, p + size) inside [lo, lo + lim), else the runtime decides. `range` is
# the lines that define %lo and %lim (any other names they use are theirs).
_CHECK = """define internal void @{name}(ptr %p, i32 %size, i32 %kind, i32 %site) alwaysinline {{
  %a = ptrtoint ptr %p to i64
{range}
  %off = sub i64 %a, %lo
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

# any site: the range its last access was in (an access at a fixed offset of one buffer never
# leaves it)
_SITE_RANGE = """  %s = zext i32 %site to i64
  %i = shl i64 %s, 1
  %lop = getelementptr i64, ptr @__sirius_site_range, i64 %i
  %lo = load i64, ptr %lop, align 8
  %hip = getelementptr i64, ptr %lop, i64 1
  %hi = load i64, ptr %hip, align 8
  %lim = sub i64 %hi, %lo"""

# a static shared array's site: the static arrays' bytes
_STATIC_SHARED = """  %lo = ptrtoint ptr @__sirius_smem to i64
  %lim = add i64 0, {static}"""


def access_check_ir(sites: int, smem_static: int) -> list[str]:
    """The lines of `@__sirius_site_range` (room for `sites` sites), `@__sirius_access` and
    `@__sirius_access_shared` (`smem_static`: the static shared arrays' bytes)."""
    return [f"@__sirius_site_range = global [{2 * max(1, sites)} x i64] zeroinitializer, "
            "align 64",
            *_CHECK.format(name="__sirius_access", range=_SITE_RANGE).splitlines(),
            *_CHECK.format(name="__sirius_access_shared",
                           range=_STATIC_SHARED.format(static=smem_static)).splitlines()]
