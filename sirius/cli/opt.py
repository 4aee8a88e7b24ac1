"""`sirius opt IN.ll -p PIPELINE [-o OUT.ll]`: run post-fusion passes on an LLVM IR file
(docs/passes.md).

    sirius opt fused.ll -p 'llvm-opt{level=3,rounds=2}' -o out.ll
    sirius opt fused.ll -p llvm-opt --print-after llvm-opt --verify-each
    sirius opt --list-passes [--json]

The module goes to stdout (or `-o`); with `--json` stdout is one JSON object (the passes, their
times, and the module unless `-o` is given). With no `-p` the module is only parsed, verified
and printed. `IN.ll` may be `-` (stdin).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sirius.cli.common import arch, print_table
from sirius.diagnostics import SiriusError
from sirius.postopt import PASSES, PassContext, describe, parse_pipeline, run_pipeline
from sirius.postopt.base import spell


def _cmd_opt(args: argparse.Namespace) -> int:
    if args.list_passes:
        return _list_passes(args.json)
    if args.input is None:
        raise SiriusError("give an IR file (IN.ll, or - for stdin), or --list-passes")
    passes = parse_pipeline(args.passes)
    if args.input == "-":
        text, source = sys.stdin.read(), "<stdin>"
    else:
        path = Path(args.input)
        if not path.is_file():
            raise SiriusError(f"{path}: no such file" if not path.exists()
                              else f"{path}: not a file")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise SiriusError(f"{path}: cannot read it as LLVM IR text: {e}") from e
        source = str(path)
    ctx = PassContext(arch=args.arch or PassContext.arch_of(text), source=source,
                      host_program=_host(args.host))
    result = run_pipeline(text, passes, ctx, verify_each=args.verify_each,
                          print_after=tuple(args.print_after))
    if args.output:
        try:
            Path(args.output).write_text(result.text)
        except OSError as e:
            raise SiriusError(f"-o {args.output}: cannot write it: {e.strerror}") from e
    if args.json:
        doc: dict[str, object] = {"input": source, "arch": ctx.arch,
                                  "pipeline": ",".join(str(p) for p in passes),
                                  "passes": [s.to_json() for s in result.steps],
                                  "output": args.output}
        if not args.output:
            doc["module"] = result.text
        print(json.dumps(doc, indent=1))
    elif not args.output:
        sys.stdout.write(result.text)
    if args.timings:
        for s in result.steps:
            print(f"{s.seconds:8.3f} s  (verify {s.verify_seconds:.3f} s)  {s.pass_text}"
                  f"{'' if s.changed else '  (unchanged)'}", file=sys.stderr)
    if args.output and not args.quiet and not args.json:
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _host(path: str | None):
    """The host program of `--host FILE` (a sirius-host JSON document, as `sirius bench
    --prepare` writes host programs), for passes that need one; None without the option."""
    if path is None:
        return None
    from sirius.runtime.gpu.carry import host_from_json

    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SiriusError(f"--host {path}: cannot read it as JSON: {e}") from e
    return host_from_json(doc, f"--host {path}")


def _list_passes(as_json: bool) -> int:
    docs = [describe(cls) for _, cls in sorted(PASSES.items())]
    if as_json:
        print(json.dumps(docs, indent=1))
        return 0
    rows = []
    for d in docs:
        opts = "; ".join(f"{o['name']}: {o['accepts']}"
                         + ("" if o["required"] else f" (default {spell(o['default'])})")
                         for o in d["options"])  # type: ignore[union-attr]
        rows.append([str(d["name"]), opts or "-", str(d["summary"])])
    print_table("post-fusion passes", ["pass", "options", "what it does"], rows,
                left=("pass", "options", "what it does"))
    return 0


def register(sub) -> None:
    op = sub.add_parser("opt", help="run post-fusion passes on an LLVM IR file",
                        description="Run post-fusion passes (docs/passes.md) on an LLVM IR "
                        "file; the module is verified after every pass.")
    op.add_argument("input", nargs="?", metavar="IN.ll", help="LLVM IR text (- for stdin)")
    op.add_argument("-p", "--passes", default="", metavar="PIPELINE",
                    help="passes to run, e.g. 'llvm-opt{level=3,rounds=2}' (default: none: "
                    "parse, verify and print)")
    op.add_argument("-o", "--output", metavar="OUT.ll", help="write the module to OUT.ll")
    op.add_argument("--arch", type=arch, default=None,
                    help="GPU architecture (default: the module's target-cpu, else sm_80)")
    op.add_argument("--print-after", action="append", default=[], metavar="NAME",
                    help="print the module to stderr after pass NAME (repeatable; all: after "
                    "every pass)")
    op.add_argument("--verify-each", action="store_true",
                    help="also parse and verify the printed text after every pass in a fresh "
                    "LLVM context (the verifier runs after every pass in any case)")
    op.add_argument("--host", metavar="HOST.json",
                    help="the host program the module runs under (a sirius-host JSON "
                    "document), for passes that need it (host-constants)")
    op.add_argument("--timings", action="store_true", help="print each pass's time to stderr")
    op.add_argument("--list-passes", action="store_true", help="list the passes and options")
    op.add_argument("--json", action="store_true",
                    help="print a JSON object (passes, times, the module) and nothing else")
    op.add_argument("-q", "--quiet", action="store_true", help="no notes on stderr")
    op.set_defaults(func=_cmd_opt)
