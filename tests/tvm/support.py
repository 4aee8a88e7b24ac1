"""Helpers of the TVM-import tests: the committed corpus and its JSON descriptions.

The directory is called `tests/tvm` and has no `__init__.py`: it is a namespace portion, so a
real `tvm` package always wins over it. Tests that need TVM skip on `tvm.relax` (which only the
real package has), never on `tvm`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
TVM_DIR = ROOT / "kernels" / "tvm"
PAPER_DIR = TVM_DIR / "paper"


def committed(directory: Path = TVM_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.json"))


def meta(name: str, directory: Path = TVM_DIR) -> dict:
    return json.loads((directory / f"{name}.json").read_text())


def need_tvm():
    """Skip unless apache-tvm is installed (the `[tvm]` extra)."""
    return pytest.importorskip("tvm.relax.frontend.nn", reason="needs apache-tvm (the [tvm] "
                               "extra)")


def json_launches(doc: dict) -> list[tuple]:
    """The launches of an import JSON in the shape of tests.helpers.launch_trace."""
    out = []
    for la in doc["launches"]:
        args = tuple((a["buffer"], a["offset"]) if "buffer" in a else a["scalar"]
                     for a in la["args"])
        out.append((la["kernel"], tuple(la["grid"]), tuple(la["block"]), la["smem"], args))
    return out
