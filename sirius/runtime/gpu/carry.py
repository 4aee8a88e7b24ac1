"""Carried directories: compile here (clang, llvmlite, isl), run there (a GPU machine that has
only numpy and pycuda). `prepare` writes what `sirius fuse` writes (fused.ll, fused.ptx,
plan.json, report.md) plus everything a GPU run needs without a compiler:

    carry.json      schema sirius-carry/1: both host programs (serialized here), buffer dtypes,
                    the observed buffers, seed, input checksums, launch counts, the command
    original.ptx    the original device module, for the same architecture as fused.ptx
    fused.ptx       the fused device module
    reference.npz   the CPU executor's final contents of the observed buffers (forward order),
                    the original's device module rounded as the GPU rounds it: multiply-adds
                    contracted into FMAs where NVPTX contracts them (cpu/contraction.py)
    reference_plain.npz  the same run with every operation rounded on its own (the executor's
                    default): how far two legitimate roundings of the program lie apart, the
                    program's sensitivity to rounding (docs/gpu.md, "Checking GPU results")
    inputs.npz      the arrays given with --inputs, when there were any

Inputs are the interpreter's seeded ones (by seed and buffer name, docs/runtime.md) plus the
arrays of inputs.npz; carry.json keeps a checksum of every input buffer as the original's first
launch saw it, so a GPU run can tell whether it ran on the same data.

The host programs are serialized as JSON by `host_to_json` / `host_from_json`: every frozen
dataclass of the host model (sirius/analysis/host/model.py), `Expr` and `Location` become
objects tagged with their class (`"_"`), fields equal to their default are left out, tuples
become lists and come back as tuples.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sirius._version import __version__
from sirius.analysis.expr import Expr, FloorDiv, MinMax, Mod
from sirius.analysis.host import model as hm
from sirius.diagnostics import Location, SiriusError
from sirius.runtime.gpu.device import PtxProgram

SCHEMA = "sirius-carry/1"
HOST_SCHEMA = "sirius-host/1"
INPUT_ROLES = ("input", "param")

_CLASSES = {c.__name__: c for c in (
    hm.HostProgram, hm.Buffer, hm.DevRef, hm.Rotating, hm.HostRef, hm.BufferArg, hm.ScalarArg,
    hm.NullArg, hm.Alloc, hm.Free, hm.Copy, hm.Memset, hm.Launch, hm.Sync, hm.Loop, hm.Symbol,
    FloorDiv, Mod, MinMax, Location)}


# host programs as JSON -----------------------------------------------------------------------
def _enc(x):
    if isinstance(x, Expr):
        out: dict = {"c": x.const}
        if x.terms:
            out["t"] = [[_enc(a), c] for a, c in x.terms]
        return out
    if dataclasses.is_dataclass(x) and type(x).__name__ in _CLASSES:
        out = {"_": type(x).__name__}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            out[f.name] = _enc(v)
        return out
    if isinstance(x, tuple | list):
        return [_enc(v) for v in x]
    if x is None or isinstance(x, bool | int | float | str):
        return x
    raise SiriusError(f"cannot serialize {type(x).__name__} in a host program")


def _dec(x, where: str):
    if isinstance(x, list):
        return tuple(_dec(v, where) for v in x)
    if not isinstance(x, dict):
        return x
    if "_" not in x:
        if "c" not in x:
            raise SiriusError(f"{where}: an object that is neither an expression nor a tagged "
                              f"host-model value: {json.dumps(x)[:80]}")
        return Expr(int(x["c"]), tuple((_dec(a, where), int(c)) for a, c in x.get("t", ())))
    cls = _CLASSES.get(x["_"])
    if cls is None:
        raise SiriusError(f"{where}: unknown host-model class {x['_']!r} (known: "
                          f"{', '.join(sorted(_CLASSES))})")
    try:
        return cls(**{k: _dec(v, where) for k, v in x.items() if k != "_"})
    except TypeError as e:
        raise SiriusError(f"{where}: bad {x['_']}: {e}") from e


def host_to_json(program: hm.HostProgram) -> dict:
    return {"schema": HOST_SCHEMA, "program": _enc(program)}


def host_from_json(doc: dict, where: str = "host program") -> hm.HostProgram:
    if not isinstance(doc, dict) or doc.get("schema") != HOST_SCHEMA:
        raise SiriusError(f"{where}: not a {HOST_SCHEMA} document")
    program = _dec(doc["program"], where)
    if not isinstance(program, hm.HostProgram):
        raise SiriusError(f"{where}: the document holds no HostProgram")
    return program


# carried directories --------------------------------------------------------------------------
def checksum(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


@dataclass(frozen=True)
class Side:
    """One program of a carried directory: its host program and its device module."""

    host: hm.HostProgram
    program: PtxProgram


@dataclass(frozen=True)
class Carried:
    path: Path
    meta: dict
    original: Side
    fused: Side
    dtypes: dict[str, np.dtype]
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    reference_plain: dict[str, np.ndarray] | None = None  # absent in older carried folders

    @property
    def seed(self) -> int:
        return int(self.meta["seed"])

    @property
    def observed(self) -> list[str]:
        return list(self.meta["observed"])

    @property
    def name(self) -> str:
        return str(self.meta["program"])

    def sides(self) -> dict:
        """The two programs as the bench takes them (dtypes and inputs of the prepared run)."""
        from sirius.runtime.gpu.bench import BenchProgram

        inputs = self.inputs or None
        return {"original": BenchProgram(self.original.host, self.original.program,
                                         dtypes=self.dtypes, inputs=inputs),
                "fused": BenchProgram(self.fused.host, self.fused.program, dtypes=self.dtypes,
                                      inputs=inputs)}

    def input_mismatches(self, initial: dict[str, np.ndarray]) -> list[str]:
        """Input buffers whose data (as the first launch saw it) differs from the prepared
        run's: a GPU run on other data than the reference's."""
        want = self.meta.get("input_checksums", {})
        return sorted(n for n, c in want.items() if n in initial and checksum(initial[n]) != c)


def prepare(res, out: Path, *, observed: list[str], observed_rule: str = "", seed: int = 7,
            inputs: dict[str, np.ndarray] | None = None, opaque_trips: int = 3,
            ptx_version: int | None = None, command: str = "",
            cooperative_kernels: tuple[str, ...] = ()) -> Path:
    """Write the carried directory of a FuseResult `res` to `out`; the CPU executor's run of
    the original (forward order, `seed`), rounded as the GPU rounds multiply-adds, gives the
    reference outputs and the dtypes; a second run, every operation rounded on its own, the
    program's sensitivity to rounding (module doc)."""
    from sirius.backend.ptx import emit_ptx
    from sirius.fusion.report import write_outputs
    from sirius.runtime.cpu.contraction import contracted
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    arch = res.options.arch
    orig = res.original

    def run(program):
        return run_host_program(orig.host, program, orig.kernels,
                                CpuDevice(order="forward", seed=seed, progress=False), seed=seed,
                                inputs=inputs, opaque_trips=opaque_trips)
    ref = run(contracted(orig.program))
    plain = run(orig.program)
    write_outputs(res, out, {"ran": False, "reason": "sirius bench --prepare: the GPU run "
                             "is compared with the CPU executor's outputs (reference.npz)"})
    original_ptx = emit_ptx(orig.program.device_ir, arch, ptx_version=ptx_version).text
    fused_ptx = res.ptx if ptx_version is None else \
        emit_ptx(res.device_ir, arch, ptx_version=ptx_version).text
    (out / "original.ptx").write_text(original_ptx)
    (out / "fused.ptx").write_text(fused_ptx)
    np.savez_compressed(out / "reference.npz", **{n: ref.final[n] for n in observed
                                                   if n in ref.final})
    np.savez_compressed(out / "reference_plain.npz", **{n: plain.final[n] for n in observed
                                                         if n in plain.final})
    if inputs:
        np.savez_compressed(out / "inputs.npz", **inputs)
    roles = {b.name: b.role for b in orig.host.buffers}
    meta = {
        "schema": SCHEMA, "sirius": __version__, "numpy": np.__version__,
        "program": Path(res.files[0]).stem, "sources": [str(f) for f in res.files],
        "command": command, "arch": arch, "seed": seed, "opaque_trips": opaque_trips,
        "dtypes": {n: str(d) for n, d in ref.dtypes.items()},
        "observed": [n for n in observed if n in ref.final], "observed_rule": observed_rule,
        "inputs": "inputs.npz" if inputs else None,
        "input_checksums": {n: checksum(a) for n, a in ref.initial.items()
                            if roles.get(n) in INPUT_ROLES},
        "reference": {"file": "reference.npz", "device": "cpu", "order": "forward",
                      "rounding": "multiply-adds contracted as NVPTX contracts them",
                      "plain": "reference_plain.npz"},
        "launches": {"original": len(ref.launches), "fused_static": len(res.host.launches()),
                     "original_static": len(orig.host.launches())},
        # of the fused program: its grid megakernels unless the caller names others
        "cooperative_kernels": list(cooperative_kernels
                                    or getattr(res, "cooperative_kernels", ())),
        "original": {"ptx": "original.ptx", "host": host_to_json(orig.host)},
        "fused": {"ptx": "fused.ptx", "host": host_to_json(res.host)},
    }
    (out / "carry.json").write_text(json.dumps(meta, indent=1) + "\n")
    return out


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise SiriusError(f"{path}: cannot read the {what}: {e.strerror}") from e


def _npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise SiriusError(f"{path}: cannot read it as a .npz file: {e}") from e


def load(directory: Path | str) -> Carried:
    """Read a carried directory; a clear error naming the file when something is missing."""
    d = Path(directory)
    if not d.is_dir():
        raise SiriusError(f"{d}: not a directory (write one with `sirius bench PROGRAM.cu "
                          "--prepare DIR`)")
    path = d / "carry.json"
    try:
        meta = json.loads(_read(path, "carried program (carry.json)"))
    except json.JSONDecodeError as e:
        raise SiriusError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from e
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise SiriusError(f"{path}: not a {SCHEMA} file (schema "
                          f"{meta.get('schema') if isinstance(meta, dict) else None!r})")
    sides = []
    for key in ("original", "fused"):
        part = meta[key]
        host = host_from_json(part["host"], f"{path}: {key} host program")
        ptx = _read(d / part["ptx"], f"{key} PTX")
        coop = tuple(meta.get("cooperative_kernels", ())) if key == "fused" else ()
        sides.append(Side(host, PtxProgram(ptx, tuple(meta.get("sources", ())), coop)))
    inputs = _npz(d / meta["inputs"]) if meta.get("inputs") else {}
    reference = _npz(d / meta["reference"]["file"])
    plain = meta["reference"].get("plain")
    dtypes = {n: np.dtype(t) for n, t in meta["dtypes"].items()}
    return Carried(d, meta, sides[0], sides[1], dtypes, inputs, reference,
                   _npz(d / plain) if plain else None)
