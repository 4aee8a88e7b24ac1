"""Compile `.cu` files to device and host LLVM IR with clang-22, with an on-disk cache.

The cache key is a hash of the toolchain, the flags and every input file's content (and its
path only when it has quoted #includes, which are looked up next to it).
clang's dependency list (-MMD) is stored with the entry, and a hit is only taken when every user
header it names still has the content it had, so editing an included header recompiles.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import llvmlite.binding as llvm

from sirius.diagnostics import FrontendError, Location
from sirius.frontend import llvmctx, pch
from sirius.frontend.cache import IRCache
from sirius.frontend.program import Program
from sirius.frontend.toolchain import (
    Toolchain,
    c_host_flags,
    cache_root,
    device_flags,
    host_flags,
    prelude_flags,
    toolchain,
)

_DIAG_RE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): "
                      r"(?P<sev>fatal error|error): (?P<msg>.*)$", re.M)


def _parse_depfile(text: str) -> list[str]:
    body = text.replace("\\\n", " ").split(":", 1)[-1]
    return [p for p in body.split() if p]


def _run_clang(tc: Toolchain, flags: list[str], src: Path, out: Path, depfile: Path | None,
               extra: list[str]) -> None:
    """One clang run, with the precompiled headers when there are; a run that fails with them
    is run again without, so a program's diagnostics do not depend on them (sirius/frontend/
    pch.py)."""
    if (with_pch := pch.header_flags(tc, flags, extra)) is not None:
        proc = _clang(tc, with_pch, src, out, depfile, extra)
        if proc.returncode == 0:
            return
        if _PCH_TROUBLE.search(proc.stderr):
            pch.discard(with_pch)
    proc = _clang(tc, flags, src, out, depfile, extra)
    if proc.returncode != 0:
        raise _frontend_error(src, proc.stderr)


_PCH_TROUBLE = re.compile(r"precompiled header|PCH file|AST file", re.I)


def _clang(tc: Toolchain, flags: list[str], src: Path, out: Path, depfile: Path | None,
           extra: list[str]) -> subprocess.CompletedProcess:
    cmd = [tc.clang, *flags, *extra]
    if depfile is not None:
        cmd += ["-MMD", "-MF", str(depfile)]
    cmd += ["-o", str(out), str(src)]
    return subprocess.run(cmd, capture_output=True, text=True)


def _frontend_error(src: Path, stderr: str) -> FrontendError:
    if m := re.search(r"unsupported CUDA gpu architecture: (\S+)", stderr):
        return FrontendError(f"--arch {m[1]}: clang-22 does not compile for this GPU "
                             "architecture (use e.g. sm_80, sm_90)", None)
    first = _DIAG_RE.search(stderr)
    notes: list[str] = []
    if first:
        loc = Location(first["file"], int(first["line"]), int(first["col"]))
        msg = first["msg"]
        if "texture" in msg:
            notes.append("texture references were removed in CUDA 12 and sirius does not support "
                         "textures; read the array through a plain pointer instead")
    else:
        loc, msg = Location(str(src), 1), "clang failed"
    n_errors = len(_DIAG_RE.findall(stderr))
    summary = f"cannot compile {src.name}: {msg}"
    if n_errors > 1:
        summary += f" (and {n_errors - 1} more error{'s' if n_errors > 2 else ''})"
    # Keep clang's own text: the errors with their context lines, not the long include stacks.
    kept = [ln for ln in stderr.splitlines() if not ln.startswith("In file included from")]
    return FrontendError(summary, loc, diagnostics="\n".join(kept[:40]), notes=tuple(notes))


def _parse_verified(text: str, what: str, src: Path,
                    context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    try:
        mod = llvmctx.parse(text, context)
        mod.verify()
    except RuntimeError as e:  # llvmlite reports parse and verify failures this way
        raise FrontendError(f"clang produced {what} IR for {src.name} that LLVM rejects: {e}",
                            Location(str(src), 1)) from e
    return mod


def is_c_source(src: Path) -> bool:
    """A `.c` file is C host code (`.cu`, `.cpp`, anything else: CUDA C++)."""
    return src.suffix == ".c"


# CUDA C++ that a `.c` file cannot contain: a launch, or a kernel/device definition.
_CUDA_ONLY = re.compile(r"<<<|\b__global__\b|\b__device__\b|\b__constant__\b|\b__shared__\b")
_COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                                   re.S)


def check_c_source(src: Path, text: str) -> None:
    """A `.c` file is compiled as C: refuse one that uses CUDA C++ (launches, kernels)."""
    code = _COMMENTS_AND_STRINGS.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)
    if m := _CUDA_ONLY.search(code):
        line = code.count("\n", 0, m.start()) + 1
        col = m.start() - (code.rfind("\n", 0, m.start()) + 1) + 1
        what = "launches a kernel (<<<...>>>)" if m[0] == "<<<" else f"uses {m[0]}"
        raise FrontendError(
            f"{src.name} {what}, which is CUDA C++, but a .c file is compiled as C",
            Location(str(src), line, col),
            notes=("rename it to .cu (CUDA C++ is compiled as C++: old C that is not valid C++, "
                   "such as `int new;` or malloc without a cast, must then be fixed), or move "
                   "the CUDA code into a .cu file and keep the C host code in the .c file",))


def _parse_pair(device: str, host: str, src: Path, contexts: tuple):
    """The device (None for a C file) and host modules of one input, parsed and verified into
    `contexts` (device, host: those of the program's other inputs, which they are linked to)."""
    dmod = _parse_verified(device, "device", src, contexts[0]) if device else None
    return dmod, _parse_verified(host, "host", src, contexts[1])


def _run_sides(tc: Toolchain, src: Path, tmp: Path, dflags: list[str], hflags: list[str],
               extra: list[str]) -> None:
    """The device (when `dflags`) and host clang runs, at once: each parses the whole source
    (paper lstm_large's 1.2 MB of written-out launches: about 6 s a side on the 2-core VM).
    The device side's error is the one raised when both fail, as when they ran in turn."""
    host = threading.Thread(target=_keep_error, args=(
        errors := [], _run_clang, tc, hflags, src, tmp / "host.ll", tmp / "host.d", extra))
    host.start()
    try:
        if dflags:
            _run_clang(tc, dflags, src, tmp / "device.ll", tmp / "device.d", extra)
    finally:
        host.join()
    if errors:
        raise errors[0]


def _keep_error(errors: list[BaseException], fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - handed to the calling thread, raised there
        errors.append(e)


def _compile_one(tc: Toolchain, src: Path, arch: str, extra: list[str],
                 use_cache: bool, lookup: bool = True) -> tuple[str, str, bool]:
    """(device IR, host IR, whether it came from the cache). `lookup=False` recompiles and
    replaces the cache entry (one whose IR LLVM rejects). A `.c` file has no device IR ("")."""
    source = src.read_bytes()
    if is_c_source(src):
        check_c_source(src, source.decode(errors="replace"))
        dflags, hflags = [], c_host_flags(tc)
    else:
        dflags, hflags = device_flags(tc, arch), host_flags(tc, arch)
    extra = extra + prelude_flags(tc, source.decode(errors="replace"), extra)  # keyed below
    # The file's path is in the key only when it matters: a quoted #include is looked up next to
    # the file. Otherwise the same program anywhere (a test's temporary directory) is one entry,
    # and the path recorded in the IR's debug info is put back on a hit.
    where = str(src.resolve()) if _QUOTED_INCLUDE.search(source) else ""
    h = hashlib.sha256()
    # with precompiled headers the debug info leaves out unused header declarations
    marks = ("pch",) if pch.enabled() else ()
    for part in (tc.fingerprint(), arch, *dflags, "|", *hflags, "|", *extra, where, *marks):
        h.update(part.encode() + b"\0")
    h.update(source)
    key = h.hexdigest()[:32]
    cache = IRCache(cache_root())
    if use_cache and lookup and (hit := cache.lookup(key)) is not None:
        return _localised(hit[0], src), _localised(hit[1], src), True
    with tempfile.TemporaryDirectory(prefix="sirius-cc-") as tmpd:
        tmp = Path(tmpd)
        _run_sides(tc, src, tmp, dflags, hflags, extra)
        device = (tmp / "device.ll").read_text() if dflags else ""
        host = (tmp / "host.ll").read_text()
        deps: set[str] = set()
        for d in ("device.d", "host.d") if dflags else ("host.d",):
            deps.update(_parse_depfile((tmp / d).read_text()))
    deps = {str(Path(d).resolve()) for d in deps} - {str(src.resolve())}
    held = _placeheld(device, src), _placeheld(host, src)
    if use_cache:
        cache.store(key, *held, sorted(deps))
    # what a later hit returns, so a miss and a hit give the same text (clang's split DIFile
    # form, when the file and the working directory share a parent, is made whole in both)
    return _localised(held[0], src), _localised(held[1], src), False


_QUOTED_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"', re.M)
_SRC, _CWD = "@@sirius-source@@", "@@sirius-cwd@@"


_DIFILE = re.compile(r'DIFile\(filename: "([^"]*)", directory: "([^"]*)"')


def _placeheld(ir: str, src: Path) -> str:
    """The IR with the source path and working directory (as debug info records them) replaced
    by placeholders, for the cache. clang may also record the source split at a common parent
    of the file and the working directory (`filename: "pp/one/prog.cu", directory: "/tmp"`
    when compiling /tmp/pp/one/prog.cu from /tmp/cc): that form is put in the whole-path form
    first."""
    whole = os.path.normpath(str(src))

    def unsplit(m: re.Match) -> str:
        name, directory = m.group(1), m.group(2)
        if directory and not os.path.isabs(name) and \
                os.path.normpath(os.path.join(directory, name)) == whole:
            return f'DIFile(filename: "{src}", directory: "{directory}"'
        return m.group(0)

    return _swap(_DIFILE.sub(unsplit, ir), (str(src), _SRC), (str(Path.cwd()), _CWD))


def _localised(ir: str, src: Path) -> str:
    """A cached IR text with this compile's source path and working directory put back."""
    return _swap(ir, (_SRC, str(src)), (_CWD, str(Path.cwd())))


def _swap(ir: str, src: tuple[str, str], cwd: tuple[str, str]) -> str:
    """Replace the source path where debug info and the module header quote it, and the working
    directory where DIFile records it."""
    (a, b), (c, d) = src, cwd
    return (ir.replace(f'"{a}"', f'"{b}"').replace(f"; ModuleID = '{a}'", f"; ModuleID = '{b}'")
            .replace(f'directory: "{c}"', f'directory: "{d}"'))


def check_inputs(paths: list[Path]) -> None:
    """Every input is a readable regular file (a directory is named as one)."""
    if not paths:
        raise FrontendError("no input files")
    for p in paths:
        if p.is_dir():
            raise FrontendError(f"{p}: is a directory; give the program's .cu file")
        if not p.is_file():
            raise FrontendError(f"no such file: {p}" if not p.exists() else
                                f"{p}: not a regular file")


def _parse_and_link(tc: Toolchain, paths: list[Path], arch: str, extra: list[str],
                    use_cache: bool, contexts: tuple):
    """Each input compiled (or read from the cache), parsed into `contexts` (device, host)
    and linked: (device module or None, host module, all from the cache, device IR texts,
    host IR texts)."""
    device_mod = host_mod = None
    all_hit = True
    dev_texts, host_texts = [], []
    for p in paths:
        device, host, hit = _compile_one(tc, p, arch, extra, use_cache)
        if hit:
            try:
                dmod, hmod = _parse_pair(device, host, p, contexts)
            except FrontendError:  # a cached entry LLVM rejects is the cache's fault: rebuild it
                device, host, hit = _compile_one(tc, p, arch, extra, use_cache, lookup=False)
        if not hit:
            dmod, hmod = _parse_pair(device, host, p, contexts)
        all_hit &= hit
        if dmod is not None:
            dev_texts.append(device)
        host_texts.append(host)
        try:
            if dmod is not None:
                if device_mod is None:
                    device_mod = dmod
                else:
                    device_mod.link_in(dmod)
            if host_mod is None:
                host_mod = hmod
            else:
                host_mod.link_in(hmod)
        except RuntimeError as e:
            raise FrontendError(f"cannot link {p.name} with the other inputs: {e}",
                                Location(str(p), 1)) from e
    return device_mod, host_mod, all_hit, dev_texts, host_texts


def compile_program(files: list[str | Path] | str | Path, arch: str = "sm_80",
                    extra_flags: list[str] | None = None, use_cache: bool = True) -> Program:
    """Compile one or more `.cu` files into a `Program` (modules parsed and verified)."""
    paths = [Path(files)] if isinstance(files, (str, Path)) else [Path(f) for f in files]
    check_inputs(paths)
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise FrontendError(f"bad --arch {arch!r}: expected an sm_XX name such as sm_80")
    tc = toolchain()
    extra = list(extra_flags or [])
    start = time.perf_counter()
    with llvmctx.shared_context() as dctx, llvmctx.shared_context() as hctx:
        device_mod, host_mod, all_hit, dev_texts, host_texts = _parse_and_link(
            tc, paths, arch, extra, use_cache, (dctx, hctx))
    if device_mod is None:
        raise FrontendError("no CUDA source among the inputs: .c files are C host code; give "
                            "the .cu file that defines the kernels as well",
                            Location(str(paths[0]), 1))
    assert host_mod is not None
    if len(paths) > 1:
        device_mod.verify()
        host_mod.verify()
    return Program(
        files=tuple(paths),
        arch=arch,
        device_ir=dev_texts[0] if len(dev_texts) == 1 else str(device_mod),
        host_ir=host_texts[0] if len(host_texts) == 1 else str(host_mod),
        cache_hit=all_hit,
        compile_seconds=time.perf_counter() - start,
        device_module=device_mod,
        host_module=host_mod,
    )
