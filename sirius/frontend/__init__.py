"""The only code that reads CUDA source: clang invocation, compile cache, Program."""

from sirius.frontend.compile import compile_program
from sirius.frontend.program import Program

__all__ = ["Program", "compile_program"]
