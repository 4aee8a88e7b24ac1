"""Run a HostProgram on a Device: the host side of every execution sirius does.

Inputs. Every device buffer is filled at allocation from a seeded RNG (so a buffer a kernel reads
before anything wrote it holds data, as uninitialized GPU memory would, but reproducibly), and
every host array is filled from the same RNG the first time it is read. The RNG of a buffer or
host array is seeded by (seed, its name): the same name gets the same data whatever else the
program does, which is what lets an original and a fused program run on the same inputs.
Floating-point data is uniform in [-1, 1); integer data uniform in [0, 128). `inputs` (by
device-buffer name) replaces the data a buffer receives: from its allocation and from any
host-to-device copy into it.

Results. `initial[name]` is a buffer's contents as the first launch that receives it saw them
(or at its free, for a buffer no launch receives); `final[name]` its contents at its free or at
the end. Arrays are typed by the kernel parameter the buffer is first passed as.

Device variables. A copy whose device side is `@name` (cudaMemcpyToSymbol / FromSymbol: a
`HostProgram.symbols` entry) goes to the module's variable through the device
(`copy_to_symbol`, `copy_from_symbol`), checked against the variable's size first: bytes
outside it are an error naming the variable and the copy's line. `final["@name"]` holds each
such variable's contents at the end, typed by its element type.

Loops run as the host model says; an opaque loop (trip count data-dependent, e.g. "until
converged") runs `opaque_trips` times, a documented approximation (docs/runtime.md).
"""

from __future__ import annotations

import hashlib
import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sirius.analysis.host.model import (
    Alloc,
    BufferArg,
    Copy,
    DevRef,
    Free,
    HostProgram,
    HostRef,
    Launch,
    Loop,
    Memset,
    NullArg,
    Rotating,
    ScalarArg,
    Sync,
    dev_refs,
    flat_ops,
)
from sirius.diagnostics import SiriusError
from sirius.runtime.device import Device, LaunchStats

_C_DTYPES = {
    "float": np.float32, "double": np.float64, "half": np.float16, "__half": np.float16,
    "int": np.int32, "signed int": np.int32, "unsigned int": np.uint32, "unsigned": np.uint32,
    "long": np.int64, "long long": np.int64, "unsigned long": np.uint64,
    "unsigned long long": np.uint64, "int64_t": np.int64, "uint64_t": np.uint64,
    "int32_t": np.int32, "uint32_t": np.uint32, "short": np.int16, "unsigned short": np.uint16,
    "char": np.int8, "signed char": np.int8, "unsigned char": np.uint8, "int8_t": np.int8,
    "uint8_t": np.uint8, "bool": np.uint8, "size_t": np.uint64,
}


_IR_DTYPES = {"float": np.float32, "double": np.float64, "half": np.float16, "bfloat": np.uint16,
              "i1": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
              "ptr": np.uint64}


def dtype_of(c_type: str) -> np.dtype:
    """numpy dtype of the pointee of a C pointer type such as `const float *`."""
    t = re.sub(r"\b(const|volatile|__restrict__|restrict|struct)\b", "", c_type)
    t = " ".join(t.replace("*", " ").split())
    return np.dtype(_C_DTYPES.get(t, np.uint8))


def _fill(rng: np.random.Generator, dtype: np.dtype, nbytes: int) -> np.ndarray:
    n = nbytes // dtype.itemsize
    if dtype.kind == "f":
        vals = (rng.random(n) * 2 - 1).astype(dtype)
    else:
        vals = rng.integers(0, 128, size=n).astype(dtype)
    out = np.zeros(nbytes, dtype=np.uint8)
    out[:n * dtype.itemsize] = vals.view(np.uint8)
    return out


def _rng(seed: int, name: str, salt: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode()), salt])


@dataclass
class LaunchRecord:
    index: int          # position in the dynamic launch sequence
    launch_index: int   # the static Launch op, as numbered by HostProgram.launches()
    env: dict[str, int]
    stats: LaunchStats


@dataclass
class LaunchTrace:
    """Every access one dynamic launch made (see sirius.analysis.uar.soundness for the consumer)."""

    launch_index: int
    env: dict[str, int]
    records: np.ndarray  # bx by bz tx ty tz space buffer offset size kind (TRACE_FIELDS)
    # For space 1 (shared), `buffer` indexes this tuple: the module's static __shared__ arrays
    # by IR name in declaration order, then "extern" for the dynamic area; offsets are relative
    # to the array.
    shared: tuple[str, ...] = ()
    # For space 2 (a module global: __device__, __constant__), `buffer` indexes this tuple of
    # IR names; offsets are relative to the global.
    globals: tuple[str, ...] = ()


TRACE_FIELDS = np.dtype([("bx", "<i4"), ("by", "<i4"), ("bz", "<i4"), ("tx", "<i4"),
                         ("ty", "<i4"), ("tz", "<i4"), ("space", "u1"), ("buffer", "<i4"),
                         ("offset", "<i8"), ("size", "<i4"), ("kind", "u1")])


@dataclass
class RunResult:
    program: HostProgram
    device: str
    seed: int
    order: str
    dtypes: dict[str, np.dtype]
    initial: dict[str, np.ndarray]
    final: dict[str, np.ndarray]
    host: dict[str, np.ndarray]
    launches: list[LaunchRecord]
    seconds: float
    notes: list[str] = field(default_factory=list)
    traces: list[LaunchTrace] = field(default_factory=list)

    def outputs(self) -> list[str]:
        """Buffers of role output, then the device variables a device-to-host copy reads
        (`@name`): what `sirius verify` compares."""
        read = {r.buffer for op in flat_ops(self.program.ops)
                if isinstance(op, Copy) and op.kind == "D2H" for r in dev_refs(op.src)}
        return [b.name for b in self.program.buffers if b.role == "output"] + \
            [s.name for s in self.program.symbols if s.name in read and s.name in self.final]

    def checksum(self, name: str) -> str:
        return hashlib.sha256(self.final[name].tobytes()).hexdigest()[:12]

    def save(self, path: Path) -> None:
        arrays = {}
        for name, a in self.initial.items():
            arrays[f"{name}.in"] = a
        for name, a in self.final.items():
            arrays[f"{name}.out"] = a
        np.savez_compressed(path, **arrays)


def buffer_dtypes(program: HostProgram, kernels: dict[str, object]) -> dict[str, np.dtype]:
    """The dtype of each buffer of `program`: that of the kernel parameter it is first passed
    as (`kernels`: mangled name -> KernelInfo); bytes for a buffer no parameter types. A run's
    `RunResult.dtypes` unless `dtypes=` overrides them."""
    out: dict[str, np.dtype] = {}
    for launch in program.launches():
        info = kernels.get(launch.mangled)
        for i, a in enumerate(launch.args):
            if isinstance(a, BufferArg) and info is not None and i < len(info.params):
                refs = a.address.choices if isinstance(a.address, Rotating) else (a.address,)
                for r in refs:
                    out.setdefault(r.buffer, dtype_of(info.params[i].type))
    for b in program.buffers:
        out.setdefault(b.name, np.dtype(np.uint8))
    for s in program.symbols:
        out.setdefault(s.name, np.dtype(_IR_DTYPES.get(s.elem, np.uint8)))
    return out


class HostInterpreter:
    def __init__(self, program: HostProgram, kernels: dict[str, object], device: Device,
                 module, seed: int = 0, inputs: dict[str, np.ndarray] | None = None,
                 opaque_trips: int = 3,
                 progress: Callable[[int, int], None] | None = None,
                 dtypes: dict[str, np.dtype] | None = None, replay=None):
        self.p = program
        # launch replay (sirius/verify/replay.py): `replay.launch(kernel, grid, block, smem,
        # args, run)` runs or replays each launch, `replay.host_wrote(buffer)` hears of host writes
        self.replay = replay
        self.kernels = kernels  # mangled name -> KernelInfo
        self.dev = device
        self.module = module
        self.seed = seed
        self.inputs = {k: np.ascontiguousarray(v) for k, v in (inputs or {}).items()}
        self.opaque_trips = opaque_trips
        self.progress = progress
        self.addr: dict[str, int] = {}
        self.symbols = {s.name: s for s in program.symbols}  # `@name` -> device variable
        self.sizes = {b.name: b.bytes for b in program.buffers}
        self.ids = {b.name: b.id for b in program.buffers}
        # A fused program passes the original's dtypes, so both get the same RNG data.
        self.dtypes = {**self._dtypes(), **(dtypes or {})}
        self.initial: dict[str, np.ndarray] = {}
        self.final: dict[str, np.ndarray] = {}
        self.host: dict[str, np.ndarray] = {}
        self.launches: list[LaunchRecord] = []
        self.traces: list[LaunchTrace] = []
        self.notes: list[str] = []
        self.total = self._count(program.ops, {})
        self._static = {id(x): i for i, x in enumerate(program.launches())}
        unknown = set(self.inputs) - set(self.sizes)
        if unknown:
            raise SiriusError(f"inputs name buffers the program does not have: "
                              f"{', '.join(sorted(unknown))} (buffers: {', '.join(self.sizes)})")

    # set-up ------------------------------------------------------------------------------------
    def _dtypes(self) -> dict[str, np.dtype]:
        return buffer_dtypes(self.p, self.kernels)

    def _count(self, ops, env) -> int:
        n = 0
        for op in ops:
            if isinstance(op, Launch):
                n += 1
            elif isinstance(op, Loop):
                for v in self._iterations(op, env):
                    n += self._count(op.body, {**env, op.var: v})
        return n

    def _iterations(self, loop: Loop, env: dict[str, int]) -> list[int]:
        if loop.opaque:
            return list(range(self.opaque_trips))
        v, hi = loop.lo.evaluate(env), loop.hi.evaluate(env)
        out = []
        while (v < hi) if loop.step > 0 else (v > hi):
            out.append(v)
            v += loop.step
        return out

    def _typed(self, name: str, raw: np.ndarray) -> np.ndarray:
        dt = self.dtypes[name]
        n = raw.size // dt.itemsize * dt.itemsize
        return raw[:n].view(dt).copy()

    def _resolve(self, ref, env) -> tuple[str, int]:
        r = ref.at(env) if isinstance(ref, Rotating) else ref
        if not isinstance(r, DevRef):
            raise SiriusError(f"unexpected address {ref!r}")
        return r.buffer, r.offset.evaluate(env)

    def _host_array(self, name: str, nbytes: int, dtype: np.dtype) -> np.ndarray:
        arr = self.host.get(name)
        if arr is None or arr.size < nbytes:
            have = 0 if arr is None else arr.size
            grown = np.zeros(nbytes, dtype=np.uint8)
            if arr is not None:
                grown[:have] = arr
            grown[have:] = _fill(_rng(self.seed, "host:" + name, have), dtype, nbytes - have)
            self.host[name] = arr = grown
        return arr

    # execution -----------------------------------------------------------------------------------
    def run(self) -> None:
        self._run(self.p.ops, {})
        for name in list(self.addr):
            self._retire(name)
        for name, sym in self.symbols.items():
            raw = self.dev.copy_from_symbol(self.module, name[1:], 0, sym.bytes)
            self.final[name] = self._typed(name, raw)

    def _retire(self, name: str) -> None:
        raw = self.dev.copy_from_device(self.addr[name], self.sizes[name])
        self.final[name] = self._typed(name, raw)
        self.initial.setdefault(name, self.final[name])

    def _run(self, ops, env: dict[str, int]) -> None:
        for op in ops:
            if isinstance(op, Loop):
                trips = self._iterations(op, env)
                for v in trips:
                    self._run(op.body, {**env, op.var: v})
                if op.opaque:
                    env[f"{op.var}_last"] = len(trips) - 1
                    self.notes.append(f"opaque loop at {op.loc} ran {len(trips)} times "
                                      "(--opaque-trips)")
            elif isinstance(op, Alloc):
                self._alloc(op)
            elif isinstance(op, Free):
                name, _ = self._resolve(op.address, env)
                self._retire(name)
                self.dev.free(self.addr.pop(name))
            elif isinstance(op, Copy):
                self._copy(op, env)
            elif isinstance(op, Memset):
                name, off = self._resolve(op.dst, env)
                self.dev.memset(self.addr[name] + off, op.value, op.bytes.evaluate(env))
                self._wrote(name)
            elif isinstance(op, Launch):
                self._launch(op, env)
            elif isinstance(op, Sync):
                self.dev.synchronize()

    def _alloc(self, op: Alloc) -> None:
        name = op.buffer
        addr = self.dev.alloc(op.bytes, name)
        self.addr[name] = addr
        data = self.inputs.get(name)
        if data is not None:
            raw = data.view(np.uint8).reshape(-1)
            if raw.size != op.bytes:
                raise SiriusError(f"input {name} has {raw.size} bytes; the buffer has {op.bytes}")
        else:
            raw = _fill(_rng(self.seed, name), self.dtypes[name], op.bytes)
        self.dev.copy_to_device(addr, raw)
        self._wrote(name)

    def _wrote(self, name: str) -> None:
        if self.replay is not None:
            self.replay.host_wrote(name)

    def _copy(self, op: Copy, env) -> None:
        n = op.bytes.evaluate(env)
        if op.kind == "H2D":
            name, off = self._resolve(op.dst, env)
            data = self.inputs.get(name)
            if data is not None:
                src = data.view(np.uint8).reshape(-1)[off:off + n]
                if src.size != n:
                    raise SiriusError(f"input {name} is too small for a copy of {n} bytes at "
                                      f"offset {off}", op.loc)
            else:
                assert isinstance(op.src, HostRef)
                src = self._host_array(op.src.name, n, self.dtypes[name])[:n]
            if op.pointers:  # device addresses the host wrote: this run's, not random bytes
                src = self._with_addresses(src, op, env)
            self._write(name, off, src, op)
        elif op.kind == "D2H":
            name, off = self._resolve(op.src, env)
            assert isinstance(op.dst, HostRef)
            host = self._host_array(op.dst.name, n, self.dtypes[name])
            host[:n] = self._read(name, off, n, op)
        else:
            dname, doff = self._resolve(op.dst, env)
            sname, soff = self._resolve(op.src, env)
            if dname in self.symbols or sname in self.symbols:
                self._write(dname, doff, self._read(sname, soff, n, op), op)
            else:
                self.dev.copy_device(self.addr[dname] + doff, self.addr[sname] + soff, n)
                self._wrote(dname)

    def _write(self, name: str, off: int, data: np.ndarray, op: Copy) -> None:
        """Bytes into device buffer `name`, or into device variable `name` (`@coef`)."""
        if name in self.symbols:
            self._check_symbol(name, off, data.size, op, "to")
            self.dev.copy_to_symbol(self.module, name[1:], off, data)
        else:
            self.dev.copy_to_device(self.addr[name] + off, data)
            self._wrote(name)

    def _read(self, name: str, off: int, n: int, op: Copy) -> np.ndarray:
        if name in self.symbols:
            self._check_symbol(name, off, n, op, "from")
            return self.dev.copy_from_symbol(self.module, name[1:], off, n)
        return self.dev.copy_from_device(self.addr[name] + off, n)

    def _check_symbol(self, name: str, off: int, n: int, op: Copy, way: str) -> None:
        sym = self.symbols[name]
        if off < 0 or n < 0 or off + n > sym.bytes:
            raise SiriusError(
                f"a copy of {n} bytes at offset {off} {way} the {sym.space} variable "
                f"'{sym.variable}' is out of bounds: it has {sym.bytes} bytes", op.loc,
                (f"bytes [{off}, {off + n}) are outside [0, {sym.bytes}); CUDA returns "
                 "cudaErrorInvalidValue and copies nothing",))

    def _with_addresses(self, src: np.ndarray, op: Copy, env) -> np.ndarray:
        """The bytes of a host-to-device copy with the device addresses the host model says the
        host wrote there (Copy.pointers) replaced by the addresses of this run's buffers."""
        out = np.array(src, dtype=np.uint8, copy=True)
        for rel, ref in op.pointers:
            if rel + 8 > out.size:
                continue
            target, toff = self._resolve(ref, env)
            if target not in self.addr:
                raise SiriusError(f"this copy sends the address of buffer {target}, which is "
                                  "not allocated at this point", op.loc)
            out[rel:rel + 8] = np.frombuffer(
                np.uint64(self.addr[target] + toff).tobytes(), dtype=np.uint8)
        return out

    def _launch(self, op: Launch, env) -> None:
        args = []
        # for launch replay (sirius/verify/replay.py): each argument as the replay hashes it
        desc: list[tuple] | None = [] if self.replay is not None else None
        for a in op.args:
            if isinstance(a, BufferArg):
                name, off = self._resolve(a.address, env)
                if name not in self.initial:
                    raw = self.dev.copy_from_device(self.addr[name], self.sizes[name])
                    self.initial[name] = self._typed(name, raw)
                args.append(self.addr[name] + off)
                if desc is not None:
                    desc.append(("buffer", name, off,
                                 self.dev.view(self.addr[name], self.sizes[name])))
                continue
            if isinstance(a, ScalarArg):
                v = a.value
                args.append(v if isinstance(v, float) else v.evaluate(env))
            elif isinstance(a, NullArg):
                args.append(0)
            else:
                continue
            if desc is not None:
                desc.append(("value", args[-1]))
        grid = tuple(g.evaluate(env) for g in op.grid)
        block = tuple(b.evaluate(env) for b in op.block)
        smem = op.smem.evaluate(env)

        def run():
            return self.dev.launch(self.module, op.mangled, grid, block, smem, args,
                                   loc=op.loc, name=op.kernel)

        if desc is None:
            stats = run()
        else:
            stats = self.replay.launch(op.mangled, grid, block, smem, desc, run)
        static = self._static[id(op)]
        self.launches.append(LaunchRecord(len(self.launches), static, dict(env), stats))
        if getattr(self.dev, "trace", False):
            chunk = self.dev.traces.pop()
            names = tuple(a.name for a in chunk.shared) + ("extern",)
            self.traces.append(LaunchTrace(static, dict(env),
                                           self._trace_records(chunk, grid, block), names,
                                           chunk.global_names))
        if self.progress:
            self.progress(len(self.launches), self.total)

    def _trace_records(self, chunk, grid, block) -> np.ndarray:
        r = chunk.records
        out = np.zeros(r.size, dtype=TRACE_FIELDS)
        b, t = r["block"].astype(np.int64), r["thread"].astype(np.int64)
        out["bx"], out["by"], out["bz"] = b % grid[0], b // grid[0] % grid[1], \
            b // (grid[0] * grid[1])
        out["tx"], out["ty"], out["tz"] = t % block[0], t // block[0] % block[1], \
            t // (block[0] * block[1])
        out["size"], out["kind"] = r["size"], np.minimum(r["kind"], 2)
        addr = r["addr"]
        shared = np.zeros(r.size, dtype=bool)
        soff = np.zeros(r.size, dtype=np.int64)
        for base in np.array(chunk.smem_bases, dtype=np.uint64):
            inside = (addr >= base) & (addr < base + np.uint64(chunk.smem_bytes))
            shared |= inside
            soff[inside] = (addr[inside] - base).astype(np.int64)
        # a shared access names the array it falls in (module order, see LaunchTrace.shared)
        starts = np.array([a.offset for a in chunk.shared] + [chunk.smem_static],
                          dtype=np.int64)
        sidx = np.searchsorted(starts, soff, side="right") - 1
        soff = soff - starts[np.maximum(sidx, 0)]
        bases = np.array(sorted(self.addr.values()), dtype=np.uint64)
        names = sorted(self.addr, key=self.addr.get)
        idx = np.searchsorted(bases, addr, side="right") - 1
        out["space"] = shared.astype(np.uint8)
        out["offset"] = np.where(shared, soff,
                                 (addr - bases[np.maximum(idx, 0)]).astype(np.int64))
        ids = np.array([self.ids[n] for n in names], dtype=np.int32)
        out["buffer"] = np.where(shared, sidx, ids[np.maximum(idx, 0)])
        for base, size, index in chunk.globals:  # module globals: space 2
            inside = (addr >= np.uint64(base)) & (addr < np.uint64(base + size))
            out["space"][inside] = 2
            out["buffer"][inside] = index
            out["offset"][inside] = (addr[inside] - np.uint64(base)).astype(np.int64)
        return out


def run_program(files, *, entry: str = "main", arch: str = "sm_80", flags=None, seed: int = 0,
                order: str = "forward", inputs: dict[str, np.ndarray] | None = None,
                check_bounds: bool = False, trace: bool = False, opaque_trips: int = 3,
                jobs: int | None = None, use_cache: bool = True,
                progress: Callable[[int, int], None] | None = None,
                launch_progress: bool = True, argv: Sequence[str] | None = None) -> RunResult:
    """Compile, extract and run a whole CUDA program on the CPU executor. `progress` is called
    after every launch; `launch_progress` shows long launches' progress on stderr."""
    from sirius.analysis.program import analyse
    from sirius.runtime.cpu.device import CpuDevice

    paths = [Path(f) for f in files]
    program, kernels, host_program = analyse(paths, entry, arch, flags or [], use_cache, argv)
    device = CpuDevice(order=order, seed=seed, jobs=jobs, check_bounds=check_bounds, trace=trace,
                       progress=launch_progress)
    return run_host_program(host_program, program, kernels, device, seed=seed, inputs=inputs,
                            opaque_trips=opaque_trips, progress=progress, order=order)


def run_host_program(host_program: HostProgram, program, kernels, device, *, seed: int = 0,
                     inputs=None, opaque_trips: int = 3, progress=None,
                     order: str = "forward", dtypes=None, replay=None) -> RunResult:
    """Run `host_program` on `device`; `program` supplies the device module (`device_ir`,
    `device_module`, `files`), `kernels` the KernelInfo facts (for buffer dtypes; `dtypes`
    overrides them by buffer name; `replay` runs or replays each launch, as
    HostInterpreter says)."""
    module = device.load_module(program, data_bytes=host_program.data_bytes())
    interp = HostInterpreter(host_program, {k.mangled: k for k in kernels}, device, module,
                             seed=seed, inputs=inputs, opaque_trips=opaque_trips,
                             progress=progress, dtypes=dtypes, replay=replay)
    t0 = time.perf_counter()
    interp.run()
    return RunResult(host_program, device.name, seed, order, interp.dtypes, interp.initial,
                     interp.final, interp.host, interp.launches, time.perf_counter() - t0,
                     interp.notes, interp.traces)
