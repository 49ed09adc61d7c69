"""`tilelang-tt run ARTIFACT_DIR`: an artifact run on tt-sim from .npy inputs, outputs and report written to --out.

A compiled GEMM run through the CLI matches torch, and so do GEMMs with Bfp8_b and packed int4 weights; sabotaged
artifacts exit 1 with the sanitizer's message; bad inputs exit 2 with a message naming the input and the problem.
"""

import json
import re
import shutil

import numpy as np
import pytest
import tilelang
import torch

from examples import dequant_kernels as D
from examples import kernels as K
from tests.tt.test_dequant import bf16_away, check_model, ref_quantize, ref_unpack_int4, rel_fro, trunc
from tilelang_tt import cli

M, N, KD = 64, 96, 128


@pytest.fixture(scope="module")
def gemm_dir():
    return tilelang.compile(K.design_gemm(M, N, KD), target={"kind": "tt", "max_cores": 4}).artifact_dir


def _run(capsys, *argv):
    rc = cli.main(["run", *map(str, argv)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _bf16(x: torch.Tensor) -> np.ndarray:
    return x.to(torch.bfloat16).float().numpy()


def test_gemm_from_npy_matches_torch(gemm_dir, tmp_path, capsys):
    torch.manual_seed(3)
    a, b = _bf16(torch.randn(M, KD)), _bf16(torch.randn(KD, N))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "out"
    rc, stdout, err = _run(capsys, gemm_dir, "--input", f"A={tmp_path / 'a.npy'}", "--input",
                           f"B={tmp_path / 'b.npy'}", "--out", out)
    assert rc == 0, err
    assert f"wrote C: {out / 'C.npy'}" in stdout
    c = np.load(out / "C.npy")
    assert c.shape == (M, N) and c.dtype == np.float32
    ref = torch.from_numpy(a) @ torch.from_numpy(b)
    err_max = (torch.from_numpy(c) - ref).abs().max()
    assert err_max <= (KD // 32) * 2**-8 * ref.abs().max(), err_max
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] is True and report["strict"] is True
    assert report["inputs"]["A"] == str((tmp_path / "a.npy").resolve())
    assert report["report"]["total"]["matmul_tiles"] == (M // 32) * (N // 32) * (KD // 32)
    np.testing.assert_array_equal(np.load(out / "inputs" / "A.npy"), a)


def test_seeded_random_inputs_are_reproducible(gemm_dir, tmp_path, capsys):
    runs = {}
    for name, seed in (("s1", 7), ("s1_again", 7), ("s2", 8)):
        rc, _, err = _run(capsys, gemm_dir, "--seed", seed, "--out", tmp_path / name)
        assert rc == 0, err
        runs[name] = np.load(tmp_path / name / "C.npy")
    np.testing.assert_array_equal(runs["s1"], runs["s1_again"])
    assert not np.array_equal(runs["s1"], runs["s2"])
    a, b = (np.load(tmp_path / "s1" / "inputs" / f"{n}.npy") for n in "AB")
    ref = torch.from_numpy(_bf16(torch.from_numpy(a))) @ torch.from_numpy(_bf16(torch.from_numpy(b)))
    assert (torch.from_numpy(runs["s1"]) - ref).abs().max() <= (KD // 32) * 2**-8 * ref.abs().max()
    assert json.loads((tmp_path / "s2" / "report.json").read_text())["inputs"]["B"] == "random normal, seed 8"


def _sabotaged(gemm_dir, tmp_path, pattern):
    broken = tmp_path / "broken"
    shutil.copytree(gemm_dir, broken)
    reader = broken / "kernels" / "reader.cpp"
    text = reader.read_text()
    cut = re.sub(pattern, "", text, flags=re.M)
    assert cut != text, f"{pattern!r} matches nothing in the generated reader"
    reader.write_text(cut)
    return broken


def test_deleted_push_back_exits_with_sanitizer_message(gemm_dir, tmp_path, capsys):
    broken = _sabotaged(gemm_dir, tmp_path, r"^.*\bcb_push_back\(.*\n")
    rc, _, err = _run(capsys, broken, "--seed", 1, "--out", tmp_path / "out")
    assert rc == 1
    assert re.search(r"(?s)error: tt-sim \(gemm\): deadlock: every unfinished kernel is blocked.*cb_wait_front", err), err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["ok"] is False and "deadlock" in report["error"]
    assert not (tmp_path / "out" / "C.npy").exists()


def test_deleted_read_barrier_exits_with_sanitizer_message(gemm_dir, tmp_path, capsys):
    broken = _sabotaged(gemm_dir, tmp_path, r"^.*\bnoc_async_read_barrier\(\);.*\n")
    rc, _, err = _run(capsys, broken, "--seed", 1, "--out", tmp_path / "out")
    assert rc == 1, "the emulator ran a reader without its read barrier to completion"
    # the emulator names the missing barrier (its wording is being made stricter: match what it must mention)
    assert re.search(r"error: tt-sim \(gemm\): .*reader.*kernels/reader\.cpp:\d+: "
                     r".*(noc_async_read_barrier|NoC read)", err), err


def test_lenient_flag_is_passed_on(gemm_dir, tmp_path, capsys):
    rc, _, err = _run(capsys, gemm_dir, "--seed", 1, "--no-strict", "--out", tmp_path / "out")
    assert rc == 0, err
    assert json.loads((tmp_path / "out" / "report.json").read_text())["strict"] is False


@pytest.mark.parametrize("case", [
    ("missing_file", lambda d: ["--input", f"A={d / 'nope.npy'}"],
     r"error: tilelang-tt run: input A: \S*nope\.npy does not exist"),
    ("wrong_shape", lambda d: ["--input", f"A={d / 'small.npy'}", "--seed", "1"],
     r"error: tilelang-tt run: input A: \S*small\.npy has shape \[32, 128\], the artifact was compiled for \[64, 128\]"),
    ("wrong_rank", lambda d: ["--input", f"A={d / 'flat.npy'}", "--seed", "1"],
     r"error: tilelang-tt run: input A: \S*flat\.npy has shape \[8192\], the artifact was compiled for \[64, 128\]"),
    ("not_npy", lambda d: ["--input", f"A={d / 'text.npy'}", "--seed", "1"],
     r"error: tilelang-tt run: input A: \S*text\.npy is not a \.npy array"),
    ("unknown_name", lambda d: ["--input", f"Z={d / 'small.npy'}"],
     r"error: tilelang-tt run: --input Z: the kernel has no tensor Z \(it has A, B, C\)"),
    ("output_as_input", lambda d: ["--input", f"C={d / 'small.npy'}"],
     r"error: tilelang-tt run: --input C: C is an output of the kernel"),
    ("no_input_no_seed", lambda d: ["--input", f"A={d / 'a.npy'}"],
     r"(?s)error: tilelang-tt run: no input for B.*pass --input B=FILE\.npy, or --seed N"),
    ("not_name_value", lambda d: ["--input", "A"], r"error: tilelang-tt run: --input 'A' is not NAME=VALUE"),
], ids=lambda c: c[0])
def test_bad_inputs_exit_2_with_a_clear_error(case, gemm_dir, tmp_path, capsys):
    _, args, message = case
    np.save(tmp_path / "small.npy", np.zeros((32, 128), np.float32))
    np.save(tmp_path / "flat.npy", np.zeros(8192, np.float32))
    np.save(tmp_path / "a.npy", np.zeros((M, KD), np.float32))
    (tmp_path / "text.npy").write_text("not an array")
    rc, _, err = _run(capsys, gemm_dir, *args(tmp_path), "--out", tmp_path / "out")
    assert rc == 2, err
    assert re.search(message, err), err


def test_not_an_artifact(tmp_path, capsys):
    rc, _, err = _run(capsys, tmp_path, "--seed", 1, "--out", tmp_path / "out")
    assert rc == 2 and "has no tt.plan.json" in err


@pytest.fixture(scope="module")
def dynamic_dir():
    return tilelang.compile(K.dynamic_scale_add(N=64), target={"kind": "tt", "max_cores": 3}).artifact_dir


def test_symbolic_dimension_from_dim_or_from_an_input(dynamic_dir, tmp_path, capsys):
    rc, _, err = _run(capsys, dynamic_dir, "--seed", 2, "--dim", "M=37", "--out", tmp_path / "a")
    assert rc == 0, err
    a, b = (np.load(tmp_path / "a" / "inputs" / f"{n}.npy") for n in "AB")
    c = np.load(tmp_path / "a" / "C.npy")
    assert a.shape == b.shape == c.shape == (37, 64)
    ref = 2 * a + b   # fp32: exact, or within TF32's 10 mantissa bits per operand
    assert np.abs(c - ref).max() <= 2**-9 * np.abs(ref).max()
    np.save(tmp_path / "a70.npy", np.ones((70, 64), np.float32))
    rc, _, err = _run(capsys, dynamic_dir, "--input", f"A={tmp_path / 'a70.npy'}", "--seed", 2, "--out", tmp_path / "b")
    assert rc == 0, err
    assert np.load(tmp_path / "b" / "C.npy").shape == (70, 64)


@pytest.mark.parametrize("args, message", [
    (["--seed", "1"], r"tensor A has symbolic dimensions \['M'\] that no input fixes.*--dim M=VALUE"),
    (["--seed", "1", "--dim", "M=x"], r"--dim values must be integers"),
    (["--input", "A={d}/a70.npy", "--seed", "1", "--dim", "M=37"], r"input A: M=70, but M=37 elsewhere"),
])
def test_symbolic_dimension_errors(args, message, dynamic_dir, tmp_path, capsys):
    np.save(tmp_path / "a70.npy", np.ones((70, 64), np.float32))
    rc, _, err = _run(capsys, dynamic_dir, *[a.format(d=tmp_path) for a in args], "--out", tmp_path / "out")
    assert rc == 2, err
    assert re.search("(?s)" + message, err), err


# ---- block-float and packed-int4 weights ---------------------------------------------------------------------
# The references and tolerances are test_dequant.py's (its numeric model): the weights quantized by the scalar
# reference encoder of test_blockfloat.py, int4 unpacked from their definition.
DM, DN, DK = 128, 128, 128     # a 2x2 block grid of 64x64 blocks, two K steps


@pytest.fixture(scope="module")
def bfp8_dir():
    return tilelang.compile(D.bfp_gemm(DM, DN, DK, "Bfp8_b"), target="tt").artifact_dir


@pytest.fixture(scope="module")
def int4_dir():
    return tilelang.compile(D.dequant_gemm_int4(DM, DN, DK, "int", True, storage_dtype="int8"),
                            target="tt").artifact_dir


def _plan_buffer(artifact_dir, name):
    return {b["name"]: b for b in json.loads((artifact_dir / "tt.plan.json").read_text())["buffers"]}[name]


def test_bfp8_weight_gemm_matches_torch(bfp8_dir, tmp_path, capsys):
    assert _plan_buffer(bfp8_dir, "B")["format"] == "Bfp8_b"
    torch.manual_seed(20)
    a, b = torch.randn(DM, DK, dtype=torch.bfloat16), torch.randn(DK, DN, dtype=torch.bfloat16)
    np.save(tmp_path / "a.npy", a.float().numpy())
    np.save(tmp_path / "b.npy", b.double().numpy())       # any float dtype; bf16 values are exact in float64
    out = tmp_path / "out"
    rc, _, err = _run(capsys, bfp8_dir, "--input", f"A={tmp_path / 'a.npy'}", "--input", f"B={tmp_path / 'b.npy'}",
                      "--out", out)
    assert rc == 0, err
    c = torch.from_numpy(np.load(out / "C.npy"))
    bq = ref_quantize(b, "Bfp8_b")
    check_model(c, a, bq)
    assert rel_fro(c, a.float() @ bq) <= 2 ** -6
    assert np.load(out / "inputs" / "B.npy").dtype == np.float32


def test_packed_int4_dequant_gemm_matches_torch(int4_dir, tmp_path, capsys):
    b = _plan_buffer(int4_dir, "B")
    assert (b["format"], b["host_unpack"]["shape"], b["host_unpack"]["dtype"]) == ("Bfp8_b", [DN, DK // 2], "int8")
    torch.manual_seed(21)
    a = torch.randn(DM, DK, dtype=torch.bfloat16)
    qb = torch.randint(-128, 128, (DN, DK // 2), dtype=torch.int8)
    s = (torch.rand(DN) * 0.02 + 0.001).to(torch.bfloat16)
    for name, value in (("a", a.float()), ("qb", qb), ("s", s.float())):
        np.save(tmp_path / f"{name}.npy", value.numpy())
    out = tmp_path / "out"
    rc, _, err = _run(capsys, int4_dir, "--input", f"A={tmp_path / 'a.npy'}", "--input", f"B={tmp_path / 'qb.npy'}",
                      "--input", f"Scale={tmp_path / 's.npy'}", "--out", out)
    assert rc == 0, err
    c = torch.from_numpy(np.load(out / "C.npy"))
    w = ref_unpack_int4(qb, "int", 1)
    check_model(c, a, bf16_away(w * trunc(s, 7)[:, None]).T)        # int4 values exact, scale as the FPU sees it
    assert rel_fro(c, a.float() @ (w * s.float()[:, None]).T) <= 2 ** -6
    np.testing.assert_array_equal(np.load(out / "inputs" / "B.npy"), qb.numpy())


def test_packed_int4_seeded_random_bytes(int4_dir, tmp_path, capsys):
    rc, _, err = _run(capsys, int4_dir, "--seed", 5, "--out", tmp_path)
    assert rc == 0, err
    qb = np.load(tmp_path / "inputs" / "B.npy")
    assert qb.dtype == np.int8 and qb.shape == (DN, DK // 2) and qb.min() < -64 and qb.max() > 64
    assert json.loads((tmp_path / "report.json").read_text())["inputs"]["B"] == \
        "random uniform int8 in [-128, 127], seed 5"       # packed bytes: every value is a pair of int4
    a, s = (torch.from_numpy(np.load(tmp_path / "inputs" / f"{n}.npy")).to(torch.bfloat16) for n in ("A", "Scale"))
    w = ref_unpack_int4(torch.from_numpy(qb), "int", 1)
    check_model(torch.from_numpy(np.load(tmp_path / "C.npy")), a, bf16_away(w * trunc(s, 7)[:, None]).T)


def test_block_float_output_is_written_decoded(tmp_path, capsys):
    import tilelang.language as T

    @T.prim_func
    def copy_to_bfp8(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, 2) as (bx, by):
            s = T.alloc_shared((32, 32), "bfloat16")
            T.annotate_tt_sharding({C: T.TTShard(format="Bfp8_b")})
            T.copy(A[by * 32, bx * 32], s)
            T.copy(s, C[by * 32, bx * 32])
    rc, _, err = _run(capsys, tilelang.compile(copy_to_bfp8, target="tt").artifact_dir, "--seed", 3, "--out", tmp_path)
    assert rc == 0, err
    c, a = np.load(tmp_path / "C.npy"), np.load(tmp_path / "inputs" / "A.npy")
    assert c.dtype == np.float32 and c.shape == (64, 64)
    # the packer rounds the bf16 values into Bfp8_b (reference encoder, device rounding); the host decodes exactly
    np.testing.assert_array_equal(c, ref_quantize(torch.from_numpy(a).to(torch.bfloat16), "Bfp8_b", "device"))


_PACKED = (r"the artifact wants the packed int8 tensor [128, 64] (2 values per byte along axis 1, unpacked by the "
           r"host into the int8 weights [128, 128])")


@pytest.mark.parametrize("case", [
    ("wrong_dtype", np.zeros((DN, DK // 2), np.float32), f"holds float32, {_PACKED}; "
     "fix: save the tensor as int8: np.save(FILE, x.astype(np.int8))"),
    ("unsigned", np.zeros((DN, DK // 2), np.uint8), f"holds uint8, {_PACKED}; "
     "fix: save the tensor as int8: np.save(FILE, x.astype(np.int8))"),
    ("unpacked", np.zeros((DN, DK), np.int8), f"has shape [128, 128], {_PACKED}; "
     "fix: pass the packed tensor, not the unpacked weights"),
    ("wrong_shape", np.zeros((DN // 2, DK // 2), np.int8), f"has shape [64, 64], {_PACKED}; "
     "fix: pass the packed weights: a [128, 64] array of int8"),
], ids=lambda c: c[0])
def test_packed_input_errors(case, int4_dir, tmp_path, capsys):
    _, array, message = case
    np.save(tmp_path / "qb.npy", array)
    rc, _, err = _run(capsys, int4_dir, "--input", f"B={tmp_path / 'qb.npy'}", "--seed", 1, "--out", tmp_path / "out")
    assert rc == 2
    assert err == f"error: tilelang-tt run: input B: {tmp_path / 'qb.npy'} {message}\n"


def test_uint8_tensors_are_read_and_written_as_uint8(tmp_path, capsys):
    from tests.tt.test_uint8 import cast_in, cast_out, to_uint8_model

    reader = tilelang.compile(cast_in(64, 64), target="tt").artifact_dir
    a = np.arange(64 * 64, dtype=np.int64).reshape(64, 64).astype(np.uint8)      # every byte value
    np.save(tmp_path / "a.npy", a)
    rc, _, err = _run(capsys, reader, "--input", f"A={tmp_path / 'a.npy'}", "--out", tmp_path / "r")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "r" / "B.npy"), a.astype(np.float32))
    writer = tilelang.compile(cast_out(64, 64), target="tt").artifact_dir
    rc, _, err = _run(capsys, writer, "--seed", 3, "--out", tmp_path / "w")
    assert rc == 0, err
    b = np.load(tmp_path / "w" / "B.npy")
    assert b.dtype == np.uint8
    x = torch.from_numpy(np.load(tmp_path / "w" / "inputs" / "A.npy"))
    np.testing.assert_array_equal(b, to_uint8_model(x).numpy())
    np.save(tmp_path / "f.npy", a.astype(np.float32))
    rc, _, err = _run(capsys, reader, "--input", f"A={tmp_path / 'f.npy'}", "--out", tmp_path / "x")
    assert rc == 2 and "input A: " in err and "holds float32, the artifact wants uint8 [64, 64] (stored as UInt8)" in err


def test_int8_weights_seeded_random_stay_in_bfp8_range(tmp_path, capsys):
    kdir = tilelang.compile(D.dequant_gemm_int8(64, 64, 128), target="tt").artifact_dir
    rc, _, err = _run(capsys, kdir, "--seed", 4, "--out", tmp_path)
    assert rc == 0, err
    b = np.load(tmp_path / "inputs" / "B.npy")
    assert b.dtype == np.int8 and b.min() == -127 and b.max() == 127
    assert json.loads((tmp_path / "report.json").read_text())["inputs"]["B"] == \
        "random uniform int8 in [-127, 127], seed 4"


def test_float16_result_from_float32_pages_is_written_rounded(tmp_path, capsys):
    """A float16 result kept in Float32 pages (precision.float16_results) is written as float16, rounded as torch
    rounds; a float8 tensor (NumPy has none) is refused with what to call instead."""
    from tests.tt.test_float8 import fp8_gemm
    from tests.tt.test_precision import fp16_cast_kernel

    artifact = tilelang.compile(fp16_cast_kernel(), target="tt").artifact_dir
    a = (np.random.default_rng(2).standard_normal((64, 64)) * 8).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    rc, _, err = _run(capsys, artifact, "--input", f"A={tmp_path / 'a.npy'}", "--out", tmp_path / "out")
    assert rc == 0, err
    c = np.load(tmp_path / "out" / "C.npy")
    assert c.dtype == np.float16 and np.array_equal(c, a.astype(np.float16))
    fp8 = tilelang.compile(fp8_gemm(64, 64, 64, "float8_e4m3fn", "float32"), target="tt").artifact_dir
    rc, _, err = _run(capsys, fp8, "--seed", 1, "--out", tmp_path / "out8")
    assert rc == 2 and "tensor A is float8_e4m3fn, which NumPy (.npy files) cannot hold" in err
    assert "call the kernel from Python with torch float8 tensors" in err
