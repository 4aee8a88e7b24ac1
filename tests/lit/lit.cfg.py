# lit configuration for sirius's IR-transform tests: every `.ll` here has `; RUN:` lines piped
# into the PyPI `filecheck`. Run: `lit tests/lit` (the dev extra installs lit and filecheck).
import os
import sys

import lit.formats

config.name = "sirius"  # noqa: F821  (lit defines `config`)
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".ll"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py"]  # noqa: F821
_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config.substitutions.append(("%python", sys.executable))  # noqa: F821
# under pytest (tests/fusion/test_codegen_lit.py) `%sirius` is forked from the suite's fork
# server (tests/clizygote.py: no second of imports per RUN line); run by hand, a new interpreter
_zygote = os.environ.get("SIRIUS_TEST_ZYGOTE")
config.substitutions.append(  # noqa: F821
    ("%sirius", f"{sys.executable} {_root}/cliclient.py" if _zygote
     else f"{sys.executable} -m sirius.cli"))
config.environment["PYTHONPATH"] = _root  # noqa: F821
config.environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + \
    os.environ.get("PATH", "")  # noqa: F821
for var in ("HOME", "XDG_CACHE_HOME", "SIRIUS_CACHE_DIR", "CUDA_HOME", "CUDA_PATH",
            "SIRIUS_TEST_ZYGOTE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821
