"""Each error a user can hit: our exception type, the construct, and the message; no artifact left behind."""

import pytest
import tilelang
import tilelang.language as T

from examples import kernels as K
from tilelang_tt.errors import (TTError, TTLoweringError, TTScheduleError, TTShapeError, TTUnsupportedError,
                                TTVersionError)


def compile_tt(func, **target):
    return tilelang.compile(func, target={"kind": "tt", **target})


def assert_no_artifacts(root):
    assert not root.exists() or not any(root.iterdir()), list(root.iterdir())


def gemm_kernel(M=64, N=64, K_=64, trans_a=False, clear=True, dtype="bfloat16", block=32, offset=0, col_offset=0):
    a_shape = (K_, M) if trans_a else (M, K_)

    @T.prim_func
    def gemm(A: T.Tensor(a_shape, dtype), B: T.Tensor((K_, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block), dtype)
            B_s = T.alloc_shared((block, block), dtype)
            C_l = T.alloc_fragment((block, block), "float32")
            if clear:
                T.clear(C_l)
            for k in T.serial(K_ // block):
                if trans_a:
                    T.copy(A[k * block, by * block], A_s)
                else:
                    T.copy(A[by * block + offset, k * block + col_offset], A_s)
                T.copy(B[k * block, bx * block], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=trans_a)
            T.copy(C_l, C[by * block, bx * block])

    return gemm


def unary_kernel(fn, dtype="float32"):
    @T.prim_func
    def unary(A: T.Tensor((64, 64), dtype), C: T.Tensor((64, 64), dtype)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = fn(A[by * 32 + i, bx * 32 + j])

    return unary


CASES = {
    "block_not_tile_multiple": (lambda: gemm_kernel(M=96, N=96, K_=96, block=48), TTShapeError,
                                r"buffer A_s: tile buffer A_s has shape \[48, 48\]: an extent above 32 that is not a "
                                r"multiple of 32 makes blocks straddle 32x32 tiles.*fix: use 32 or 64"),
    "accumulate_before_clear": (lambda: gemm_kernel(M=256, N=256, clear=False, block=128), TTUnsupportedError,
                                r"T.gemm accumulates into C_l before it is initialised.*fix: call T.clear\(C_l\)"),
    "unsupported_function": (lambda: unary_kernel(T.floor), TTUnsupportedError,
                             r"elementwise function tirx.floor has no TT tile intrinsic"),
    "unsupported_dtype": (lambda: K.elementwise_add(64, 64, "float64"), TTUnsupportedError,
                          r"dtype 'float64' has no supported TT data format.*fix: use one of \['bfloat16', 'float16', 'float32', 'uint8'\]"),
    "int_dtype": (lambda: K.elementwise_add(64, 64, "int8"), TTUnsupportedError, r"dtype 'int8' has no supported TT data format"),
    "misaligned_copy": (lambda: gemm_kernel(M=96, K_=96, col_offset=16), TTUnsupportedError,
                        r"column offset .* of A is not a multiple of 32"),
    "l1_budget": (lambda: gemm_kernel(M=1024, N=1024, K_=1024, block=512, dtype="float32"), TTUnsupportedError,
                  r"circular buffers need \d+ bytes of L1 per core, more than the 1393312 bytes a kernel can use on wormhole_b0"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error(name, artifact_root):
    make, exc, message = CASES[name]
    with pytest.raises(exc, match="(?s)" + message) as info:
        compile_tt(make())
    assert isinstance(info.value, TTError)
    assert "kernel '" in str(info.value)            # names the kernel and where it was written
    assert_no_artifacts(artifact_root)


def test_tensorize_disabled_has_no_fallback(artifact_root):
    with pytest.raises(TTUnsupportedError, match=r"tl.tileop.fill was not tensorized \(tensorize=False\) and the TT backend has no scalar fallback"):
        compile_tt(K.design_gemm(64, 64, 64), tensorize=False)
    assert_no_artifacts(artifact_root)


def test_no_grid(artifact_root):
    @T.prim_func
    def no_grid(A: T.Tensor((32, 32), "float32")):
        for i in T.serial(32):
            A[i, 0] = 1.0

    with pytest.raises(TTLoweringError, match=r"no T.Kernel grid .* found"):
        compile_tt(no_grid)


def test_three_d_grid_is_scheduled_as_rows(artifact_root):
    """A 3-D grid (nx, ny, nz) is scheduled as (ny * nz, nx): bz = row // ny, by = row % ny."""
    @T.prim_func
    def grid3(A: T.Tensor((2, 64, 64), "float32"), C: T.Tensor((2, 64, 64), "float32")):
        with T.Kernel(2, 2, 2, threads=128) as (bx, by, bz):
            for i, j in T.Parallel(32, 32):
                C[bz, by * 32 + i, bx * 32 + j] = A[bz, by * 32 + i, bx * 32 + j]

    kernel = compile_tt(grid3)
    assert kernel.plan["grid"] == [4, 2]
    program = (kernel.artifact_dir / "tt.program.txt").read_text()
    assert "let bz = row / 2u" in program and "let by = row % 2u" in program


def test_thread_index_dependent_body(artifact_root):
    @T.prim_func
    def per_thread(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=32) as (bx, by):
            tx = T.get_thread_binding(0)
            A[by * 32 + tx, bx * 32] = 0.0

    with pytest.raises(TTUnsupportedError, match=r"the kernel body reads threadIdx \(tx/ty/tz\)"):
        compile_tt(per_thread)


def test_control_flow(artifact_root):
    @T.prim_func
    def branchy(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            if bx > 0:
                for i, j in T.Parallel(32, 32):
                    C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j]

    # a block-level if on block indices runs (tests/tt/test_control_flow.py); blocks with bx == 0 keep C's values
    import torch

    kernel = compile_tt(branchy)
    a, c = torch.randn(64, 64), torch.zeros(64, 64)
    kernel(a, c)
    want = torch.zeros(64, 64)
    want[:, 32:] = a[:, 32:]
    assert torch.equal(c, want)


def test_one_tensor_element_stored_outside_t_parallel(artifact_root):
    """``A[by * 32, bx * 32] = 1.0`` in the block body stores that one element (a T.Parallel over one element);
    the rest of A keeps its values."""
    import torch

    @T.prim_func
    def scalar(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A[by * 32, bx * 32] = 1.0

    a = torch.randn(64, 64)
    want = a.clone()
    want[::32, ::32] = 1.0
    compile_tt(scalar)(a)
    assert torch.equal(a, want)


def test_schedule_leaving_blocks_uncovered(artifact_root):
    @T.prim_func
    def add(A: T.Tensor((128, 128), "float32"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            T.annotate_tt_schedule(policy="strided", stride=(3, 4))
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j]

    with pytest.raises(TTScheduleError, match=r"of 16 blocks are never visited, e.g. \(by=0, bx=0\)"):
        compile_tt(add)
    assert_no_artifacts(artifact_root)


def test_calling_a_compile_only_kernel_explains(artifact_root):
    kernel = compile_tt(K.elementwise_add(64, 64), compile_only=True)
    assert kernel.artifact_dir.is_dir()
    with pytest.raises(TTError, match=r"compiled with compile_only=True \(dry run\)"):
        kernel()


def test_wrong_argument_count_and_shape(artifact_root):
    import torch

    kernel = compile_tt(K.elementwise_add(64, 64, "float32"))
    with pytest.raises(TTError, match=r"the kernel takes 3 arguments \(A, B, C\); got 1"):   # test_calls.py: more
        kernel(torch.zeros(64, 64))
    with pytest.raises(TTError, match=r"parameter A takes a float32 tensor of shape \[64, 64\]; got shape \[32, 64\]"):
        kernel(torch.zeros(32, 64), torch.zeros(64, 64), torch.zeros(64, 64))


def test_unsupported_tilelang_version(monkeypatch):
    from tilelang_tt import _tilelang_hooks

    monkeypatch.setattr(tilelang, "__version__", "0.2.0")
    with pytest.raises(TTVersionError, match=r"(?s)tilelang 0.2.0 is installed.*fix: pip install tilelang==0.1.15"):
        _tilelang_hooks.check_tilelang_version()


def test_construct_named_once():
    """A lowering message opens with its construct (``f"{what}: ..."``): the error names it once, not twice."""
    from tilelang_tt.errors import TTUnsupportedError

    e = TTUnsupportedError("T.copy(a, b): only whole tile buffers can be copied", construct="T.copy(a, b)", fix="f")
    assert str(e).splitlines()[0] == "T.copy(a, b): only whole tile buffers can be copied"
    e = TTUnsupportedError("T.print has no TT lowering", construct="T.print")
    assert str(e) == "T.print: T.print has no TT lowering"
