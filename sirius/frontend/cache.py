"""The on-disk IR cache: one directory per key under `<cache root>/ir/`, holding device.ll,
host.ll and meta.json (the sha256 of both IR files, and the digest of every user header clang
read). An entry whose files do not match their recorded hashes (a truncated write, a full disk,
an entry from an older sirius) is removed and rebuilt, never trusted; a cache directory that
cannot be written leaves sirius compiling without a cache, after one warning."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from sirius.diagnostics import warn

_warned = False
_WARNED_ENV = "SIRIUS_CACHE_WARNED"  # set once warned: worker processes started later stay quiet


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str | None:
    try:
        return sha256(path.read_bytes())
    except OSError:
        return None


def unwritable(where: Path, e: OSError) -> None:
    """Warn, once per process tree (verify's worker processes inherit the environment), that
    the cache cannot be written and sirius goes on without."""
    global _warned
    if _warned or os.environ.get(_WARNED_ENV):
        return
    _warned = True
    os.environ[_WARNED_ENV] = "1"
    warn("cache-unwritable", f"cannot write the sirius cache in {where}: "
         f"{e.strerror or e}; compiling without a cache (set SIRIUS_CACHE_DIR to a writable "
         "directory)")


class IRCache:
    def __init__(self, root: Path):
        self.dir = root / "ir"

    def lookup(self, key: str) -> tuple[str, str] | None:
        """(device IR, host IR) of a sound entry whose headers are unchanged, else None; a
        corrupt entry is removed on the way."""
        entry = self.dir / key
        try:
            if not entry.is_dir():
                return None
            meta = json.loads((entry / "meta.json").read_text())
            device, host = (entry / "device.ll").read_bytes(), (entry / "host.ll").read_bytes()
            if meta["sha256"] != {"device.ll": sha256(device), "host.ll": sha256(host)}:
                raise ValueError("content hash mismatch")
            deps = meta["deps"]
            texts = device.decode(), host.decode()
        except (OSError, ValueError, KeyError, TypeError):  # JSON and UTF-8 errors are ValueErrors
            self._discard(entry)
            return None
        if any(file_digest(Path(dep)) != digest for dep, digest in deps.items()):
            return None  # a header changed: recompiled, and store() replaces the entry
        return texts

    def store(self, key: str, device: str, host: str, deps: list[str]) -> None:
        """Write an entry atomically (a temporary directory renamed into place), replacing an
        older one; an unwritable cache only warns."""
        tmp: Path | None = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=self.dir, prefix=".tmp-"))
            data = {"device.ll": device.encode(), "host.ll": host.encode()}
            for name, blob in data.items():
                (tmp / name).write_bytes(blob)
            meta = {"sha256": {name: sha256(blob) for name, blob in data.items()},
                    "deps": {d: file_digest(Path(d)) for d in deps}}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
            target = self.dir / key
            if target.exists():
                self._discard(target)
            try:
                os.replace(tmp, target)
            except OSError:  # another process stored the same entry first
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as e:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            unwritable(self.dir, e)

    def _discard(self, entry: Path) -> None:
        """Remove an entry: renamed aside first, so no reader sees it half deleted."""
        try:
            aside = Path(tempfile.mkdtemp(dir=self.dir, prefix=".old-"))
            os.replace(entry, aside / "entry")
            shutil.rmtree(aside, ignore_errors=True)
        except OSError:
            shutil.rmtree(entry, ignore_errors=True)


_fallback: Path | None = None


def cache_dir(root: Path, sub: str) -> Path:
    """`root/sub`, created, for the executor's caches (runtime library, JIT objects); when it
    cannot be created or written, a temporary directory for this process (removed at exit),
    after the one warning."""
    global _fallback
    d = root / sub
    try:
        d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied", str(d))
        return d
    except OSError as e:
        if _fallback is None:
            _fallback = private_root(root, e)
        out = _fallback / sub
        out.mkdir(exist_ok=True)
        return out


def private_root(root: Path, e: OSError) -> Path:
    """A temporary directory to hold the private include files when the cache root `root`
    cannot (removed at exit)."""
    import atexit

    unwritable(root, e)
    tmp = Path(tempfile.mkdtemp(prefix="sirius-include-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    return tmp
