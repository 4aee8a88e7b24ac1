"""`sirius inspect` on bad inputs: exit status 2, the offending line as FILE.cu:LINE, a message
that says what is wrong, and no traceback.

Each program in tests/bad/ marks its offending line with an `// OFFENDING` comment; the files'
header comments say whether clang compiles them (syntax_error, missing_include and texture_ref
are rejected by clang; the others compile and must be rejected by host analysis).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, run_cli

BAD = ROOT / "tests" / "bad"

# kind -> phrase the error message must contain
CASES = {
    "syntax_error": "cannot compile",
    "missing_include": "file not found",
    "fnptr_launch": "launch through a function pointer",
    "nonconst_alloc": "not a compile-time constant",
    "managed": "managed memory",
    "texture_ref": "texture",
    "texture_object": "texture",
    "recursion": "recursi",
    "unknown_scalar": "argument 'n' of k is not known",
    "gpu_under_condition": "condition",
}


def offending_line(path: Path) -> int:
    lines = [i for i, text in enumerate(path.read_text().splitlines(), 1) if "// OFFENDING" in text]
    assert len(lines) == 1, f"{path.name} must mark exactly one line // OFFENDING"
    return lines[0]


def test_every_bad_program_has_a_case() -> None:
    assert sorted(p.stem for p in BAD.glob("*.cu")) == sorted(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_bad_input_is_reported(kind: str) -> None:
    path = BAD / f"{kind}.cu"
    proc = run_cli("inspect", str(path.relative_to(ROOT)))
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{err}"
    assert "Traceback" not in err, err
    assert f"{path.name}:{offending_line(path)}" in err, err
    assert CASES[kind] in err, err
