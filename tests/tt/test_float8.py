"""float8 tensors (device.FLOAT8_DTYPES): TT has no float8 format. A float8 input reaches the device as bfloat16
pages (every e4m3fn / e5m2 value is exact there), a float8 result leaves it as float32 pages the host rounds to
float8 as torch does (nearest-even, e4m3fn saturating), and compute never holds a float8-rounded value."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]


def fp8_gemm(M, N, K, dtype, out_dtype, block=64, block_k=32):
    """TileLang's gemm_fp8 example: B transposed, float32 accumulator, C in ``out_dtype``."""
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block_k), dtype)
            B_shared = T.alloc_shared((block, block_k), dtype)
            C_local = T.alloc_fragment((block, block), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=2):
                T.copy(A[by * block, k * block_k], A_shared)
                T.copy(B[bx * block, k * block_k], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])

    return gemm


def _fp8(shape, torch_dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch_dtype)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_gemm_multiplies_every_bit(arch, dtype):
    """Random fp8 operands (every bit of their 4 / 3 significant bits set somewhere), K = 128, at the GEMM default
    fidelity: each product is exact in the fp32 DST (bf16 pages, 8-bit SrcA/SrcB slots), only the sums round, so the
    float32 result is within K * 2^-24 of sum |a||b| of the float64 product."""
    torch_dtype = getattr(torch, dtype)
    a, b = _fp8((64, 128), torch_dtype, 1), _fp8((128, 128), torch_dtype, 2)
    c = torch.empty(64, 128)
    kernel = tilelang.compile(fp8_gemm(64, 128, 128, dtype, "float32"), target={"kind": "tt", "arch": arch})
    kernel(a, b, c)
    formats = {buf["name"]: buf["format"] for buf in kernel.plan["buffers"]}
    assert formats == {"A": "Float16_b", "B": "Float16_b", "C": "Float32"}
    exact = a.double() @ b.double().T
    scale = a.double().abs() @ b.double().abs().T
    assert ((c.double() - exact).abs() <= 128 * 2.0 ** -24 * scale).all()


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_result_is_rounded_as_torch_rounds(dtype):
    """fp8 in and out (the example as written): operands of a few bits, so every sum is exact in fp32 and the one
    rounding is the float8 one: C equals torch's float8 conversion of the exact product, bit for bit, saturation
    (e4m3fn: 448) included; C's pages are Float32."""
    torch_dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(3)
    a = (torch.randint(-8, 9, (64, 64), generator=g) / 4).to(torch_dtype)
    b = (torch.randint(-8, 9, (64, 64), generator=g) / 2).to(torch_dtype)
    b[0, :] = 8.0      # row 0 of C: sums up to 64 * 2 * 8, past e4m3fn's 448
    c = torch.empty(64, 64, dtype=torch_dtype)
    kernel = tilelang.compile(fp8_gemm(64, 64, 64, dtype, dtype), target="tt")
    kernel(a, b, c)
    assert next(buf for buf in kernel.plan["buffers"] if buf["name"] == "C")["format"] == "Float32"
    want = (a.double() @ b.double().T).float().to(torch_dtype)
    assert torch.equal(c.view(torch.uint8), want.view(torch.uint8))


def per_token_cast(M, N, group=128, blk_m=32):
    """TileLang's per-token cast to fp8 (cast/example_per_token_cast_to_fp8.py): a row's amax scales its group."""
    @T.prim_func
    def cast(X: T.Tensor((M, N), "float32"), X_fp8: T.Tensor((M, N), "float8_e4m3fn"),
             X_amax: T.Tensor((M, N // group), "float32")):
        with T.Kernel(M // blk_m, N // group, threads=128) as (bx, by):
            y_local = T.alloc_fragment((blk_m, group), "float32")
            y_amax_local = T.alloc_fragment((blk_m,), "float32")
            y_s_local = T.alloc_fragment((blk_m,), "float32")
            y_q_local = T.alloc_fragment((blk_m, group), "float32")
            y_q_local_fp8 = T.alloc_fragment((blk_m, group), "float8_e4m3fn")
            T.copy(X[bx * blk_m, by * group], y_local)
            T.reduce_absmax(y_local, y_amax_local, dim=1)
            for i in T.Parallel(blk_m):
                y_amax_local[i] = T.max(y_amax_local[i], 1e-4)
                y_s_local[i] = y_amax_local[i] / 448.0
            for i, j in T.Parallel(blk_m, group):
                y_q_local[i, j] = T.clamp(y_local[i, j] / y_s_local[i], -448.0, 448.0)
            T.copy(y_q_local, y_q_local_fp8)
            for i in T.Parallel(blk_m):
                X_amax[bx * blk_m + i, by] = y_s_local[i]
            T.copy(y_q_local_fp8, X_fp8[bx * blk_m, by * group])

    return cast


def test_quantization_rounds_once_to_float8():
    """The fp8 fragment compute writes is held as Float32 and copied on; the host's rounding is the only one, so
    the result equals torch evaluating the kernel's formula in float32 and converting to float8 (a bfloat16 or any
    intermediate rounding would differ near ties, which these inputs hit: x / amax * 448 lands on them)."""
    torch.manual_seed(7)
    x = (torch.randn(64, 256) * 3).bfloat16().float()
    q, s = torch.empty(64, 256, dtype=torch.float8_e4m3fn), torch.empty(64, 2)
    kernel = tilelang.compile(per_token_cast(64, 256), target="tt")
    kernel(x, q, s)
    cbs = {cb["name"]: cb["format"] for cb in kernel.plan["cbs"]}
    assert cbs["y_q_local_fp8"] == "Float32"
    groups = x.view(64, 2, 128)
    scale = groups.abs().amax(-1).clamp(min=1e-4) / 448.0
    want = (groups / scale.unsqueeze(-1)).clamp(-448.0, 448.0).view(64, 256).to(torch.float8_e4m3fn)
    assert torch.equal(s, scale)
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    twice = (groups / scale.unsqueeze(-1)).clamp(-448.0, 448.0).view(64, 256).bfloat16().to(torch.float8_e4m3fn)
    assert not torch.equal(want.view(torch.uint8), twice.view(torch.uint8))    # the inputs do reach a tie


def test_fp8_value_read_by_compute_is_refused():
    @T.prim_func
    def k(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((32, 32), "float32")
            q = T.alloc_fragment((32, 32), "float8_e4m3fn")
            y = T.alloc_fragment((32, 32), "float32")
            T.copy(X[0, 0], x)
            T.copy(x, q)
            for i, j in T.Parallel(32, 32):
                y[i, j] = T.Cast("float32", q[i, j]) * 2.0
            T.copy(y, Y[0, 0])

    with pytest.raises(TTUnsupportedError, match=r"(?s)float8 tile buffer q is computed and then read by compute: TT "
                                                 r"has no float8 format.*fix: compute in float32 / bfloat16 and cast "
                                                 r"to float8 only in the copy to the float8 tensor"):
        tilelang.compile(k, target="tt")


def test_fp8_tensor_read_and_written_is_refused():
    @T.prim_func
    def k(X: T.Tensor((32, 32), "float8_e4m3fn")):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((32, 32), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(32, 32):
                x[i, j] = x[i, j] * 2.0
            T.copy(x, X[0, 0])

    with pytest.raises(TTUnsupportedError, match=r"(?s)float8 tensor X is read and written by the kernel.*fix: write "
                                                 r"the results into a separate float8 tensor"):
        tilelang.compile(k, target="tt")
