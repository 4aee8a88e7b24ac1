"""A worker process that dies while building a variant (the OOM killer, a crash in native code)
fails that variant, not the whole tune: the builds the broken pool lost are built again one at
a time."""

from __future__ import annotations

import os

from sirius.tune import fanout
from sirius.tune.variants import Request, Source, VariantResult

SRC = Source(("none.cu",), "sm_90")


def fake_build(req: Request) -> VariantResult:
    """A build that kills its worker for the variant labelled 'boom' (module level: spawned
    workers import it)."""
    if req.label == "boom":
        os._exit(9)
    return VariantResult(req.label, req.split_storage, req.choices, req.original, seconds=0.0)


def test_a_dead_worker_fails_its_variant_only():
    reqs = [Request(SRC, label) for label in ("a", "boom", "b", "c")]
    said: list[str] = []
    out = fanout._pool(reqs, 2, said.append, build=fake_build)
    assert [r.label for r in out] == ["a", "boom", "b", "c"]
    assert [r.ok for r in out] == [True, False, True, True]
    assert out[1].error == fanout.DIED
    assert any("a worker process died" in s for s in said)
