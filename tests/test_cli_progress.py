"""Progress goes to stderr with a total time at the end; -q silences it; stdout keeps results."""

from __future__ import annotations

import re

import pytest

from tests.helpers import run_cli

CELL = "kernels/lstm_cell.cu"


@pytest.mark.parametrize("command", [["analyze"], ["verify", "--order", "forward"]])
def test_progress_on_stderr_and_total_time(command):
    r = run_cli(*command, CELL)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert re.match(r"\[\s*\d+\.\d s\] ", lines[0])
    assert re.fullmatch(r"done in \d+\.\d s", lines[-1])
    assert "[" not in r.stdout.splitlines()[0]  # results, not progress, on stdout
    quiet = run_cli(*command, CELL, "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    def untimed(text: str) -> list[str]:  # both commands print their own timings
        return [ln for ln in text.splitlines() if not re.search(r"\d\.\d+ s\b", ln)]

    assert untimed(quiet.stdout) == untimed(r.stdout)
