"""Real programs' front end (issue 15 item 6): constructs of old public benchmark programs that
sirius either handles as a user expects or refuses naming file:line, the construct and what to
change (exit 2, never a traceback). The programs are in tests/frontend/realprog/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import run_cli

HERE = Path(__file__).resolve().parent / "realprog"


def _run(tmp_path: Path, *files: str) -> dict[str, np.ndarray]:
    out = tmp_path / "out.npz"
    r = run_cli("run", "-q", *(str(HERE / f) for f in files), "--save", str(out))
    assert r.returncode == 0, r.stderr
    return dict(np.load(out))


def _refused(*files: str) -> str:
    r = run_cli("inspect", *(str(HERE / f) for f in files))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stderr


# 1. .c host files are C -----------------------------------------------------------------------

def test_c_host_file_is_compiled_as_c(tmp_path):
    """`int new` and malloc without a cast are C, not C++: the .c file compiles, its call of
    the .cu file's extern "C" function is followed, and the kernel's result is 3 x its input."""
    saved = _run(tmp_path, "cmain_host.c", "cmain_kernels.cu")
    assert saved["d.out"].shape == (256,)
    np.testing.assert_allclose(saved["d.out"], 3.0 * saved["d.in"], rtol=1e-6)


def test_c_file_with_cuda_code_is_refused():
    """A kernel definition in a .c file: named with its line (the <<< in a comment and in a
    string are not code), and the fix (rename to .cu) is given."""
    err = _refused("launch_in_c.c", "cmain_kernels.cu")
    assert "launch_in_c.c:3:1" in err
    assert "uses __global__, which is CUDA C++, but a .c file is compiled as C" in err
    assert "rename it to .cu" in err


def test_c_file_alone_is_refused():
    err = _refused("cmain_host.c")
    assert "no CUDA source among the inputs" in err


# 2. cudaDeviceProp fields CUDA 13 removed -------------------------------------------------------

def test_removed_device_properties_in_informational_code(tmp_path):
    """clockRate, deviceOverlap, computeMode, memoryClockRate, kernelExecTimeoutEnabled printed
    by main: the program compiles and runs (the printf is host code sirius skips); a = 0 + 1."""
    saved = _run(tmp_path, "devprops.cu")
    np.testing.assert_array_equal(saved["a.out"], np.ones(512, np.int32))


def test_removed_device_properties_in_a_c_host_file(tmp_path):
    saved = _run(tmp_path, "devprops_host.c", "devprops_kernels.cu")
    np.testing.assert_array_equal(saved["a.out"], np.ones(512, np.int32))


def test_device_property_as_a_grid_is_refused():
    """A grid computed from prop.clockRate: its value is not known, so the model refuses."""
    err = _refused("devprops_size.cu")
    assert "devprops_size.cu:8" in err
    assert "the grid of inc (x) is not known: a device property (cudaGetDeviceProperties())" \
        in err


# 3. legacy texture references -------------------------------------------------------------------

def test_texture_reference_is_refused():
    err = _refused("texref.cu")
    assert "texref.cu:2:1" in err
    assert "texture references were removed in CUDA 12 and sirius does not support textures" \
        in err


# 4. constants set by host helpers that do no GPU work -------------------------------------------

def test_constant_set_by_a_helper_through_a_pointer():
    """setup(&n, verbose), not inlined, stores n = 1024 (and prints it under a condition
    sirius cannot decide): the call is followed, n is known."""
    from tests.helpers import ev, inspect_doc

    doc = inspect_doc(HERE / "helper_size.cu")
    assert [b["bytes"] for b in doc["host"]["buffers"]] == [4096]
    (launch,) = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    assert [ev(g) for g in launch["grid"]] == [4, 1, 1]


def test_globals_set_by_a_helper_with_a_fill_loop(tmp_path):
    """setup() sets the global N and fills the global `data` in a loop that calls rand() and
    reloads `data` every iteration: the loop writes only the heap block `data` points to, so N
    stays known (it used to be forgotten: "computed by host code sirius skips"); a = 2 b."""
    saved = _run(tmp_path, "helper_global.cu")
    assert saved["a.out"].shape == (1024,)
    np.testing.assert_allclose(saved["a.out"], 2.0 * saved["b.in"], rtol=1e-6)


def test_size_read_by_a_helper_is_refused_naming_it():
    """read_size() may overwrite n with fscanf: refused, naming the helper and its line."""
    err = _refused("helper_unknown.cu")
    assert "helper_unknown.cu:16" in err
    assert "the allocation size of 'a' is not a compile-time constant (computed by host code " \
        "sirius skips (line 11, in read_size()))" in err


# 5. copies to and from __constant__/__device__ variables ------------------------------------------

def test_memcpy_to_and_from_symbol_run_with_the_values_copied():
    """symbol.cu: h (4 floats) -> __constant__ coef; apply scales a[i] by coef[i % 4] and sets
    the __device__ total[i] = a[i] + 1; total comes back with cudaMemcpyFromSymbol. The
    executor's seeded host data is the reference: what `h` held is what the kernel saw."""
    from sirius.runtime.interpreter import run_program

    r = run_program([HERE / "symbol.cu"])
    h = r.host["h"][:16].view(np.float32)
    np.testing.assert_array_equal(r.final["@coef"], h)
    want = r.initial["a"] * h[np.arange(256) % 4]
    np.testing.assert_array_equal(r.final["a"], want)
    np.testing.assert_array_equal(r.final["@total"], want + np.float32(1))
    # ... and the host array the copy from the symbol filled holds the same bytes
    np.testing.assert_array_equal(r.host["_ZZ4mainE2ht"].view(np.float32), want + 1)
    assert r.outputs() == ["a", "@total"]


def test_symbol_copies_in_the_host_model_name_the_variables():
    from tests.helpers import inspect_doc

    host = inspect_doc(HERE / "symbol.cu")["host"]
    assert host["symbols"] == [
        {"name": "@coef", "variable": "coef", "bytes": 16, "space": "__constant__",
         "elem": "float"},
        {"name": "@total", "variable": "total", "bytes": 1024, "space": "__device__",
         "elem": "float"}]
    copies = [op for op in host["ops"] if op["op"] == "copy"]
    assert (copies[0]["kind"], copies[0]["dst"], copies[0]["bytes"]) == \
        ("H2D", {"buffer": "@coef", "offset": 0}, 16)
    assert copies[0]["loc"].endswith("symbol.cu:10:3")
    assert (copies[-1]["kind"], copies[-1]["src"]) == ("D2H", {"buffer": "@total", "offset": 0})
    text = run_cli("inspect", str(HERE / "symbol.cu")).stdout
    assert "copy   H2D __constant__ coef <- h (16 B)" in text
    assert "<- __device__ total (1024 B)" in text


def test_memcpy_from_a_static_device_variable(tmp_path):
    """`static __device__ int count[64]` (IR name _ZL5count), count[i] = i by tally."""
    saved = _run(tmp_path, "symbol_from.cu")
    np.testing.assert_array_equal(saved["@_ZL5count.out"], np.arange(64, dtype=np.int32))
    from tests.helpers import inspect_doc

    (sym,) = inspect_doc(HERE / "symbol_from.cu")["host"]["symbols"]
    assert (sym["name"], sym["variable"], sym["space"]) == ("@_ZL5count", "count", "__device__")


def test_symbol_copy_past_the_variable_is_refused_naming_it():
    """32 bytes into the 16-byte coef: refused at the call (CUDA copies nothing there)."""
    err = _refused("symbol_oob.cu")
    assert "symbol_oob.cu:7:3" in err
    assert "cudaMemcpyToSymbol copies 32 bytes to the __constant__ variable 'coef', which has " \
        "16 bytes" in err
    assert "bytes [0, 32) are outside [0, 16)" in err


def test_an_element_as_the_symbol_adds_its_byte_offset():
    from tests.helpers import inspect_doc

    host = inspect_doc(HERE / "symbol_bad.cu")["host"]
    (copy,) = [op for op in host["ops"] if op["op"] == "copy"]
    assert (copy["kind"], copy["dst"], copy["bytes"]) == \
        ("H2D", {"buffer": "@coef", "offset": 8}, 8)


@pytest.mark.parametrize("define, line, message", [
    ("HOST_ARRAY", 10, "the symbol of cudaMemcpyToSymbol is 'hostarr', which is not a "
                       "__device__ or __constant__ variable of the device code"),
    ("WRONG_WAY", 12, "cudaMemcpyToSymbol with kind cudaMemcpyDeviceToHost: a copy to the "
                      "__constant__ variable 'coef' is cudaMemcpyHostToDevice or "
                      "cudaMemcpyDeviceToDevice"),
    ("DEVICE_SOURCE", 14, "cudaMemcpyToSymbol with kind cudaMemcpyHostToDevice, but its "
                          "source is device memory"),
])
def test_bad_symbol_copies_are_refused_at_their_line(define, line, message):
    r = run_cli("inspect", "-D", define, str(HERE / "symbol_bad.cu"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"symbol_bad.cu:{line}:3: error: {message}" in r.stderr
