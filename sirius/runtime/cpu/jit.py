"""JIT-compile rewritten device code for the host, one copy per worker.

The rewritten host module (rewrite.py) is cached on disk by the hash of the device IR it came
from, the rewrite's options and the source of the code that rewrites (`_rewrite_digest`); it is
then parsed, verified, optimized (LLVM's O2 pipeline) and compiled to one object file, cached on
disk by the hash of its text. Both are built under a file lock, so the processes of one `sirius
verify` that run the same module (three fused orders) build it once: the others wait and read
it (a paper-shape fused module takes tens of seconds to rewrite and compile). Every worker then
loads that object into its own MCJIT engine, so each worker has its own `@__sirius_ctx` and
`@__sirius_smem`: the runtime runs workers on different OS threads without any thread-local
storage in JIT code.

Module globals (`__device__`, `__constant__`, ...) live in each engine too. Right after an engine
is made, the initial bytes of its globals are saved; `reset()` writes back those of the mutable
ones and of those the host wrote (`write_global`: cudaMemcpyToSymbol), so every run of a program
starts from the globals' initializers however many runs came before. A host write goes to every
engine, and an engine made later starts with the written bytes: a `__constant__` table is the
same in every worker. (Kernels write only mutable globals, and a module with one runs on one
worker: rewrite.HostModule.device_globals.)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sirius.analysis.irview import ModuleView, build_view
from sirius.diagnostics import SiriusError
from sirius.frontend import llvmctx
from sirius.frontend.cache import cache_dir
from sirius.frontend.toolchain import cache_root
from sirius.runtime.cpu import native, objcompile, ptxlift, split
from sirius.runtime.cpu.rewrite import HostModule, rewrite

_machine = objcompile.machine


@functools.cache
def _target():
    """llvmlite, the target machine whose data layout the rewrite uses, and the host triple.

    An MCJIT engine takes ownership of the target machine it is created with, so every engine
    gets a fresh one (`_machine()`)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm, _machine(), llvm.get_process_triple()


T = TypeVar("T")

# what the rewritten module depends on besides its input: the code that rewrites (paths under
# sirius/), and the runtime library whose symbols it may call
_REWRITE_DEPS = ("runtime/cpu/*.py", "runtime/cpu/sirius_rt.c", "analysis/irview.py",
                 "analysis/irparse.py", "analysis/irlex.py", "analysis/irvalues.py",
                 "analysis/irtypes.py", "analysis/debuginfo.py", "fusion/spec.py", "_version.py")


@functools.cache
def _rewrite_digest() -> str:
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for pattern in _REWRITE_DEPS:
        for path in sorted(root.glob(pattern)):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on the file `path` (created) for the block; no lock where the platform
    has no `fcntl` (then concurrent builders each build, and the last write wins)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not Linux or macOS
        yield
        return
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _cached(path: Path, make: Callable[[], T], dump: Callable[[T], bytes],
            load: Callable[[bytes], T]) -> T:
    """The value stored at `path`, or `make()` stored there. One process builds it while the
    others wait on the lock, then read it; a file that does not load (truncated, an older
    format) is built again."""

    def read() -> tuple[bool, T | None]:
        try:
            return True, load(path.read_bytes())
        except Exception:  # noqa: BLE001 - missing, or damaged: rebuilt, whatever broke
            return False, None

    ok, got = read()
    if ok:
        return got  # type: ignore[return-value]
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_name(path.name + ".lock")):
        ok, got = read()  # built by another process while this one waited
        if ok:
            return got  # type: ignore[return-value]
        value = make()
        tmp = path.with_name(f"{path.name}.{id(value)}.tmp")
        tmp.write_bytes(dump(value))
        tmp.replace(path)
        return value


@dataclass
class Engine:
    """One worker's copy of the module: its context, shared memory and thread functions."""

    engine: object
    objs: tuple[object, ...]  # the loaded object files: they must outlive the engine
    ctx: int
    smem: int
    thread_fns: dict[str, int]
    globals: tuple[int, ...]  # the address of each of HostModule.globals in this engine
    initial: tuple[bytes, ...]  # the initial bytes of each
    site_range: int = 0  # @__sirius_site_range (instrumented modules): [lo, hi) per access site

    def reset(self, which) -> None:
        """The module globals of index in `which` back to their initializers."""
        for i in which:
            ctypes.memmove(self.globals[i], self.initial[i], len(self.initial[i]))


class JitModule:
    """The executor's copy of a device module. `view` is the module's view, or a function that
    builds it, called only when the rewritten module is not cached (`text`, the device IR, is
    then the cache key; building the view of a paper-shape module takes seconds)."""

    def __init__(self, view: ModuleView | Callable[[], ModuleView], instrument: bool = False,
                 source: str = "device code", loops: bool = True, text: str | None = None,
                 speed: int = 2, count_flops: bool = False):
        if speed not in (0, 1, 2):
            raise ValueError(f"speed must be 0, 1 or 2, not {speed}")
        llvm, tm, triple = _target()
        lib = native.library()
        if isinstance(view, ModuleView):
            text, view_of = view.text, (lambda v=view: v)
        elif text is None:
            raise TypeError("JitModule: the device IR text is needed with a view builder")
        else:
            view_of = view

        def make() -> HostModule:
            v = view_of()
            lifted = ptxlift.lift(v.text)  # inline PTX (fp16/bf16 headers) as LLVM IR
            if lifted.lifted:
                v = build_view(llvmctx.parse(lifted.text))
            host = rewrite(v, str(tm.target_data), triple, lambda name: hasattr(lib, name),
                           instrument, loops, count_flops)
            _check_size(len(host.text), source)
            return host

        jit = cache_dir(cache_root(), "jit")
        flops = "flops " if count_flops else ""
        what = (f"{instrument} {loops} {flops}{tm.triple} {tm.target_data} "
                f"{llvm.llvm_version_info} "
                f"{_rewrite_digest()} {Path(getattr(lib, '_name', '') or '').name}\n")
        hkey = hashlib.sha256(what.encode() + text.encode()).hexdigest()[:24]
        self.host: HostModule = _cached(
            jit / f"{hkey}.host", make,
            lambda h: zlib.compress(pickle.dumps(h, pickle.HIGHEST_PROTOCOL), 1),
            lambda b: _host(pickle.loads(zlib.decompress(b))))
        self.instrument = instrument
        self.speed = speed
        key = hashlib.sha256(self.host.text.encode() + llvm.llvm_version_info.__repr__().encode()
                             + tm.triple.encode() + f" O{speed}".encode()).hexdigest()[:24]
        self.objects: tuple[bytes, ...] = _cached(
            jit / f"{key}.o", lambda: self._compile(source), _dump_objects, _load_objects)
        self._engines: list[Engine] = []
        self._written: set[int] = set()  # globals the host wrote since the last reset

    def _compile(self, source: str) -> tuple[bytes, ...]:
        """The module's object files: one, or one per part where it is large enough to be cut
        (split.py) and compiled on several cores."""
        text = self.host.text
        n = jit_parts(len(text))
        try:
            mod = objcompile.parse_verified(text)
            if n > 1:  # cut the text as LLVM prints it
                parts = split.split(str(mod), n)
                if len(parts) > 1:
                    del mod  # each part is parsed where it compiles
                    try:
                        return _compile_parts(parts, self.speed)
                    except (_PartFailed, objcompile.VerifyError) as e:  # a bug in the split
                        print(f"sirius: note: compiling the CPU module of {source} in one "
                              f"piece ({e})", file=sys.stderr)
                        mod = objcompile.parse_verified(text)
            return (objcompile.compile_module(mod, self.speed),)
        except objcompile.VerifyError as e:  # a rewrite the verifier rejects is a bug in sirius
            raise SiriusError(f"internal: the CPU rewrite of {source} does not verify: {e}") \
                from e

    def engines(self, n: int) -> list[Engine]:
        llvm = _target()[0]
        while len(self._engines) < n:
            ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _machine())
            objs = tuple(llvm.ObjectFileRef.from_data(o) for o in self.objects)
            for obj in objs:  # the parts resolve each other's symbols in the engine
                ee.add_object_file(obj)
            ee.finalize_object()
            fns = {k.name: ee.get_function_address(k.thread_fn)
                   for k in self.host.kernels.values()}
            gs = self.host.globals
            table = ee.get_global_value_address("__sirius_globals")
            addrs = tuple((ctypes.c_uint64 * len(gs)).from_address(table)) if gs else ()
            initial = tuple(ctypes.string_at(a, g.bytes) for a, g in zip(addrs, gs, strict=True))
            for i in self._written:  # what the host wrote, as the first engine holds it
                ctypes.memmove(addrs[i], self._engines[0].globals[i], gs[i].bytes)
            self._engines.append(Engine(ee, objs, ee.get_global_value_address("__sirius_ctx"),
                                        ee.get_global_value_address("__sirius_smem"), fns,
                                        addrs, initial,
                                        ee.get_global_value_address("__sirius_site_range")
                                        if self.instrument else 0))
        return self._engines[:n]

    def reset(self) -> None:
        """Every engine's module globals back to their initializers (a new run)."""
        which = sorted(self._written | {i for i, g in enumerate(self.host.globals) if g.mutable})
        for e in self._engines:
            e.reset(which)
        self._written.clear()

    def global_index(self, name: str) -> int:
        """The index in HostModule.globals of the module global of IR name `name`."""
        for i, g in enumerate(self.host.globals):
            if g.name == name:
                return i
        raise SiriusError(f"the device module has no variable '{name}' the CPU executor can "
                          "copy to or from")

    def write_global(self, name: str, offset: int, data: bytes) -> None:
        """Host bytes into module global `name` at byte `offset`, in every engine."""
        i = self._checked(name, offset, len(data), "to")
        for e in self.engines(max(1, len(self._engines))):
            ctypes.memmove(e.globals[i] + offset, data, len(data))
        self._written.add(i)

    def read_global(self, name: str, offset: int, nbytes: int) -> bytes:
        """`nbytes` of module global `name` from byte `offset` (the first engine's: the one a
        module whose kernels write globals runs on)."""
        i = self._checked(name, offset, nbytes, "from")
        return ctypes.string_at(self.engines(1)[0].globals[i] + offset, nbytes)

    def _checked(self, name: str, offset: int, nbytes: int, way: str) -> int:
        i = self.global_index(name)
        g = self.host.globals[i]
        if offset < 0 or nbytes < 0 or offset + nbytes > g.bytes:
            raise SiriusError(f"a copy of {nbytes} bytes at offset {offset} {way} the variable "
                              f"'{g.label}' is out of bounds: it has {g.bytes} bytes")
        return i


# The largest rewritten module the executor compiles, in MB of LLVM IR text. A
# megakernel of paper lstm_large (4090 launches -> 9) came to 566 MB with 25,344 resume points
# (its compile was not tried: the 2 MB fused module of bert_qkv takes 1-5.5 s, without and
# with bounds checks).
MAX_MODULE_MB = 200.0


def _check_size(nbytes: int, source: str) -> None:
    """SiriusError for a rewritten module over the limit ($SIRIUS_JIT_MAX_MB, else
    MAX_MODULE_MB): stopping with the reason rather than compiling for a very long time."""
    try:
        limit = float(os.environ.get("SIRIUS_JIT_MAX_MB", "") or MAX_MODULE_MB)
    except ValueError:
        limit = MAX_MODULE_MB
    mb = nbytes / 1e6
    if mb > limit:
        raise SiriusError(f"the CPU executor's module for {source} is {mb:.0f} MB of LLVM IR "
                          f"after its rewrite, over the {limit:g} MB it compiles: run it at a "
                          "smaller shape, or fuse without --megakernel; SIRIUS_JIT_MAX_MB raises "
                          "the limit")


def _host(obj: object) -> HostModule:
    if not isinstance(obj, HostModule):
        raise TypeError("not a rewritten module")
    return obj


# Module text from which the compile is cut into parts, one per core (at most JIT_MAX_PARTS):
# paper lstm_large's bounds-checked module is 11 MB, bert_qkv's (small shape) 2 MB
SPLIT_MIN_BYTES = 4_000_000
JIT_MAX_PARTS = 4


def count_from_env(name: str, unit: str) -> int | None:
    """The whole number >= 1 in $`name`, None when it is unset or empty; SiriusError naming
    the variable for anything else (`unit`: what it counts, for the message)."""
    env = os.environ.get(name, "").strip()
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        raise SiriusError(f"{name}={env!r}: expected a whole number of {unit}s") from None
    if n < 1:
        raise SiriusError(f"{name}={env!r}: expected at least 1 {unit}")
    return n


def jit_parts(nbytes: int) -> int:
    """How many parts a module of `nbytes` of text is compiled in: $SIRIUS_JIT_PARTS, else one
    per core up to JIT_MAX_PARTS for a module of SPLIT_MIN_BYTES or more, else 1."""
    n = count_from_env("SIRIUS_JIT_PARTS", "part")
    if n is not None:
        return n
    if nbytes < SPLIT_MIN_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, JIT_MAX_PARTS))


class _PartFailed(Exception):
    """A part's compile process failed."""


def _compile_parts(parts: list[str], speed: int) -> tuple[bytes, ...]:
    """Each part's object: parts[1:] in processes of their own (objcompile.py run as a program),
    parts[0] in this one meanwhile."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # the checkout or site-packages holding sirius
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="sirius-jit-") as tmp:
        procs = []
        for k, text in enumerate(parts[1:], 1):
            src, dst = Path(tmp, f"part{k}.ll"), Path(tmp, f"part{k}.o")
            src.write_text(text)
            procs.append((dst, subprocess.Popen(
                [sys.executable, "-m", "sirius.runtime.cpu.objcompile", str(speed), str(src),
                 str(dst)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
        try:
            first = objcompile.compile_text(parts[0], speed)
        finally:
            results = [(dst, p, p.communicate()[1]) for dst, p in procs]
        objs = [first]
        for dst, p, err in results:
            if p.returncode != 0 or not dst.exists():
                tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
                raise _PartFailed(f"a part's compile exited {p.returncode}: {tail[0]}")
            objs.append(dst.read_bytes())
    return tuple(objs)


def _dump_objects(objs: tuple[bytes, ...]) -> bytes:
    return pickle.dumps(tuple(objs), pickle.HIGHEST_PROTOCOL)


def _load_objects(data: bytes) -> tuple[bytes, ...]:
    objs = pickle.loads(data)
    if not (isinstance(objs, tuple) and objs and all(isinstance(o, bytes) for o in objs)):
        raise TypeError("not a tuple of object files")
    return objs
