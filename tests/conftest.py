import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# Under pytest-xdist every core already runs a test: a forward-order launch then uses one worker
# thread (sirius.runtime.cpu.device.default_jobs), not one per core (each worker thread
# JIT-compiles the module again, and spinning threads of two tests share two cores). Tests that
# are about several workers ask for them by `jobs=`.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("SIRIUS_JOBS", "1")
    # `sirius verify` without -j starts the original's run during the fusion and then runs the
    # fused orders in a worker each (4 processes): the xdist workers already use every core, so
    # the suite keeps 2 (the tests of the head start turn it back on)
    os.environ.setdefault("SIRIUS_HEAD_START", "0")
    # `sirius verify` without -j runs its orders in a pool of worker processes (a fork server
    # and one worker per core, each importing sirius and compiling the modules): for the small
    # programs of the suite that costs more than the runs; the tests of the pool ask for it
    os.environ.setdefault("SIRIUS_VERIFY_JOBS", "1")


# Tests that summarise what other tests recorded go last, so that under pytest-xdist (whose load
# scheduler hands out tests in collection order) they find the records instead of redoing the
# work: test_fusion_happens reads the launch counts test_fused_program wrote for each seed.
LAST = ("tests/randprog/test_fuse_random.py::test_fusion_happens",)


# Tests of one corpus program in test_fuse_corpus.py share its fusion (`fused`, cached per
# process): with `--dist loadgroup` (make test) they run in the same worker, so each program is
# fused once, not once per worker.
SHARED_FUSION = "tests/fusion/test_fuse_corpus.py::"


# A random program's fusions (plain, then as `grid` and `counters` megakernels) run in one worker
# one after the other, so that they share its analysis (tests/randprog/fuse_check.py).
SHARED_ANALYSIS = ("tests/randprog/test_fuse_random.py::test_fused_program[",
                   "tests/randprog/test_fuse_random.py::test_fused_program_as_megakernels[")


@pytest.hookimpl(tryfirst=True)  # before xdist's hook reads the xdist_group marks
def pytest_collection_modifyitems(session, config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.nodeid.startswith(SHARED_FUSION) and isinstance(params.get("name"), str):
            item.add_marker(pytest.mark.xdist_group(Path(params["name"]).name))
        elif item.nodeid.startswith(SHARED_ANALYSIS) and isinstance(params.get("seed"), int):
            item.add_marker(pytest.mark.xdist_group(f"randprog-{params['seed']}"))
    items.sort(key=lambda item: item.nodeid in LAST)


def pytest_configure(config):
    """Under `--dist loadgroup` xdist groups a test by the `@group` suffix it adds to its node
    id; pytest 9.2 drops that suffix and the groups silently stop working (pytest-xdist issue
    1386: every shared fusion then runs once per worker and make test takes minutes longer).
    Refuse to start instead."""
    if getattr(config.option, "dist", None) == "loadgroup" and \
            tuple(pytest.version_tuple[:2]) >= (9, 2) and not hasattr(config, "workerinput"):
        raise pytest.UsageError(
            f"--dist loadgroup needs pytest < 9.2 (this is {pytest.__version__}, which ignores "
            "xdist_group: pytest-xdist issue 1386); `make setup` installs the pinned one")
