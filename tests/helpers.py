"""Helpers shared by the tests: run `sirius inspect --json` and read its host model."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

from sirius.analysis.expr import evaluate_text

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"

# The TVM models whose tests take 20 s or more each on 2 cores (fusing, tracing or running
# them): `make test` leaves them to `make test-all` (marker `slow`); the smaller models of the
# corpus exercise the same code.
LARGE_TVM = frozenset({"bert_base", "bert_layer", "deepspeech2", "lstm_large", "nasnet",
                       "resnext50"})
# models whose every check takes 8-25 s on 2 cores (the paper's 3-layer mlp: big GEMMs that stay
# 3 -> 3): make test keeps their fast checks, the verify/trace/ptxas ones are in make test-all
MEDIUM_TVM = frozenset({"mlp"})


def by_size(items: list, key=lambda item: item, medium: bool = False) -> list:
    """`items` for pytest.mark.parametrize, the large TVM models among them marked slow, and
    the MEDIUM_TVM ones too where `medium` (`key(item)` is a path or name whose stem names the
    model)."""
    import pytest

    slow = LARGE_TVM | MEDIUM_TVM if medium else LARGE_TVM
    return [pytest.param(i, marks=pytest.mark.slow) if Path(str(key(i))).stem in slow
            else i for i in items]


def inspect_doc(program: str | Path, *extra: str) -> dict:
    """The `sirius inspect --json` document of a program (in-process, same code as the CLI)."""
    from sirius.analysis.program import inspect_document

    path = Path(program)
    if not path.is_absolute() and not path.exists():
        path = KERNELS / path
    return inspect_document([path], *extra)


def run_cli(*args: str, cwd: Path = ROOT,
            env_changes: dict[str, str | None] | None = None) -> subprocess.CompletedProcess:
    """Run the real `sirius` command in a subprocess (exit codes and stderr are tested);
    `env_changes`: variables to set, or to remove (None), for this run."""
    env = dict(os.environ)
    for k, v in (env_changes or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return _ZYGOTE.run([sys.executable, "-m", "sirius.cli", *args], [str(a) for a in args],
                       Path(cwd), env)


class _Zygote:
    """The test process's fork server for `sirius` commands (tests/clizygote.py), started at
    its first command: a forked child per command instead of a new interpreter (a second of
    imports each). `path()` is its socket (also for the lit tests' `%sirius`)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.dir: str | None = None
        self.failed: str | None = None
        self.lock = threading.Lock()

    def path(self) -> str | None:
        """The server's socket, the server started first if it is not running; None under
        $SIRIUS_TEST_FRESH_CLI, or (with a warning, once) where it cannot start: the commands
        then start interpreters."""
        if os.environ.get("SIRIUS_TEST_FRESH_CLI"):
            return None
        with self.lock:
            if self.failed is None and (self.proc is None or self.proc.poll() is not None):
                self._start()
            return None if self.failed else os.path.join(self.dir, "s")

    def _start(self) -> None:
        self.stop()
        base = tempfile.gettempdir()  # a socket's path has at most 107 bytes
        self.dir = tempfile.mkdtemp(prefix="sirius-z", dir=base if len(base) < 64 else "/tmp")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("clizygote.py")),
             os.path.join(self.dir, "s")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if self.proc.stdout.readline().strip() != "ready":
            self.failed = f"exit status {self.proc.wait()}"
            self.stop()
            warnings.warn("the sirius fork server (tests/clizygote.py) did not start "
                          f"({self.failed}): the tests start an interpreter per command",
                          stacklevel=3)
            return
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        if self.proc is not None:
            self.proc.stdout.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = self.dir = None

    def run(self, cmd: list[str], args: list[str], cwd: Path,
            env: dict[str, str]) -> subprocess.CompletedProcess:
        from tests.cliclient import request

        path = self.path()
        if path is None:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                open(os.devnull, "rb") as null:
            rc = request(path, args, str(cwd.resolve()), env,
                         (null.fileno(), out.fileno(), err.fileno()))
            return subprocess.CompletedProcess(cmd, rc, _text(out), _text(err))


def _text(f) -> str:
    """What `subprocess.run(text=True)` makes of a stream: universal newlines."""
    f.seek(0)
    data = f.read().decode()
    return data.replace("\r\n", "\n").replace("\r", "\n")


def zygote_socket() -> str | None:
    """The fork server's socket for a subprocess that runs `sirius` through
    tests/cliclient.py (None where the tests start real interpreters)."""
    return _ZYGOTE.path()


_ZYGOTE = _Zygote()


def ev(x: int | str | None, **env: int) -> int | None:
    """Evaluate an expression of the JSON model (a number or an isl-syntax string)."""
    return None if x is None else evaluate_text(x, env)


def address(ref: dict, **env: int) -> tuple[str, int]:
    """(buffer, byte offset) of a device address in the model, at loop-variable values `env`."""
    if "rotating" in ref:
        rot = ref["rotating"]
        ref = rot["choices"][ev(rot["index"], **env) % len(rot["choices"])]
    return ref["buffer"], ev(ref["offset"], **env)


def unroll(ops: list[dict], env: dict[str, int] | None = None):
    """Yield (op, env) for every non-loop op in execution order, loops expanded (counted only)."""
    env = dict(env or {})
    for op in ops:
        if op["op"] != "loop":
            yield op, dict(env)
            continue
        if op["hi"] is None:
            raise ValueError("cannot unroll an opaque loop")
        v, hi, step = ev(op["lo"], **env), ev(op["hi"], **env), op["step"]
        while (v < hi) if step > 0 else (v > hi):
            yield from unroll(op["body"], {**env, op["var"]: v})
            v += step


def launch_trace(doc: dict) -> list[tuple]:
    """Every executed launch as (kernel, grid, block, smem, args) with loops expanded; a buffer
    argument is (buffer, offset), a scalar its value."""
    out = []
    for op, env in unroll(doc["host"]["ops"]):
        if op["op"] != "launch":
            continue
        args = []
        for a in op["args"]:
            if a["kind"] == "buffer":
                args.append(address(a, **env))
            elif a["kind"] == "scalar":
                v = a["value"]
                args.append(ev(v, **env) if isinstance(v, str) else v)
            else:
                args.append(None)
        out.append((op["kernel"], tuple(ev(g, **env) for g in op["grid"]),
                    tuple(ev(b, **env) for b in op["block"]), ev(op["smem"], **env), tuple(args)))
    return out


def structure(ops: list[dict]) -> list:
    """The op kinds as a nested list, loops as ("loop", var, lo, hi, step, [body...])."""
    out: list = []
    for op in ops:
        if op["op"] == "loop":
            out.append(("loop", op["var"], op["lo"], op["hi"], op["step"], structure(op["body"])))
        elif op["op"] == "launch":
            out.append(("launch", op["kernel"]))
        elif op["op"] == "copy":
            out.append(("copy", op["kind"]))
        else:
            out.append((op["op"],))
    return out


def load_json(text: str) -> dict:
    return json.loads(text)


def sigint_default() -> None:
    """`preexec_fn` of a child that a test interrupts: SIGINT as a terminal gives it. A child
    inherits an ignored SIGINT, and some test runner workers have one (the full suite's
    Ctrl-C tests saw children that ignored it)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
