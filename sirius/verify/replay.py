"""Launch replay between the fused runs: the later orders take the first order's result of a
launch the fusion did not make, when its inputs are the same.

`sirius verify` runs the fused program in three orders (forward, reverse, random) so that a
fused kernel whose members race shows it. Most launches of a large model are not fused (paper
resnext50: 50 of its 53 fused launches), and each of them ran again in every order although
the fusion did nothing to it. Now the fused run in the first order (the *leader*, `Recorder`)
writes a record for every launch of a kernel the fusion did not make; a fused run in a later
order (a *follower*, `Player`) whose launch has the same description takes the record instead
of running the kernel. A launch is replayed when all of this holds:

  * its kernel is one the original program has (same name) and keeps the original's
    synchronisation (the same barriers and warp operations: a post-fusion pass may have
    rewritten its arithmetic, never its cooperation); fused kernels (`sirius_v*`, `sirius_h*`,
    megakernels) always run;
  * the kernel's result depends on nothing but its arguments and the memory they point into:
    no atomics, inline assembly, pointers loaded from memory, integer-pointer casts, clock or
    SM registers, external calls (libdevice aside), and no module variable except shared
    memory and constants (`replay_kernels` says why a kernel is not replayed);
  * the launch is the same: grid, block, dynamic shared memory, scalar arguments, bounds
    checks, and for each pointer argument the size of its allocation, the offset into it,
    which other arguments share the allocation, and the sha256 of the allocation's contents.

The leader's record of a launch holds its counters and the final contents of every allocation
it changed; a follower reaching a candidate launch waits until the leader has passed that launch
(or ended), then replays the record if its key matches and runs the kernel itself otherwise.

What a replayed launch does not do is run once more under the follower's block and thread
order. A race inside a kernel the fusion did not make is the original program's, not the
fusion's (`sirius run --order reverse` shows it on the original); every fused kernel, and every
launch whose inputs a fused kernel made different, still runs in every order. `--no-replay`
runs every launch in every order (docs/verify.md).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from sirius.analysis.moduletext import ModuleText
from sirius.runtime.cpu.entries import split_top

__all__ = ["Player", "Recorder", "ReplaySetup", "replay_kernels"]

_REFUSE = (
    (re.compile(r"\b(?:atomicrmw|cmpxchg)\b"), "atomics (their result depends on the order)"),
    (re.compile(r"\basm\b"), "inline assembly"),
    (re.compile(r"\b(?:ptrtoint|inttoptr)\b"), "integer-pointer casts"),
    (re.compile(r"= load (?:atomic )?(?:volatile )?ptr\b"), "a pointer loaded from memory"),
    (re.compile(r"@llvm\.nvvm\.read\.ptx\.sreg\.(?!(?:tid|ntid|ctaid|nctaid|laneid|warpsize)"
                r"\b)[\w.]+"), "a clock or SM register"),
)
_SHARED_OR_CONSTANT = re.compile(r"\baddrspace\(3\)|\bconstant\b")
_READONLY = re.compile(r"\b(?:readonly|readnone)\b")
# calls that synchronise threads: barriers, warp operations, fences
_SYNC = re.compile(r"@llvm\.nvvm\.(?:barrier|bar\.|shfl|vote|match|activemask|membar|fence)"
                   r"[\w.]*\(")


def replay_kernels(original_ir: str, fused_ir: str) -> tuple[frozenset[str], dict[str, str]]:
    """The kernels of the fused module whose launches a follower may replay, and for the
    others that the original has too, why not."""
    before, now = ModuleText.of(original_ir), ModuleText.of(fused_ir)
    ok: set[str] = set()
    why: dict[str, str] = {}
    for k in now.kernels:
        if k not in before.kernels:
            continue  # made by the fusion: runs in every order
        if _syncs(now, k) != _syncs(before, k):
            why[k] = "its barriers or warp operations are not the original's"
            continue
        reason = _refusal(now, k)
        if reason is None:
            ok.add(k)
        else:
            why[k] = reason
    return frozenset(ok), why


def _syncs(mt: ModuleText, kernel: str) -> list[str]:
    return sorted(_SYNC.findall(mt.canonical(kernel)))


def _refusal(mt: ModuleText, kernel: str) -> str | None:
    text = mt.canonical(kernel)
    for pattern, what in _REFUSE:
        if pattern.search(text):
            return what
    for g in mt.closure(kernel)[1:]:
        if g in mt.globals:
            if not (mt.internal(g) and _SHARED_OR_CONSTANT.search(mt.globals[g])):
                return f"it uses the module variable @{g}"
        elif g not in mt.defines and not g.startswith(("llvm.", "__nv_")):
            return f"it calls @{g}"
    return None


def writable_params(ir: str) -> dict[str, tuple[bool, ...]]:
    """Kernel -> for each parameter, whether the kernel may write through it (a pointer not
    marked `readonly`/`readnone`; other parameters are False)."""
    mt = ModuleText.of(ir)
    out = {}
    for k in mt.kernels:
        body = mt.definition(k) or ""
        head = body.split("\n", 1)[0]
        start = head.index("@" + k) + len(k) + 1
        depth, end = 0, start
        for end in range(start, len(head)):
            depth += {"(": 1, ")": -1}.get(head[end], 0)
            if depth == 0:
                break
        params = [p.strip() for p in split_top(head[start + 1:end]) if p.strip()]
        out[k] = tuple(p.startswith("ptr") and not _READONLY.search(p) for p in params)
    return out


@dataclass(frozen=True)
class ReplaySetup:
    """What the fused runs of one verification share: the records' directory, and the fused
    module's kernels whose launches may be replayed."""

    directory: str
    kernels: frozenset[str] = frozenset()
    # the followers replay most launches (they mostly wait): the leader's forward order may
    # spread its blocks over every core instead of its share
    leader_cores: bool = False

    @staticmethod
    def new(kernels: frozenset[str], leader_cores: bool = False) -> ReplaySetup:
        """A new directory, marked as having a leader to come (this process's id until the
        leader's own replaces it): a follower that starts first waits for its records."""
        d = tempfile.mkdtemp(prefix="sirius-replay-")
        with open(os.path.join(d, "leader"), "w") as f:
            f.write(str(os.getpid()))
        return ReplaySetup(d, kernels, leader_cores)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class _Hashes:
    """The sha256 of each device buffer's contents, kept until the buffer may have changed."""

    def __init__(self, setup: ReplaySetup, ir: str, check_bounds: bool):
        self.dir = setup.directory
        self.kernels = setup.kernels
        self.writes = writable_params(ir)
        self.digests: dict[str, bytes] = {}
        self.check_bounds = check_bounds
        self.index = -1  # of the launch in this run

    def host_wrote(self, name: str) -> None:
        self.digests.pop(name, None)

    def digest(self, name: str, view: np.ndarray) -> bytes:
        d = self.digests.get(name)
        if d is None:
            d = self.digests[name] = hashlib.sha256(view).digest()
        return d

    def key(self, kernel: str, grid, block, smem: int, args: list[tuple]) -> str:
        """The launch's description, hashed (see the module's docstring)."""
        h = hashlib.sha256(repr((kernel, tuple(grid), tuple(block), smem,
                                 self.check_bounds)).encode())
        first: dict[str, int] = {}
        for i, a in enumerate(args):
            if a[0] == "buffer":
                _, name, off, view = a
                alias = first.setdefault(name, i)
                h.update(repr(("buffer", view.size, off, alias)).encode())
                h.update(self.digest(name, view))
            else:
                h.update(repr(("value", a[1])).encode())
        return h.hexdigest()

    def _forget_writes(self, kernel: str, args: list[tuple]) -> None:
        for name in _buffers(args, self.writes.get(kernel, ())):
            self.digests.pop(name, None)


def _buffers(args: list[tuple], writes: tuple[bool, ...]) -> dict[str, tuple[int, np.ndarray]]:
    """Each buffer the launch may write: name -> (its first argument's index, its view)."""
    out: dict[str, tuple[int, np.ndarray]] = {}
    for i, a in enumerate(args):
        if a[0] == "buffer" and (i >= len(writes) or writes[i]):
            out.setdefault(a[1], (i, a[3]))
    return out


class Recorder(_Hashes):
    """The leader: a record of every candidate launch, and a mark of every launch it passed."""

    def __init__(self, setup: ReplaySetup, ir: str, check_bounds: bool):
        super().__init__(setup, ir, check_bounds)
        with open(os.path.join(self.dir, "leader"), "w") as f:
            f.write(str(os.getpid()))

    def launch(self, kernel: str, grid, block, smem: int, args: list[tuple],
               run: Callable[[], object]) -> object:
        self.index += 1
        if kernel not in self.kernels:
            stats = run()
            self._forget_writes(kernel, args)
        else:
            key = self.key(kernel, grid, block, smem, args)
            stats = run()
            post = {}
            for name, (i, view) in _buffers(args, self.writes.get(kernel, ())).items():
                before = self.digests.pop(name, None)
                after = self.digest(name, view)
                if after != before:
                    post[i] = (after, view.tobytes())
            tmp = os.path.join(self.dir, key + ".tmp")
            with open(tmp, "wb") as f:
                pickle.dump((stats, post), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, os.path.join(self.dir, key))
        # passed: a follower at this launch looks for its record now
        open(os.path.join(self.dir, f"at.{self.index}"), "w").close()
        return stats

    def finish(self) -> None:
        """The leader has ended (or failed): no more records will come."""
        with open(os.path.join(self.dir, "done"), "w") as f:
            f.write("done")


class Player(_Hashes):
    """A follower: candidate launches replayed from the leader's records."""

    POLL = 0.01  # seconds between looks for the leader's mark of a launch

    def __init__(self, setup: ReplaySetup, ir: str, check_bounds: bool):
        super().__init__(setup, ir, check_bounds)
        self.replayed = 0

    def launch(self, kernel: str, grid, block, smem: int, args: list[tuple],
               run: Callable[[], object]) -> object:
        self.index += 1
        if kernel in self.kernels:
            t0 = time.perf_counter()
            key = self.key(kernel, grid, block, smem, args)
            rec = self._record(key)
            if rec is not None:
                stats, post = rec
                for i, (digest, data) in post.items():
                    view = args[i][3]
                    view[:] = np.frombuffer(data, dtype=np.uint8)
                    self.digests[args[i][1]] = digest
                self.replayed += 1
                return replace(stats, seconds=time.perf_counter() - t0, replayed=True)
        stats = run()
        self._forget_writes(kernel, args)
        return stats

    def _record(self, key: str):
        """The leader's record under `key`, once the leader has passed this launch; None when
        it has none (other inputs) or has stopped before it."""
        mark = os.path.join(self.dir, f"at.{self.index}")
        while not os.path.exists(mark) and self._leader_running():
            time.sleep(self.POLL)
        try:
            with open(os.path.join(self.dir, key), "rb") as f:
                return pickle.load(f)
        except FileNotFoundError:
            return None

    def _leader_running(self) -> bool:
        if os.path.exists(os.path.join(self.dir, "done")):
            return False
        try:
            with open(os.path.join(self.dir, "leader")) as f:
                pid = int(f.read())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return False
        return True
