"""Precompiled headers for the headers every compile parses: clang's CUDA runtime wrapper (which
clang includes before any CUDA source) and sirius's compatibility header.

Parsing them is about 1 s of each clang run on a 2-core machine, for a device and a host run
per program; with a precompiled header a small program compiles in about 0.35 s a side. The
code clang emits is the same; the debug info only leaves out the header declarations the
program does not use (DESIGN.md, "Toolchain facts"; docs/troubleshooting.md#precompiled-headers).

A header is built once per set of flags (the side's flags and the user's, so a `-D` the
headers react to is in it) into `<cache>/pch/`, and reused by every later compile with those
flags. It is built at the second compile with a set of flags, not the first: building one
costs about a second more than the compile it replaces, so a set of flags used once (a `-D`
tried by hand, a test's own include directory) is cheaper without; the first compile leaves
a `<key>.wanted` mark. Whatever goes wrong with one (it cannot be built, clang rejects it)
costs only time: the compile runs again without it, so a program's diagnostics are the ones
it would get anyway. `SIRIUS_PCH=0` turns them off.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from sirius.frontend.toolchain import Toolchain

_VERSION = "pch-1"  # bump when the way a header is built changes

_failed: set[Path] = set()  # headers that could not be built in this process


def enabled() -> bool:
    return os.environ.get("SIRIUS_PCH", "1") not in ("0", "no", "off", "false")


def header_flags(tc: Toolchain, flags: list[str], extra: list[str]) -> list[str] | None:
    """`flags` with the compatibility header's `-include` replaced by a precompiled header of
    it (and of clang's wrapper), built on first use; None when there is none to use."""
    include = ["-include", str(tc.compat_header)]
    at = _index(flags, include)
    if at is None or not enabled():
        return None
    pch = _path(tc, flags, extra)
    if pch in _failed:
        return None
    if not pch.exists():
        if not _wanted_before(pch):
            return None
        if not _build(tc, flags[:at] + flags[at + 2:], extra, pch):
            _failed.add(pch)
            return None
    return flags[:at] + ["-include-pch", str(pch)] + flags[at + 2:]


def _wanted_before(pch: Path) -> bool:
    """Whether a compile with these flags has run before (its mark is there); leaves the mark
    for the next one."""
    mark = pch.with_suffix(".wanted")
    if mark.exists():
        return True
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    except OSError:
        pass
    return False


def discard(pch_flags: list[str]) -> None:
    """Forget the precompiled header of a compile that failed with it (it may be stale: a
    toolkit header changed under it); the next compile builds it again."""
    at = pch_flags.index("-include-pch")
    Path(pch_flags[at + 1]).unlink(missing_ok=True)


def _index(flags: list[str], pair: list[str]) -> int | None:
    for i in range(len(flags) - 1):
        if flags[i:i + 2] == pair:
            return i
    return None


def _path(tc: Toolchain, flags: list[str], extra: list[str]) -> Path:
    h = hashlib.sha256()
    # the header's mtime: clang refuses a precompiled header older than a file it includes
    stamp = str(tc.compat_header.stat().st_mtime_ns) if tc.compat_header.exists() else "-"
    for part in (_VERSION, tc.fingerprint(), stamp, *flags, "|", *extra):
        h.update(part.encode() + b"\0")
    return tc.private_include.parent / "pch" / f"{h.hexdigest()[:32]}.pch"


def _build(tc: Toolchain, flags: list[str], extra: list[str], pch: Path) -> bool:
    """Compile the compatibility header as a precompiled header (the driver's -S -emit-llvm in
    `flags` stops it before the device assembler). Written beside its final name and renamed,
    so parallel compiles never read half a file."""
    try:
        pch.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=pch.parent, prefix=".building-", suffix=".pch")
        os.close(fd)
    except OSError:
        return False
    cmd = [tc.clang, *flags, *extra, "-Xclang", "-emit-pch", "-o", tmp, str(tc.compat_header)]
    try:
        ok = subprocess.run(cmd, capture_output=True).returncode == 0
        if ok:
            os.replace(tmp, pch)
        return ok
    except OSError:
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)
