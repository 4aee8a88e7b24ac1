"""The rewritten device IR's text patterns and warp-record layout that the work-item loops
(wiloop.py) and the lane chains (lanechain.py) both read; here so that wiloop, which imports
lanechain, and lanechain share one definition."""

from __future__ import annotations

import re

# a local name's use (group 1: the name without `%`, quoted names included)
TOK = re.compile(r'%("(?:[^"\\]|\\.)*"|[-\w.$]+)')
# a metadata attachment at a line's end (`, !dbg !12`)
META = re.compile(r", !(?:[\w.]+) !\d+")
# the runtime's warp operation: op, mask, value, b, c, site
WARP = re.compile(r"call i32 @sirius_rt_warp\(ptr @__sirius_ctx, i32 (\S+), i32 (\S+), "
                  r"i32 (\S+), i32 (\S+), i32 (\S+), i32 (\d+)\)")
INT = re.compile(r"-?\d+")
# a kernel with warp operations keeps its pending one in the first bytes of each thread's frame:
# op, mask, val, b, c (written by the continuation when it stops there), site (by the runtime),
# result (written by the runtime, read at the resume point): `wrec` in sirius_rt.c
WARP_RECORD = 32
WARP_RESULT = 24
WARP_STOP = 1 << 31  # or-ed into the returned state at a warp operation
