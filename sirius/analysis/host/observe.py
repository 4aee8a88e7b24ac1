"""Which host synchronisations the host observes (docs/host-model.md#syncs).

In the host model the host and the GPU exchange data only through copies. A synchronous copy is
complete when it returns, so a sync adds nothing to it; an asynchronous copy is complete only
at a later sync. A sync therefore orders something the host observes exactly when, between it
and the next GPU operation, the host reads or writes the host memory an asynchronous
device-to-host copy fills, or writes the host memory an asynchronous host-to-device copy
reads, where those copies were issued before the sync. Every other sync is idle: fusion may
cross it (sirius/fusion/plan/syncs.py). Timers (clock(), gettimeofday, std::chrono,
cudaEventElapsedTime) touch only their own variables, so they are not observations.

`SyncWatch` follows this during host extraction: the interpreter reports every host memory
access it executes or skips, every asynchronous copy and every op it emits; a sync the host
observes is rewritten in place with the reason (`Sync.observed`).
"""

from __future__ import annotations

from dataclasses import replace

from sirius.analysis.host.model import Op, Sync
from sirius.analysis.host.values import Region
from sirius.diagnostics import Location

ANY = None  # an asynchronous copy whose host memory sirius cannot name: every access counts


def _where(loc: Location | None) -> str:
    return str(loc) if loc is not None else "an unknown line"


class SyncWatch:
    def __init__(self) -> None:
        # host memory of asynchronous copies not yet completed by a sync that stays:
        # region (or ANY) -> (kind H2D | D2H, name, location of the copy)
        self.pending: dict[Region | None, tuple[str, str, Location | None]] = {}
        self.open: list[tuple[list[Op], int]] = []  # syncs not yet followed by a GPU op

    # events of the walk -----------------------------------------------------------------------
    def emitted(self, ops: list[Op], op: Op) -> None:
        """`op` was appended to `ops`: a sync opens, any other op is the next GPU operation."""
        if isinstance(op, Sync):
            self.open.append((ops, len(ops) - 1))
        else:
            self.open.clear()

    def async_copy(self, kind: str, region: Region | None, name: str,
                   loc: Location | None) -> None:
        if region not in self.pending or kind == "D2H":
            self.pending[region] = (kind, name, loc)

    def read(self, region: Region, loc: Location | None) -> None:
        self._touch(region, False, loc)

    def write(self, region: Region, loc: Location | None) -> None:
        self._touch(region, True, loc)

    def unknown(self, write: bool, loc: Location | None, what: str = "memory") -> None:
        """An access through a pointer sirius cannot follow."""
        if self.open and self.pending:
            hit = [(r, v) for r, v in self.pending.items() if write or v[0] == "D2H"]
            if hit:
                kind, name, at = hit[0][1]
                self._observe(f"the host {'writes' if write else 'reads'} {what} sirius cannot "
                              f"follow at {_where(loc)}, which may be '{name}' (copied "
                              f"{'from' if kind == 'D2H' else 'to'} the device asynchronously "
                              f"at {_where(at)})")

    # ------------------------------------------------------------------------------------------
    def _touch(self, region: Region, write: bool, loc: Location | None) -> None:
        if not (self.open and self.pending):
            return
        for key in (region, ANY):
            got = self.pending.get(key)
            if got is None:
                continue
            kind, name, at = got
            if kind == "D2H" or write:
                what = f"'{region.name}'" if key is not ANY else \
                    f"'{region.name}' (an asynchronous copy's host memory is not known)"
                verb = "writes" if write else "reads"
                how = "from" if kind == "D2H" else "to"
                self._observe(f"the host {verb} {what} at {_where(loc)}, copied {how} the "
                              f"device asynchronously at {_where(at)}")
                return

    def _observe(self, why: str) -> None:
        for ops, i in self.open:
            op = ops[i]
            if isinstance(op, Sync) and not op.observed:
                ops[i] = replace(op, observed=why)
        self.open.clear()
        self.pending.clear()  # the sync stays: every copy issued before it is complete
