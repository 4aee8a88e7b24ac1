"""What a program run did, summed over its launches: the CPU executor's exact per-launch counts
(`sirius.runtime.device.LaunchStats`) added up, for original against fused.

    c = Counters.of(run.launches)          # a RunResult's LaunchRecords (or bare LaunchStats)
    c.to_json()   # launches, instructions, global_load_bytes, global_store_bytes,
                  # shared_bytes, barriers, waits
    ratios(original, fused)                # fused / original per counter (None where 0)

`instructions` are dynamic LLVM IR instructions, `shared_bytes` shared memory loaded plus
stored, `barriers` barrier instances reached (per block), `waits` the producer flags a
`counters` megakernel's blocks wait for (0 elsewhere); all as the executor counts them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

__all__ = ["COUNTERS", "Counters", "ratios"]


@dataclass(frozen=True, slots=True)
class Counters:
    launches: int = 0
    instructions: int = 0
    global_load_bytes: int = 0
    global_store_bytes: int = 0
    shared_bytes: int = 0
    barriers: int = 0
    waits: int = 0

    @staticmethod
    def of(launches: Iterable[object]) -> Counters:
        """The sum over launches: LaunchRecords (with `.stats`) or LaunchStats."""
        n = ins = gl = gs = sh = bar = wt = 0
        for rec in launches:
            s = getattr(rec, "stats", rec)
            n += 1
            ins += s.instructions
            gl += s.global_load_bytes
            gs += s.global_store_bytes
            sh += s.shared_load_bytes + s.shared_store_bytes
            bar += s.barriers
            wt += getattr(s, "waits", 0)
        return Counters(n, ins, gl, gs, sh, bar, wt)

    @property
    def global_bytes(self) -> int:
        return self.global_load_bytes + self.global_store_bytes

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


COUNTERS: tuple[str, ...] = tuple(f.name for f in fields(Counters))


def ratios(original: dict[str, int], fused: dict[str, int]) -> dict[str, float | None]:
    """fused / original for every counter (JSON dicts as `Counters.to_json` writes them);
    None where the original's count is 0."""
    return {k: (round(fused[k] / original[k], 4) if original.get(k) else None)
            for k in COUNTERS if k in original and k in fused}
