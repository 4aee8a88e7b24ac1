"""Crossing idle host syncs (docs/fusion.md#host-syncs).

Hand-written programs synchronise after every launch, for timing or out of habit. A sync that
orders nothing the host observes before the next GPU operation (`Sync.observed` is empty: the
host extraction found no access to the host memory of a pending asynchronous copy,
sirius/analysis/host/observe.py) constrains nothing but the host's timing. Within a run of
launches of one host body, such syncs between launches are removed and one sync is kept after
the run's last launch (the sync that ended the run, or the last one crossed), so the host still
waits for all the run's work before it goes on. The planner then sees one run of launches where
the program had several, and fuses across the syncs like across any other neighbours; a sync the
host observes stays where it is and still ends the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sirius.analysis.host.model import HostProgram, Launch, Loop, Op, Sync


@dataclass(frozen=True, slots=True)
class CrossedSync:
    sync: Sync
    before: str  # the kernel launched last before it
    after: str  # the kernel launched first after it
    kept_at: str  # where the fused program synchronises instead

    def to_json(self) -> dict:
        return {"what": self.sync.what, "loc": str(self.sync.loc) if self.sync.loc else None,
                "between": [self.before, self.after], "kept_at": self.kept_at}

    def __str__(self) -> str:
        return (f"{self.sync.what} sync at {self.sync.loc or 'an unknown line'} between "
                f"{self.before} and {self.after}: crossed (the host observes nothing before "
                f"the next launch); the fused program synchronises once at {self.kept_at}")


@dataclass(frozen=True, slots=True)
class KeptSync:
    sync: Sync

    def to_json(self) -> dict:
        return {"what": self.sync.what, "loc": str(self.sync.loc) if self.sync.loc else None,
                "observed": self.sync.observed}

    def __str__(self) -> str:
        return (f"{self.sync.what} sync at {self.sync.loc or 'an unknown line'} kept: "
                f"{self.sync.observed}")


@dataclass(frozen=True)
class SyncCrossing:
    host: HostProgram  # the program with the idle syncs between launches moved
    crossed: tuple[CrossedSync, ...]
    kept: tuple[KeptSync, ...]  # syncs between launches that the host observes

    def to_json(self) -> dict:
        return {"crossed": [c.to_json() for c in self.crossed],
                "kept": [k.to_json() for k in self.kept],
                "note": "timers read between launches (clock(), gettimeofday, std::chrono, "
                        "cudaEventElapsedTime) are not observations"}


def _where(s: Sync) -> str:
    return f"{s.loc}" if s.loc else "the end of the run"


def cross_idle_syncs(host: HostProgram) -> SyncCrossing:
    crossed: list[CrossedSync] = []
    kept: list[KeptSync] = []

    def body(ops: Sequence[Op]) -> tuple[Op, ...]:
        out: list[Op] = []
        i = 0
        while i < len(ops):
            op = ops[i]
            if isinstance(op, Loop):
                out += _loop(replace(op, body=body(op.body)))
                i += 1
                continue
            if not isinstance(op, Launch):
                out.append(op)
                i += 1
                continue
            # a run: launches and idle syncs, starting at a launch
            j = i
            while j < len(ops) and (isinstance(ops[j], Launch) or
                                    (isinstance(ops[j], Sync) and not ops[j].observed)):
                j += 1
            seg = list(ops[i:j])
            last_launch = max(k for k, o in enumerate(seg) if isinstance(o, Launch))
            inner = [k for k, o in enumerate(seg[:last_launch]) if isinstance(o, Sync)]
            if not inner:
                out += seg
            else:
                trailing = [o for o in seg[last_launch + 1:] if isinstance(o, Sync)]
                keep = trailing[-1] if trailing else seg[inner[-1]]
                for k in inner:
                    s = seg[k]
                    if s is keep:
                        continue
                    before = next(o for o in reversed(seg[:k]) if isinstance(o, Launch))
                    after = next(o for o in seg[k:] if isinstance(o, Launch))
                    crossed.append(CrossedSync(s, before.kernel, after.kernel, _where(keep)))
                if not trailing:  # the last crossed sync moves after the run
                    s = keep
                    before = next(o for o in reversed(seg[:inner[-1]]) if isinstance(o, Launch))
                    after = next(o for o in seg[inner[-1]:] if isinstance(o, Launch))
                    crossed.append(CrossedSync(s, before.kernel, after.kernel,
                                               f"after {seg[last_launch].kernel} "
                                               f"({seg[last_launch].loc})"))
                out += [o for o in seg if isinstance(o, Launch)] + (trailing or [keep])
            if j < len(ops) and isinstance(ops[j], Sync) and ops[j].observed and \
                    j + 1 < len(ops) and _next_launch(ops[j + 1:]):
                kept.append(KeptSync(ops[j]))
            i = j
        return tuple(out)

    def _loop(lp: Loop) -> list[Op]:
        """A loop whose body is launches and idle syncs only: the syncs leave the body (they
        order the next iteration's launches after this one's, which the launch order does
        already, and the host observes nothing between), and the last one is kept after the
        loop, so the host still waits for all the loop's work before it goes on."""
        launches = [o for o in lp.body if isinstance(o, Launch)]
        syncs = [o for o in lp.body if isinstance(o, Sync)]
        if not launches or not syncs or len(launches) + len(syncs) != len(lp.body) or \
                any(s.observed for s in syncs) or lp.opaque:
            return [lp]
        where = f"the loop's exit ({lp.var} at {lp.loc or '?'})"
        for s in syncs:
            k = lp.body.index(s)
            before = next((o for o in reversed(lp.body[:k]) if isinstance(o, Launch)),
                          launches[-1])  # (before the first launch: the iteration before's)
            after = next((o for o in lp.body[k:] if isinstance(o, Launch)), launches[0])
            crossed.append(CrossedSync(s, before.kernel, after.kernel, where))
        return [replace(lp, body=tuple(launches)), syncs[-1]]

    new = body(host.ops)
    if not crossed:
        return SyncCrossing(host, (), tuple(kept))
    return SyncCrossing(replace(host, ops=new), tuple(crossed), tuple(kept))


def _next_launch(ops: Sequence[Op]) -> bool:
    """Whether the next GPU operation in `ops` (after syncs) is a launch."""
    for op in ops:
        if not isinstance(op, Sync):
            return isinstance(op, Launch)
    return False
