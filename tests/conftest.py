import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# Tests that summarise what other tests recorded go last, so that under pytest-xdist (whose load
# scheduler hands out tests in collection order) they find the records instead of redoing the
# work: test_fusion_happens reads the launch counts test_fused_program wrote for each seed.
LAST = ("tests/randprog/test_fuse_random.py::test_fusion_happens",)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.nodeid in LAST)
