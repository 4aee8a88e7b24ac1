"""SIRIUS_JOBS: the worker threads of a forward-order launch when `--jobs` is not given."""

from __future__ import annotations

import os

import pytest

from sirius.diagnostics import SiriusError
from sirius.runtime.cpu.device import CpuDevice, default_jobs


def test_sirius_jobs_sets_the_default(monkeypatch):
    monkeypatch.setenv("SIRIUS_JOBS", "3")
    assert default_jobs() == 3
    assert CpuDevice(order="forward").jobs == 3
    assert CpuDevice(order="forward", jobs=2).jobs == 2  # an explicit count wins
    assert CpuDevice(order="reverse").jobs == 1  # a named schedule runs on one worker
    monkeypatch.delenv("SIRIUS_JOBS")
    assert default_jobs() == (os.cpu_count() or 1)


@pytest.mark.parametrize("value", ["two", "0", "-1"])
def test_bad_sirius_jobs_is_an_error(monkeypatch, value):
    monkeypatch.setenv("SIRIUS_JOBS", value)
    with pytest.raises(SiriusError, match="SIRIUS_JOBS"):
        default_jobs()
