"""What differential verification compares: the buffers the original program's user observes,
each with the reason it is compared, and how a fused run's buffers are read back as the
original's (docs/verify.md#which-buffers-are-compared).

```python
plan = observe(original.host, fused.host, storage)   # storage: a StorageSplit, or None
for c in plan.compared: c.buffer, c.why, c.versions
plan.skipped            # (buffer, why) of buffers not compared
got = as_original(c, run, want)   # the fused run's bytes of c.buffer, as the original's
```

A buffer that storage splitting cut into versions (`B`, `B.v1`, ...) is read back through its
versions: the original's `B` ends holding, at each byte, what the last launch that wrote it
wrote; in the fused program that value sits in the last version whose launches wrote the byte.
Which bytes a version's launches wrote is read off the run: an element of `B.vK` that differs
from its initial (seeded) contents was written. An element that still equals its initial
contents was either not written or rewritten with the same value (likely only for small
integers); both readings are accepted there, and the count of such elements is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sirius.analysis.host.model import Copy, HostProgram, dev_refs, flat_ops

__all__ = ["Compared", "Observation", "as_original", "observe", "observed"]


@dataclass(frozen=True, slots=True)
class Compared:
    """A compared buffer of the original: `why` it is observable, and `versions`: the fused
    program's buffers that hold its final bytes, as (name, byte of the original that byte 0
    stands for, bytes), version 0 first; `()` when it is not split."""

    buffer: str
    why: str
    versions: tuple[tuple[str, int, int], ...] = ()

    def to_json(self) -> dict:
        out: dict = {"buffer": self.buffer, "why": self.why}
        if self.versions:
            out["through"] = [{"buffer": n, "base": b, "bytes": s} for n, b, s in self.versions]
        return out


@dataclass(frozen=True, slots=True)
class Observation:
    compared: tuple[Compared, ...]
    rule: str  # "outputs (...)" or "every buffer the original holds (...)"
    skipped: tuple[tuple[str, str], ...] = ()  # (buffer, why it is not compared)

    @property
    def names(self) -> list[str]:
        return [c.buffer for c in self.compared]




def _outputs(host: HostProgram) -> dict[str, str]:
    """Buffer -> why, for role-output buffers and sources of device-to-host copies."""
    why = {b.name: "role output" for b in host.buffers if b.role == "output"}
    for op in flat_ops(host.ops):
        if isinstance(op, Copy) and op.kind == "D2H":
            at = f" at {op.loc}" if op.loc else ""
            for r in dev_refs(op.src):
                why.setdefault(r.buffer, f"copied device-to-host{at}")
    return why


def observed(host: HostProgram) -> tuple[list[str], str]:
    """(device buffers, rule) that verification compares, by their final contents: buffers with
    role output plus every source of a device-to-host copy (both choices of a rotating one);
    when the program has none, every buffer."""
    why = _outputs(host)
    if not why:
        return [b.name for b in host.buffers], "all buffers (the program copies none back)"
    return list(why), "outputs (role output or copied device-to-host)"


def observe(original: HostProgram, fused: HostProgram | None = None,
            storage=None) -> Observation:
    """The buffers of `original` to compare and why. `fused` (the fused host program) and
    `storage` (the StorageSplit that produced it, or None) say where each lives in the fused
    program. With outputs, those are compared (a missing one is then a mismatch). With none
    (nothing copied back), every buffer the original holds is compared, except one the fused
    program no longer has in any version: nothing observes it (skipped, with the reason)."""
    splits = {s.buffer: s for s in getattr(storage, "splits", ())}
    have = None if fused is None else {b.name for b in fused.buffers}
    why = _outputs(original)
    rule = "outputs (role output or copied device-to-host)"
    skipped: list[tuple[str, str]] = []
    if not why:
        rule = "every buffer the original holds (the program copies none back)"
        for b in original.buffers:
            names = splits[b.name].names if b.name in splits else (b.name,)
            if have is not None and not any(n in have for n in names):
                skipped.append((b.name, "not in the fused program (a temporary fusion removed;"
                                        " nothing copies it back)"))
            else:
                why[b.name] = "held by the original at the end (nothing is copied back)"
    out = []
    for name, reason in why.items():
        s = splits.get(name)
        if s is None or len(s.versions) < 2:
            out.append(Compared(name, reason))
            continue
        versions = tuple((v.buffer, v.base, v.size) for v in s.versions)
        out.append(Compared(name, f"{reason}; storage splitting cut it into "
                            f"{len(versions)} versions: compared through them, the last "
                            "version that wrote a byte holding it", versions))
    return Observation(tuple(out), rule, tuple(skipped))


def as_original(c: Compared, final: dict[str, np.ndarray], initial: dict[str, np.ndarray],
                want: np.ndarray) -> tuple[np.ndarray | None, int]:
    """The fused run's final contents of `c.buffer` as the original's buffer would hold them
    (`final` / `initial`: the fused run's arrays by buffer name), typed like `want` (the
    original's), and the count of elements where a version still held its initial contents
    and the original's value was taken from it (see the module docstring). None when the
    fused run lacks version 0."""
    if not c.versions:
        have = final.get(c.buffer)
        return have, 0
    base0 = final.get(c.versions[0][0])
    if base0 is None:
        return None, 0
    img = _bytes(base0).copy()
    ref = _bytes(want)
    n = img.size
    item = want.dtype.itemsize if n % want.dtype.itemsize == 0 else 1
    alts: list[tuple[int, int, np.ndarray, np.ndarray]] = []  # (lo, hi, mask, values) by element
    for name, base, size in c.versions[1:]:
        vf = final.get(name)
        if vf is None:
            return None, 0
        hi = min(n, base + size)
        if base >= hi:
            continue
        vals = _bytes(vf)[:hi - base]
        vi = initial.get(name)
        init = _bytes(vi)[:hi - base] if vi is not None else None
        e_lo, e_hi = base // item, -(-hi // item)
        vals_e = _elements(vals, base, e_lo, e_hi, item, img)
        if init is None:
            changed = np.ones(e_hi - e_lo, dtype=bool)
        else:
            init_e = _elements(init, base, e_lo, e_hi, item, img)
            changed = (vals_e != init_e).any(axis=1)
        view = img[e_lo * item:e_hi * item].reshape(-1, item)
        view[changed] = vals_e[changed]
        for k, (lo, ahi, mask, _) in enumerate(alts):  # a later write settles earlier doubts
            s, t = max(lo, e_lo), min(ahi, e_hi)
            if s < t:
                mask[s - lo:t - lo] &= ~changed[s - e_lo:t - e_lo]
                alts[k] = (lo, ahi, mask, alts[k][3])
        alts.append((e_lo, e_hi, ~changed, vals_e))
    taken = 0
    ref_e = ref[:n - n % item].reshape(-1, item)
    for lo, hi, mask, vals_e in alts:
        hi = min(hi, ref_e.shape[0])
        mask = mask[:hi - lo]
        agree = mask & (ref_e[lo:hi] == vals_e[:hi - lo]).all(axis=1) \
            & ~(img[lo * item:hi * item].reshape(-1, item) == ref_e[lo:hi]).all(axis=1)
        if agree.any():
            img[lo * item:hi * item].reshape(-1, item)[agree] = vals_e[:hi - lo][agree]
            taken += int(agree.sum())
    if img.size != want.nbytes:  # sizes differ: compare() says so
        return img, taken
    return img.view(want.dtype).reshape(want.shape), taken


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _elements(part: np.ndarray, base: int, e_lo: int, e_hi: int, item: int,
              img: np.ndarray) -> np.ndarray:
    """`part` (bytes of the original from `base` on) as whole elements e_lo..e_hi; bytes of a
    partly covered element outside `part` are taken from `img`."""
    full = img[e_lo * item:e_hi * item].copy()
    off = base - e_lo * item
    full[off:off + part.size] = part
    return full.reshape(-1, item)
