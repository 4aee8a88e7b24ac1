"""`sirius opt` (sirius/cli/opt.py): on a corpus program's device module (values checked on the
CPU executor), on a fused module (the same text as code generation's own post-fusion step), and
its errors (exit status 2, the file and line named, no traceback)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import llvmlite.binding as llvm
import pytest

from sirius.analysis.host.model import HostProgram
from sirius.analysis.program import analyse
from sirius.cli import main
from sirius.fusion.codegen.emit import build
from sirius.fusion.spec import FusedKernelSpec
from sirius.postopt import default_passes, format_pipeline
from sirius.verify.differential import verify_fused

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Original:
    program: object
    kernels: tuple
    host: HostProgram


@dataclasses.dataclass(frozen=True)
class Optimized:
    device_ir: str
    host: HostProgram


def opt(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["opt", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_opt_on_a_corpus_module_keeps_its_values(tmp_path, capsys):
    program, kernels, host = analyse([ROOT / "kernels/elementwise_chain.cu"])
    src = tmp_path / "device.ll"  # what `sirius inspect --emit-ir DIR` writes
    src.write_text(program.device_ir)
    out = tmp_path / "out.ll"
    rc, stdout, err = opt(capsys, str(src), "-p", "llvm-opt{level=3,rounds=2}", "-o", str(out),
                          "--json", "--verify-each")
    assert rc == 0, err
    doc = json.loads(stdout)  # stdout is the JSON object and nothing else
    assert doc["input"] == str(src) and doc["output"] == str(out) and doc["arch"] == "sm_80"
    assert [(s["pass"], s["changed"]) for s in doc["passes"]] == \
        [("llvm-opt{level=3,rounds=2}", True)]
    assert "module" not in doc
    text = out.read_text()
    llvm.parse_assembly(text).verify()
    rep = verify_fused(Original(program, tuple(kernels), host), Optimized(text, host),
                       orders=("forward", "reverse"))
    assert rep.ok, rep.render()
    assert rep.outputs and len(rep.rows) == 2 * len(rep.outputs)
    assert all(r.elements > 0 for r in rep.rows)


SPEC = {"name": "fused", "arrangement": "horizontal", "members": [
    {"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1]},
    {"kernel": "tile_sum", "grid": [2, 1, 1], "block": [64, 1, 1]}]}


def test_opt_with_the_default_passes_is_what_code_generation_runs(tmp_path, capsys):
    fused = build((ROOT / "tests/lit/fuse-kernels.ll").read_text(),
                  [FusedKernelSpec.from_json(SPEC)])
    assert fused.unoptimized != fused.text
    src = tmp_path / "unoptimized.ll"
    src.write_text(fused.unoptimized)
    # build() on its own has no host program: the default passes that need none
    rc, stdout, err = opt(capsys, str(src), "-p", format_pipeline(default_passes(host=False)))
    assert rc == 0, err
    assert stdout == fused.text


def test_no_pipeline_verifies_and_prints_the_module_as_given_and_stdin_works(capsys,
                                                                            monkeypatch):
    text = (ROOT / "tests/lit/llvm-opt.ll").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    rc, stdout, err = opt(capsys, "-")
    assert rc == 0, err
    assert stdout == text
    broken = text.replace("%again = load float, ptr %p", "%again = load float, ptr %r")
    lines = broken.splitlines()
    line = next(i for i, t in enumerate(lines) if "ptr %r" in t and not t.startswith(";"))
    monkeypatch.setattr("sys.stdin", io.StringIO(broken))
    rc, stdout, err = opt(capsys, "-")
    assert rc == 2 and stdout == ""
    assert err.splitlines() == [
        f"<stdin>:{line + 1}:{lines[line].index('%r') + 1}: error: the input module does not "
        "parse: use of undefined value '%r'", "    " + lines[line],
        "    " + " " * lines[line].index("%r") + "^"]


def test_list_passes(capsys):
    rc, stdout, _ = opt(capsys, "--list-passes", "--json")
    assert rc == 0
    (d,) = [d for d in json.loads(stdout) if d["name"] == "llvm-opt"]
    assert [(o["name"], o["accepts"], o["default"]) for o in d["options"]] == \
        [("level", "one of 0, 1, 2, 3", 3), ("rounds", "an integer", 2)]
    rc, stdout, _ = opt(capsys, "--list-passes")
    assert rc == 0 and "llvm-opt" in stdout and "level: one of 0, 1, 2, 3 (default 3)" in stdout


def test_errors_exit_2_naming_the_file_and_line(tmp_path, capsys):
    rc, _, err = opt(capsys, str(tmp_path / "missing.ll"), "-p", "llvm-opt")
    assert rc == 2 and err.strip() == f"error: {tmp_path / 'missing.ll'}: no such file"

    bad = tmp_path / "bad.ll"
    bad.write_text("define void @f() {\n  %a = add i32 1\n  ret void\n}\n")
    rc, _, err = opt(capsys, str(bad), "-p", "llvm-opt")
    assert rc == 2
    assert err.splitlines() == [
        f"{bad}:3:3: error: the input module does not parse: expected ',' in arithmetic "
        "operation", "      ret void", "      ^"]

    rc, _, err = opt(capsys, str(bad), "-p", "llvm-opt{level=9}")
    assert rc == 2 and "bad value '9' for option level: expected one of 0, 1, 2, 3" in err
    assert "Traceback" not in err

    rc, _, err = opt(capsys, str(bad), "-p", "llvm-opt", "--print-after", "gvn")
    assert rc == 2 and "the pipeline has no pass gvn; it has llvm-opt" in err

    rc, _, err = opt(capsys)
    assert rc == 2 and "give an IR file" in err

    with pytest.raises(SystemExit) as e:
        main(["opt", str(bad), "--arch", "sm80"])
    assert e.value.code == 2
