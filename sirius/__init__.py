"""sirius: a whole-program CUDA kernel-fusion compiler (after SIRIUS, MLSys 2023).

    import sirius
    r = sirius.fuse("prog.cu", arch="sm_90")

The API (`fuse`, `analyze`, `inspect`, `run`) lives in `sirius.api` (docs/api.md); it is loaded
on first use so that `import sirius` stays cheap.
"""

from sirius._version import __version__

__all__ = ["__version__", "analyze", "fuse", "inspect", "run"]


def __getattr__(name: str):
    if name in ("fuse", "analyze", "inspect", "run"):
        from sirius import api

        return getattr(api, name)
    raise AttributeError(f"module 'sirius' has no attribute {name!r}")
