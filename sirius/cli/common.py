"""Arguments every command shares, and the clang flags they make."""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
import time


def program_args(sp: argparse.ArgumentParser, arch_default: str | None = "sm_80",
                 arch_help: str = "GPU architecture (default sm_80)") -> None:
    """PROGRAM.cu files, --arch, --entry, -I, -D, -Xclang/--clang-flag, --no-cache."""
    sp.add_argument("files", nargs="+", metavar="PROGRAM.cu")
    sp.add_argument("--arch", default=arch_default, type=arch, help=arch_help)
    sp.add_argument("--entry", default="main", help="host entry function (default main)")
    sp.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                    help="add an include directory")
    sp.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                    help="define a macro")
    sp.add_argument("-Xclang", "--clang-flag", dest="clang_flags", action="append", default=[],
                    metavar="ARG", help="pass ARG to clang (repeatable)")
    sp.add_argument("--args", dest="program_args", metavar='"A B ..."',
                    help="the program's command-line arguments (split like a shell does): "
                         "argc and argv are then known, and the program is specialised to them")
    sp.add_argument("--no-cache", action="store_true", help="recompile, ignore the IR cache")
    sp.add_argument("-q", "--quiet", action="store_true",
                    help="no progress on stderr (results and errors still print)")


def program_argv(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The words of --args, None when it is not given."""
    text = getattr(args, "program_args", None)
    if text is None:
        return None
    try:
        return tuple(shlex.split(text))
    except ValueError as e:
        from sirius.diagnostics import SiriusError

        raise SiriusError(f"--args {text!r}: {e}") from e


def clang_flags(args: argparse.Namespace) -> list[str]:
    return ([f"-I{d}" for d in args.include] + [f"-D{d}" for d in args.define]
            + list(args.clang_flags))


def arch(text: str) -> str:
    """An --arch value: sm_XY (sm_90a and sm_100f forms too)."""
    if not re.fullmatch(r"sm_\d{2,3}[af]?", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU architecture (e.g. sm_80, sm_90)")
    return text


class Reporter:
    """Progress on stderr. On a terminal a live status line (spinner, elapsed time, the current
    stage) above which each stage stays printed; otherwise plain `[  1.2 s] stage` lines.
    `-q` silences it; `done()` prints the total time."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.start = time.perf_counter()
        self.status = None
        self._last_tick = -math.inf
        if not quiet and sys.stderr.isatty():
            from rich.console import Console

            self.console = Console(stderr=True)
            self.status = self.console.status("")
            self.status.start()

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        line = f"[{time.perf_counter() - self.start:6.1f} s] {message}"
        if self.status is not None:
            self.console.print(line, highlight=False, markup=False)
            self.status.update(message)
        else:
            print(line, file=sys.stderr, flush=True)

    def tick(self, message: str, every: float = 5.0) -> None:
        """Frequent progress (a launch finished): on a terminal the live status line shows it;
        otherwise a plain line at most every `every` seconds."""
        if self.quiet:
            return
        if self.status is not None:
            self.status.update(message)
            return
        now = time.perf_counter()
        if now - self._last_tick >= every:
            self._last_tick = now
            print(f"[{now - self.start:6.1f} s] {message}", file=sys.stderr, flush=True)

    def done(self, what: str = "done") -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        if not self.quiet:
            print(f"{what} in {time.perf_counter() - self.start:.1f} s", file=sys.stderr,
                  flush=True)


def print_table(title: str, columns: list[str], rows: list[list[str]],
                left: tuple[str, ...] = ()) -> None:
    """A table on stdout: rich, fitted to the terminal's width, on a terminal; plain aligned
    columns (no box drawing, one row per line, easy to grep and cut) when piped."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title)
        for c in columns:
            t.add_column(c, justify="left" if c in left else "right")
        for r in rows:
            t.add_row(*r)
        Console().print(t)
        return
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        return "  ".join(s.ljust(w) if c in left else s.rjust(w)
                         for s, w, c in zip(cells, widths, columns, strict=True)).rstrip()

    print(f"# {title}")
    print(line(columns))
    for r in rows:
        print(line(r))


def report_args(sp: argparse.ArgumentParser, what: str) -> None:
    """--json and -o FILE for a command whose result is a report on stdout."""
    sp.add_argument("--json", action="store_true", help=f"print {what} as JSON (only JSON on "
                    "stdout; progress and notes go to stderr)")
    sp.add_argument("-o", "--output", dest="report_file", metavar="FILE",
                    help="write the report (or the JSON) to FILE instead of stdout")
