"""Verifying a candidate variant as a fan-out task (fanout.py: a Ray task or a pool worker, or
this process): the variant is rebuilt where the task runs and checked as `sirius verify` does
(original vs fused on the CPU executor, forward, reverse and random block orders, the tune's
seed). What comes back is picklable: the verdict, the hash of the module verified and, when it
verified, the files `sirius fuse` writes for it (so `chosen/` is the module verified, with no
rebuild in the main process).

Code generation is not deterministic across processes (seen on deepspeech2 and bert_layer):
when the rebuild is not the module that was estimated (`ir_sha`), the task counts the rebuild
on the executor again (`remeasure`) and returns those counts with the verdict, so the caller
estimates what was verified; when the module was also timed on a GPU in the main process
(`remeasure` False) the task only says so, and the caller verifies its own rebuild.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from sirius.diagnostics import SiriusError
from sirius.tune import variants
from sirius.tune.variants import Request, VariantResult


@dataclass(frozen=True)
class VerifyRequest:
    request: Request
    ir_sha: str            # the fused module estimated (and measured): the one to verify
    remeasure: bool = True  # a rebuild that differs is counted again (else not verified)


@dataclass(frozen=True)
class Verdict:
    label: str
    ok: bool | None            # None: the rebuild differs from ir_sha and was not verified
    note: str
    ir_sha: str = ""
    result: VariantResult | None = None  # the differing rebuild, counted (remeasure)
    files: dict | None = None            # fused.ll, fused.ptx, plan.json, report.md


def check(res, seed: int) -> tuple[bool, str]:
    """`sirius verify`'s check of a FuseResult against its original: (ok, note)."""
    from sirius.verify.differential import ORDERS, verify_fused

    report = verify_fused(res.original, res, seed=seed, orders=ORDERS)
    if report.ok:
        return True, f"ok ({', '.join(ORDERS)} orders, seed {seed})"
    bad = report.failed()
    what = "; ".join(f"{r.order} {r.buffer}: {r.error or f'{r.mismatches} mismatches'}"
                     for r in bad[:3]) or "; ".join(m for _, m in report.faults[:2])
    return False, f"NOT OK: {what}"


def fused_files(res) -> dict[str, str]:
    """What `sirius fuse` writes for a FuseResult (fusion.report.write_outputs), as text."""
    import json

    from sirius.fusion.report import plan_json, report_md

    return {"fused.ll": res.device_ir, "fused.ptx": res.ptx,
            "plan.json": json.dumps(plan_json(res), indent=1) + "\n",
            "report.md": report_md(res)}


def verify_variant(q: VerifyRequest) -> Verdict:
    """Task entry point: rebuild `q.request` here and verify it (module docstring)."""
    label = q.request.label
    try:
        again, res = variants.build(q.request, measure=False)
        fresh = None
        if again.ir_sha != q.ir_sha:
            if not q.remeasure:
                return Verdict(label, None, "the rebuild differs from the module measured",
                               again.ir_sha)
            fresh, res = variants.build(q.request)
        ok, note = check(res, q.request.source.seed)
        return Verdict(label, ok, note, (fresh or again).ir_sha, fresh,
                       fused_files(res) if ok else None)
    except SiriusError as e:
        return Verdict(label, False, f"rebuild failed: {e.message}")
    except Exception as e:  # noqa: BLE001 - a bug fails this candidate, not the tune
        return Verdict(label, False, f"internal error: {type(e).__name__}: {e}\n"
                                     f"{traceback.format_exc(limit=4)}")


def verdict_text(d: Verdict) -> str:
    return f"verified {d.label}: " + ("ok" if d.ok else "differs" if d.ok is None
                                      else d.note.splitlines()[0])


def died_verify(q: VerifyRequest) -> Verdict:
    return Verdict(q.request.label, False,
                   "NOT OK: its worker process died while verifying it (killed by the system: "
                   "out of memory? `dmesg` says; try fewer --jobs)")
