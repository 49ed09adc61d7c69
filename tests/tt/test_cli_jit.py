"""The CLI and TileLang's jit kernels: `tilelang-tt compile FILE.py:FUNC --arg NAME=VALUE` for @tilelang.jit
functions (lazy and eager style) and kernel factories, `--target` as tilelang.compile takes it, `run` and `check`
on a .ttpkg package, `--version`, and progress drawn only on a terminal's stderr.
"""

import io
import json
import shutil
import struct
import time

import numpy as np
import pytest
import tilelang

import tilelang_tt
from tests.tt.test_files import _cli
from tests.tt.test_files import _one_line_error as _error
from tilelang_tt import cli, progress

KERNELS = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def scale(M, N, factor=2.0, block=32, dtype="bfloat16"):
    @T.prim_func
    def scaled(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                C[by * block + i, bx * block + j] = A[by * block + i, bx * block + j] * factor
    return scaled


@tilelang.jit(target="tt -arch=blackhole -max_cores=2")
def scale_bh(M, N):
    return scale.get_tir(M, N)


@tilelang.jit
def add(A, B, C, block: int = 32):
    M, N = T.const("M N")
    A: T.Tensor[[M, N], "float32"]
    B: T.Tensor[[M, N], "float32"]
    C: T.Tensor[[M, N], "float32"]
    with T.Kernel(N // block, M // block, threads=128) as (bx, by):
        for i, j in T.Parallel(block, block):
            C[by * block + i, bx * block + j] = A[by * block + i, bx * block + j] + B[by * block + i, bx * block + j]


def factory(M, N=64):
    return scale.get_tir(M, N, factor=0.5)


@T.prim_func
def fixed(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, 1, threads=128) as (bx, by):
        for i, j in T.Parallel(32, 32):
            C[i, j] = A[i, j]
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernels") / "jit_kernels.py"
    path.write_text(KERNELS)
    return path


def _plan(out):
    return json.loads((out / "tt.plan.json").read_text())


def _shapes(plan):
    return {b["name"]: b["shape"] for b in plan["buffers"]}


def _f32_bits(x: float) -> str:
    return f"0x{struct.unpack('<I', struct.pack('<f', x))[0]:08x}u"


# ---- compile: jit functions and factories with --arg --------------------------------------------------------
def test_jit_kernel_compiles_with_its_arguments(kernels, tmp_path, capsys):
    out = tmp_path / "scale"
    rc, stdout, err = _cli(capsys, "compile", f"{kernels}:scale", "--out", out, "--arg", "M=64", "--arg", "N=96",
                           "--arg", "factor=3.0")
    assert rc == 0, err
    assert _shapes(_plan(out)) == {"A": [64, 96], "C": [64, 96]}
    compute = (out / "kernels" / "compute.cpp").read_text()
    assert f"mul_unary_tile(0, {_f32_bits(3.0)})" in compute          # factor=3.0 reached the kernel
    assert _f32_bits(2.0) not in compute                               # not the default
    assert f"wrote {out}" in stdout


def test_literals_strings_and_factories(kernels, tmp_path, capsys):
    out = tmp_path / "f32"       # dtype=float32 is not a Python literal: the text itself
    rc, _, err = _cli(capsys, "compile", f"{kernels}:scale", "--out", out, "--arg", "M=32", "--arg", "N=32",
                      "--arg", "dtype=float32", "--arg", "block=32")
    assert rc == 0, err
    assert {b["dtype"] for b in _plan(out)["buffers"]} == {"float32"}
    out = tmp_path / "factory"   # a plain function returning a prim_func: its parameters bind the same way
    rc, _, err = _cli(capsys, "compile", f"{kernels}:factory", "--out", out, "--arg", "M=96")
    assert rc == 0, err
    assert _shapes(_plan(out)) == {"A": [96, 64], "C": [96, 64]}
    assert cli.parse_bindings(["t=(2, 4)", "s='x'", "f=0.5", "n=None", "d=float16"]) == {
        "t": (2, 4), "s": "x", "f": 0.5, "n": None, "d": "float16"}


def test_eager_jit_kernel_binds_its_t_const_dimensions(kernels, tmp_path, capsys):
    out = tmp_path / "add"
    rc, _, err = _cli(capsys, "compile", f"{kernels}:add", "--out", out, "--arg", "M=64", "--arg", "N=96")
    assert rc == 0, err
    assert _shapes(_plan(out)) == {"A": [64, 96], "B": [64, 96], "C": [64, 96]}


@pytest.mark.parametrize("func, args, message", [
    ("scale", ["M=64"], "scale needs --arg N=VALUE; scale accepts M, N, factor=2.0, block=32, dtype='bfloat16'"),
    ("scale", ["M=64", "N=64", "K=3"],
     "--arg K: scale has no parameter 'K'; scale accepts M, N, factor=2.0, block=32, dtype='bfloat16'"),
    ("factory", [], "factory needs --arg M=VALUE; factory accepts M, N=64"),
    ("factory", ["M=64", "tile=2"], "--arg tile: factory has no parameter 'tile'; factory accepts M, N=64"),
    ("add", ["M=64"], "add needs --arg N=VALUE (a T.const dimension); add accepts block=32, M, N"),
    ("add", ["M=64", "N=64", "A=1"], "--arg A: A is a tensor parameter of add, given when the kernel is called"),
    ("fixed", ["M=64"], "fixed is a T.prim_func: it has no parameters for --arg (M)"),
    ("scale", ["M"], "--arg 'M' is not NAME=VALUE"),
    ("scale", ["M=64", "M=32"], "--arg M is given twice"),
])
def test_missing_or_unknown_argument_is_one_line_exit_2(kernels, tmp_path, capsys, func, args, message):
    argv = [x for a in args for x in ("--arg", a)]
    rc, _, err = _cli(capsys, "compile", f"{kernels}:{func}", "--out", tmp_path / "o", *argv)
    assert rc == cli.EXIT_INPUT == 2
    assert message in _error(err)
    assert not (tmp_path / "o").exists()


# ---- --target ---------------------------------------------------------------------------------------------------
def test_target_string_reaches_the_plan(kernels, tmp_path, capsys):
    out = tmp_path / "bh"
    rc, stdout, err = _cli(capsys, "compile", f"{kernels}:scale", "--out", out, "--arg", "M=64", "--arg", "N=128",
                           "--target", "tt -arch=blackhole -max_cores=3 -math_fidelity=LoFi")
    assert rc == 0, err
    assert "on blackhole" in stdout and "3 cores" in stdout and "math fidelity LoFi" in stdout
    plan = _plan(out)
    assert plan["device"]["arch"] == "blackhole" and plan["device"]["max_cores"] == 3
    assert plan["math_fidelity"] == "LoFi"
    out = tmp_path / "json"      # the dict form, and --max-cores beside a --target that does not state it
    rc, _, err = _cli(capsys, "compile", f"{kernels}:scale", "--out", out, "--arg", "M=64", "--arg", "N=128",
                      "--target", '{"kind": "tt", "arch": "blackhole"}', "--max-cores", "2")
    assert rc == 0, err
    assert _plan(out)["device"]["arch"] == "blackhole" and _plan(out)["device"]["max_cores"] == 2


def test_jit_functions_own_tt_target_is_the_default(kernels, tmp_path, capsys):
    rc, _, err = _cli(capsys, "compile", f"{kernels}:scale_bh", "--out", tmp_path / "a", "--arg", "M=64",
                      "--arg", "N=64")
    assert rc == 0, err
    assert (_plan(tmp_path / "a")["device"]["arch"], _plan(tmp_path / "a")["device"]["max_cores"]) == ("blackhole", 2)
    rc, _, err = _cli(capsys, "compile", f"{kernels}:scale_bh", "--out", tmp_path / "b", "--arg", "M=64",
                      "--arg", "N=64", "--target", "tt")           # --target wins over the decorator's
    assert rc == 0, err
    assert _plan(tmp_path / "b")["device"]["arch"] == "wormhole_b0"


@pytest.mark.parametrize("argv, message", [
    (["--target", "cuda"], "--target: tt target: 'cuda' is not a tt target"),
    (["--target", "tt -arch=grayskull"], "unknown arch 'grayskull'"),
    (["--target", "tt -warp_size=32"], "unknown option 'warp_size'"),
    (["--target", "tt -arch=blackhole", "--arch", "wormhole_b0"],
     "--arch wormhole_b0 contradicts --target's arch=blackhole"),
    (["--target", "tt -max_cores=4", "--max-cores", "2"], "--max-cores 2 contradicts --target's max_cores=4"),
    (["--target", "{kind: tt"], "is not JSON"),
])
def test_bad_target_is_one_line_exit_2(kernels, tmp_path, capsys, argv, message):
    rc, _, err = _cli(capsys, "compile", f"{kernels}:scale", "--out", tmp_path / "o", "--arg", "M=64",
                      "--arg", "N=64", *argv)
    assert rc == 2 and message in _error(err)
    assert not (tmp_path / "o").exists()


# ---- run / check on a package -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def package(tmp_path_factory):
    import tilelang.language as T

    @T.prim_func
    def triple(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 3.0

    kernel = tilelang.compile(triple, out_idx=[-1], target={"kind": "tt", "max_cores": 2})
    return kernel.export(tmp_path_factory.mktemp("pkg") / "triple.ttpkg")


def test_run_accepts_a_package(package, tmp_path, capsys):
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 7
    np.save(tmp_path / "a.npy", a)
    rc, stdout, err = _cli(capsys, "run", package, "--input", f"A={tmp_path / 'a.npy'}", "--out", tmp_path / "o")
    assert rc == 0, err
    assert "ran triple on tt-sim" in stdout
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "C.npy"), a * np.float32(3.0))


def test_check_accepts_a_package_and_a_damaged_one_exits_2(package, tmp_path, capsys):
    rc, stdout, err = _cli(capsys, "check", package)
    assert rc == 0, err
    assert "PASS host.cpp" in stdout and "all checks passed" in stdout
    damaged = tmp_path / "damaged.ttpkg"
    data = bytearray(package.read_bytes())
    data[-100] ^= 0xFF
    damaged.write_bytes(bytes(data))
    for command in (["check", damaged], ["run", damaged, "--seed", "0", "--out", tmp_path / "o"]):
        rc, _, err = _cli(capsys, *command)
        assert rc == 2 and "content hash mismatch" in _error(err), command


def test_check_names_the_failing_artifact_among_several(package, tmp_path, capsys):
    copy = tmp_path / "broken"
    shutil.copytree(cli.artifact_dir(package), copy)
    host = copy / "host.cpp"
    call = "distributed::EnqueueMeshWorkload(cq, workload, false);"
    assert call in host.read_text()
    host.write_text(host.read_text().replace(call, "EnqueueProgram(cq, program, false);"))
    rc, stdout, err = _cli(capsys, "check", package, copy)
    assert rc == 1
    assert f"== {package}" in stdout and f"== {copy}" in stdout
    assert stdout.count("all checks passed") == 1            # the package's, not the broken copy's
    assert _error(err).startswith(f"error: {copy}: ") and "EnqueueProgram" in err


# ---- --version ----------------------------------------------------------------------------------------------
def test_version(capsys):
    rc, stdout, err = _cli(capsys, "--version")
    assert rc == 0 and err == ""
    assert stdout == f"tilelang-tt {tilelang_tt.__version__}\n"


# ---- progress -----------------------------------------------------------------------------------------------
class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal(monkeypatch):
    plain = io.StringIO()
    monkeypatch.setattr("sys.stderr", plain)
    assert list(progress.bar(range(3), desc="checking")) == [0, 1, 2]
    with progress.spinner("kernel on tt-sim", after=0.0):
        time.sleep(0.4)
    assert plain.getvalue() == ""                       # captured output never holds a bar
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert list(progress.bar(range(3), desc="checking")) == [0, 1, 2]
    assert "checking" in term.getvalue() and "3/3" in term.getvalue()
    with progress.spinner("kernel on tt-sim", after=0.0):
        time.sleep(0.4)
    assert "kernel on tt-sim" in term.getvalue()
    term.truncate(0)
    term.seek(0)
    with progress.spinner("quick", after=2.0):          # a run under the delay shows nothing
        pass
    assert term.getvalue() == ""
