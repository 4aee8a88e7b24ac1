"""`sirius import-tvm MODULE:FUNC -o DIR`: write a TVM model as a whole CUDA program.

TVM is imported only when the command runs, so `sirius` works without the `[tvm]` extra.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sirius.diagnostics import SiriusError


def register(sub) -> None:
    sp = sub.add_parser(
        "import-tvm", help="turn a TVM model into a whole CUDA program (needs apache-tvm)",
        description="FUNC() returns a sirius.frontend.tvm.TvmModel, (IRModule, parameter names "
                    "or {name: value}) or (tvm.relax.frontend.nn.Module, {input: (shape, dtype)}). "
                    "Writes DIR/NAME.cu (TVM's kernels and a generated host main) and "
                    "DIR/NAME.json (buffers, roles, launches); see docs/tvm-import.md.")
    sp.add_argument("model", metavar="MODULE:FUNC", help="e.g. scripts.gen_models:mlp")
    sp.add_argument("-o", "--out", required=True, type=Path, metavar="DIR")
    sp.add_argument("--name", help="program name (default: the model's name, else FUNC)")
    sp.add_argument("--arch", default="sm_80", help="GPU architecture (default sm_80)")
    sp.add_argument("--reference", action="store_true",
                    help="also write DIR/NAME.npz: inputs, parameters and TVM's llvm (CPU) "
                         "outputs")
    sp.set_defaults(func=_cmd_import_tvm)


def _cmd_import_tvm(args: argparse.Namespace) -> int:
    try:
        import tvm.relax  # noqa: F401
    except ImportError as e:
        raise SiriusError("sirius import-tvm needs apache-tvm 0.27: pip install -e '.[tvm]'") \
            from e
    from sirius.frontend.tvm import import_model, load_model, reference_outputs, write_npz

    model = load_model(args.model, args.name)
    command = f"sirius import-tvm {args.model} -o {args.out}"
    if args.name:
        command += f" --name {args.name}"
    if args.arch != "sm_80":
        command += f" --arch {args.arch}"
    result = import_model(model, args.out, command, args.arch)
    print(f"{result.cu_path}: {result.kernels} kernels, {result.launches} launches, "
          f"{result.buffers} buffers ({result.seconds:.1f} s)")
    print(f"{result.json_path}")
    if args.reference:
        path = args.out / f"{model.name}.npz"
        write_npz(path, reference_outputs(model, result.plan))
        print(path)
    return 0
