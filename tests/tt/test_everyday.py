"""TileLang's everyday kernels on tt-sim against torch: reductions, broadcasts, vectors, rank-3 tensors, 3-D grids,
element-wise math, GEMM epilogues and fused GEMMs.

Tolerances, and why:
* bf16 outputs: one rounding to bf16 on pack (2^-8 relative) on top of fp32 math: |err| <= 2^-7 * max|ref|
  (two roundings where the kernel keeps a bf16 intermediate: the MLP's hidden activation, which the reference
  rounds the same way).
* bf16 GEMMs with fp32 accumulation: products of bf16 are exact in fp32, sums are fp32; only the output is
  rounded: |err| <= 2^-7 * max|ref|.
* fp32 reductions: on hardware fp32 reaches the FPU as TF32 (10 mantissa bits, truncated), so a reduced sum can
  be off by 2^-10 of sum(|x|) and a max/min by 2^-10 of its value (the truncated winner).
* fp32 SFPU math (exp2, log, rsqrt, sigmoid, ...): the SFPU's non-approximate modes are accurate to ~1e-3
  relative on hardware; we allow rtol 1e-3 (the emulator computes them in fp32).
"""

import pytest
import tilelang
import tilelang.language as T
import torch

from examples import kernels as K
from tests.tt.helpers import attention_error_bound
from examples.main import (bias_relu_inputs, bmm_inputs, gemv_inputs, layernorm_inputs, mlp_inputs,
                           rms_norm_inputs, softmax_inputs)

ARCHS = ["wormhole_b0", "blackhole"]
BF16 = 2.0 ** -7


def run(func, arch, args, max_cores=None):
    target = {"kind": "tt", "arch": arch}
    if max_cores:
        target["max_cores"] = max_cores
    kernel = tilelang.compile(func, target=target)
    kernel(*args)
    return kernel


def check(args, refs, rel):
    if callable(rel):
        return rel(args, refs)
    refs = refs if isinstance(refs, dict) else {len(args) - 1: refs}
    for i, ref in refs.items():
        err = (args[i].float() - ref).abs().max().item()
        assert err <= rel * ref.abs().max().item() + 1e-6, (i, err, ref.abs().max().item())


def mlp_bound(args, ref):
    """Per element, from the model: at HiFi2 each GEMM's in0 reaches SrcB with its last bf16 mantissa bit dropped
    (2^-7 relative): |dh| <= 2^-7 |x||W1| + 2^-7 |h| (the kernel's h and the reference's may round to neighbouring
    bf16 values), |dy| <= |dh||W2| + 2^-7 |h||W2| + 2^-8 |y| (the output rounding)."""
    x, w1, w2, y = (a.float() for a in args)
    h = torch.relu(x @ w1)
    dh = 2.0 ** -7 * (x.abs() @ w1.abs()) + 2.0 ** -7 * h.abs()
    bound = dh @ w2.abs() + 2.0 ** -7 * (h.abs() @ w2.abs()) + 2.0 ** -8 * ref.abs()
    assert ((y - ref).abs() <= bound).all(), ((y - ref).abs() - bound).max()


# rms_norm in fp32: the sum of squares reaches the FPU's reduce as TF32 (2^-10 relative; rsqrt halves it) and the
# final x * rstd multiplies TF32 operands (2^-10 each): 2.5 * 2^-10 relative, checked as 3 * 2^-10.
FP32_RMS = 3 * 2.0 ** -10

EXAMPLES = {
    "softmax": (lambda: K.softmax(128, 256), lambda: softmax_inputs(128, 256), BF16),
    "layernorm_row_per_block": (lambda: K.layernorm(64, 256), lambda: layernorm_inputs(64, 256), BF16),
    "layernorm_32_rows": (lambda: K.layernorm(64, 256, blk_m=32), lambda: layernorm_inputs(64, 256), BF16),
    "rms_norm_row_per_block": (lambda: K.rms_norm(64, 256, 1), lambda: rms_norm_inputs(64, 256), FP32_RMS),
    "rms_norm_16_rows": (lambda: K.rms_norm(64, 256, 16), lambda: rms_norm_inputs(64, 256), FP32_RMS),
    "gemv": (lambda: K.gemv(128, 256, 32, 64), lambda: gemv_inputs(128, 256), BF16),
    "batched_gemm": (lambda: K.batched_gemm(3, 64, 64, 96, 32, 32, 32), lambda: bmm_inputs(3, 64, 64, 96), BF16),
    "gemm_bias_relu": (lambda: K.gemm_bias_relu(128, 128, 64), lambda: bias_relu_inputs(128, 128, 64), BF16),
    "mlp": (lambda: K.mlp(64, 64, 128), lambda: mlp_inputs(64, 64, 128), mlp_bound),
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name, arch):
    torch.manual_seed(2)
    make, inputs, rel = EXAMPLES[name]
    args, refs = inputs()
    run(make(), arch, args, max_cores=6)
    check(args, refs, rel)


def reduce_kernel(kind, dim, clear, M=64, N=96):
    """T.reduce_<kind> of each (32, N) block along dim into a 1-D fragment stored to the 1-D tensor R (block bx at
    R[bx * len]); clear=False folds into the running value read from Init."""
    n = 32 if dim == 1 else N
    extra = {} if kind in ("abssum", "absmax") else {"clear": clear}

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), Init: T.Tensor((M // 32 * n,), "float32"),
          R: T.Tensor((M // 32 * n,), "float32")):
        with T.Kernel(M // 32, threads=128) as bx:
            A_s = T.alloc_shared((32, N), "float32")
            A_f = T.alloc_fragment((32, N), "float32")
            r = T.alloc_fragment((n,), "float32")
            T.copy(A[bx * 32, 0], A_s)
            T.copy(A_s, A_f)
            if not clear:
                T.copy(Init[bx * n], r)
            getattr(T, f"reduce_{kind}")(A_f, r, dim=dim, **extra)
            T.copy(r, R[bx * n])

    return k


TORCH_REDUCE = {"sum": lambda x, d: x.sum(d), "max": lambda x, d: x.amax(d), "min": lambda x, d: x.amin(d),
                "abssum": lambda x, d: x.abs().sum(d), "absmax": lambda x, d: x.abs().amax(d)}
COMBINE = {"sum": torch.add, "max": torch.maximum, "min": torch.minimum}
REDUCE_CASES = [(k, d, c) for k in sorted(TORCH_REDUCE) for d in (1, 0) for c in (True, False)
                if c or k in COMBINE]


@pytest.mark.parametrize("kind,dim,clear", REDUCE_CASES)
def test_reduce(kind, dim, clear):
    torch.manual_seed(3)
    M, N = 64, 96
    a = torch.randn(M, N) - 3.0            # mostly negative: a max that starts from 0 would be wrong
    n = 32 if dim == 1 else N
    init, r = torch.randn(M // 32 * n), torch.empty(M // 32 * n)
    run(reduce_kernel(kind, dim, clear), "wormhole_b0", [a, init, r])
    blocks = a.view(M // 32, 32, N)
    ref = TORCH_REDUCE[kind](blocks, 2 if dim == 1 else 1).reshape(-1)
    if not clear:
        ref = COMBINE[kind](ref, init)
    mag = blocks.abs().sum(2 if dim == 1 else 1).reshape(-1) + (0 if clear else init.abs())
    # fp32 reaches the FPU as TF32 (low 13 mantissa bits dropped, 2^-10 relative): a sum is off by at most 2^-10 of
    # sum|x|; max/min keep the truncated winner (truncation is monotone): at most 2^-10 |ref|
    tol = 2.0 ** -10 * (mag if "sum" in kind else ref.abs())
    assert ((r - ref).abs() <= tol + 1e-6).all(), (r - ref).abs().max()


def unary_kernel(fn, M=64, N=64, dtype="float32"):
    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                y = by * 32 + i
                x = bx * 32 + j
                C[y, x] = fn(A[y, x], B[y, x])

    return k


MATH = {
    "gt_select": (lambda a, b: T.if_then_else(a > b, a, b * 2.0), lambda a, b: torch.where(a > b, a, b * 2)),
    "le_scalar": (lambda a, b: T.Cast("float32", a <= 0.5), lambda a, b: (a <= 0.5).float()),
    "min_max_clamp": (lambda a, b: T.max(T.min(a, b), -0.5) + T.clamp(b, -1.0, 1.0),
                      lambda a, b: torch.clamp(torch.minimum(a, b), min=-0.5) + torch.clamp(b, -1, 1)),
    "exp2_log2": (lambda a, b: T.exp2(a) + T.log2(T.abs(b) + 1.0),
                  lambda a, b: torch.exp2(a) + torch.log2(b.abs() + 1)),
    "pow_rsqrt": (lambda a, b: a * a * a + T.rsqrt(b * b + 1.0), lambda a, b: a ** 3 + torch.rsqrt(b * b + 1)),
    "gelu_erf": (lambda a, b: 0.5 * a * (1.0 + T.erf(a * 0.7071067811865476)),
                 lambda a, b: torch.nn.functional.gelu(a)),
    "gelu_tanh": (lambda a, b: 0.5 * a * (1.0 + T.tanh(0.7978845608 * (a + 0.044715 * a * a * a))),
                  lambda a, b: torch.nn.functional.gelu(a, approximate="tanh")),
    "silu": (lambda a, b: a * T.sigmoid(a), lambda a, b: torch.nn.functional.silu(a)),
    "neg_sub_div": (lambda a, b: (0.0 - a) / (b * b + 1.0), lambda a, b: -a / (b * b + 1)),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_elementwise_math(name):
    torch.manual_seed(4)
    fn, ref_fn = MATH[name]
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    c = torch.empty(64, 64)
    run(unary_kernel(fn), "wormhole_b0", [a, b, c])
    ref = ref_fn(a, b)
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-5)


def test_loop_variables_as_values():
    """Loop variables as values read index tiles (plus each tile's offset and the block's base at run time):
    a lower-triangular mask of a 96x96 matrix in 32x64 blocks."""
    @T.prim_func
    def k(A: T.Tensor((96, 128), "float32"), C: T.Tensor((96, 128), "float32")):
        with T.Kernel(2, 3, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 64):
                row = by * 32 + i
                col = bx * 64 + j
                C[row, col] = T.if_then_else(row >= col, A[row, col], -T.infinity("float32")) + T.Cast("float32", j)

    torch.manual_seed(8)
    a, c = torch.randn(96, 128), torch.empty(96, 128)
    run(k, "wormhole_b0", [a, c])
    rows, cols = torch.arange(96)[:, None], torch.arange(128)[None, :]
    ref = torch.where(rows >= cols, a, torch.tensor(float("-inf"))) + (cols % 64).float()
    torch.testing.assert_close(c, ref, rtol=0, atol=0)


def test_kernel_without_inputs():
    """A kernel that only writes (an iota table): its host program reads no tensor files and still builds under
    -Wall -Werror (an unused file reader broke the build)."""
    @T.prim_func
    def iota(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = T.Cast("float32", (by * 32 + i) * 64 + bx * 32 + j)

    c = torch.empty(64, 64)
    run(iota, "wormhole_b0", [c])
    torch.testing.assert_close(c, torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_scalar_kernel_parameters(arch):
    """Scalar parameters reach every kernel as runtime args (float32 as its bit pattern, used by the SFPU scalar
    ops directly): C = max(A * alpha, beta)."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32"), alpha: T.float32, beta: T.float32):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = T.max(A[by * 32 + i, bx * 32 + j] * alpha, beta)

    torch.manual_seed(10)
    a, c = torch.randn(64, 64), torch.empty(64, 64)
    kernel = run(k, arch, [a, c, 1.5, -0.25])
    assert [s["name"] for s in kernel.plan["scalar_args"]] == ["alpha", "beta"]
    torch.testing.assert_close(c, torch.clamp(a * 1.5, min=-0.25), rtol=0, atol=0)


@pytest.mark.parametrize("block", [32, 64])
def test_gemm_transpose_a(block):
    """T.gemm(transpose_A=True): the A block is transposed on chip (transpose_tile into a scratch CB) before a
    plain matmul; with 32x32 blocks the accumulator would fit DST, but the transpose acquires DST inside the K
    loop, so the accumulator lives in its CB."""
    from tests.tt.test_errors import gemm_kernel

    torch.manual_seed(13)
    a, b = torch.randn(128, 64, dtype=torch.bfloat16), torch.randn(128, 64, dtype=torch.bfloat16)
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    run(gemm_kernel(M=64, N=64, K_=128, trans_a=True, block=block), "wormhole_b0", [a, b, c])
    ref = a.float().T @ b.float()
    assert (c.float() - ref).abs().max().item() <= BF16 * ref.abs().max().item()


def test_transposed_indexing():
    """X[j, i] in a nest storing [i, j]: the block is read as it lies and transposed tile by tile on chip."""
    @T.prim_func
    def k(A: T.Tensor((64, 96), "float32"), B: T.Tensor((96, 64), "float32"), C: T.Tensor((96, 64), "float32")):
        with T.Kernel(1, 3, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 64):
                C[by * 32 + i, bx * 64 + j] = A[bx * 64 + j, by * 32 + i] * 2.0 + B[by * 32 + i, bx * 64 + j]

    torch.manual_seed(11)
    a, b, c = torch.randn(64, 96), torch.randn(96, 64), torch.empty(96, 64)
    run(k, "blackhole", [a, b, c])
    torch.testing.assert_close(c, a.T * 2 + b, rtol=0, atol=0)


def test_copy_between_tensor_and_fragment():
    """T.copy from a tensor straight into a fragment (and back), updated in place in between."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_f = T.alloc_fragment((32, 32), "bfloat16")
            T.copy(A[by * 32, bx * 32], A_f)
            for i, j in T.Parallel(32, 32):
                A_f[i, j] = A_f[i, j] * 2.0
            T.copy(A_f, C[by * 32, bx * 32])

    torch.manual_seed(12)
    a, c = torch.randn(64, 64, dtype=torch.bfloat16), torch.empty(64, 64, dtype=torch.bfloat16)
    run(k, "wormhole_b0", [a, c])
    torch.testing.assert_close(c, a * 2, rtol=0, atol=0)


def test_sixteen_by_sixteen_blocks():
    """Blocks smaller than a tile: each 16x16 block lives in a quarter of one tile, read and written in place."""
    @T.prim_func
    def k(A: T.Tensor((64, 48), "float32"), B: T.Tensor((64, 48), "float32"), C: T.Tensor((64, 48), "float32")):
        with T.Kernel(3, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((16, 16), "float32")
            C_f = T.alloc_fragment((16, 16), "float32")
            T.copy(A[by * 16, bx * 16], A_s)
            for i, j in T.Parallel(16, 16):
                C_f[i, j] = A_s[i, j] * 2.0 + B[by * 16 + i, bx * 16 + j]
            T.copy(C_f, C[by * 16, bx * 16])

    torch.manual_seed(5)
    a, b, c = torch.randn(64, 48), torch.randn(64, 48), torch.zeros(64, 48)
    run(k, "blackhole", [a, b, c])
    torch.testing.assert_close(c, a * 2 + b, rtol=0, atol=0)


def test_in_place_update_of_reader_buffer_in_a_loop():
    """TileLang's rms_norm_splitk form: the shared buffer the reader fills is scaled in place and stored."""
    M, N, blk_k = 64, 128, 64

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 32, threads=128) as bx:
            A_shared = T.alloc_shared((32, blk_k), "float32")
            A_local = T.alloc_fragment((32, blk_k), "float32")
            A_powsum = T.alloc_fragment((32,), "float32")
            T.clear(A_local)
            for kk in range(N // blk_k):
                T.copy(A[bx * 32, kk * blk_k], A_shared)
                for i, j in T.Parallel(32, blk_k):
                    A_local[i, j] += A_shared[i, j] * A_shared[i, j]
            T.reduce_sum(A_local, A_powsum, dim=1)
            for i in T.Parallel(32):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N) + 1e-12
            for kk in range(N // blk_k):
                T.copy(A[bx * 32, (N // blk_k - 1 - kk) * blk_k], A_shared)
                for i, j in T.Parallel(32, blk_k):
                    A_shared[i, j] *= A_powsum[i]
                T.copy(A_shared, B[bx * 32, (N // blk_k - 1 - kk) * blk_k])

    torch.manual_seed(6)
    a, b = torch.randn(M, N), torch.empty(M, N)
    run(k, "wormhole_b0", [a, b])
    ref = a * (torch.rsqrt(a.pow(2).mean(-1, keepdim=True)) + 1e-12)
    torch.testing.assert_close(b, ref, rtol=1e-3, atol=1e-6)


def test_vector_layouts_in_the_plan():
    """A 1-D tensor is a row vector [1, n] when indexed by the column variable and a column vector [n, 1] when it
    receives per-row results; rank-3 tensors fold their leading dims into rows."""
    plan = tilelang.compile(K.layernorm(64, 256), target="tt").plan
    views = {b["name"]: (b["shape"], b["view"]) for b in plan["buffers"]}
    assert views["gamma"] == ([256], [1, 256]) and views["Mean"] == ([64], [64, 1])
    plan = tilelang.compile(K.batched_gemm(3, 64, 64, 96, 32, 32, 32), target="tt").plan
    views = {b["name"]: (b["shape"], b["view"]) for b in plan["buffers"]}
    assert views["A"] == ([3, 64, 96], [192, 96]) and views["C"] == ([3, 64, 64], [192, 64])
    assert plan["grid"] == [3 * 2, 2]


FLASH = [  # (batch, heads, kv_heads, seq_q, seq_kv, dim, arch)
    (1, 2, 2, 128, 128, 64, "wormhole_b0"),
    (2, 4, 2, 128, 256, 128, "blackhole"),      # grouped-query attention, head dim 128
    (1, 2, 1, 64, 256, 64, "blackhole"),        # a short query block against a longer K/V
]


@pytest.mark.parametrize("arch", ARCHS)
def test_flash_attention_causal(arch):
    """The causal form of TileLang's example (mask from the query/key positions, blocks above the diagonal not
    visited) against SDPA; a causal run does about half the matmul tiles of the non-causal one (exactly
    (n + 1) / (2n) for n K/V blocks per Q block row)."""
    import torch.nn.functional as F

    torch.manual_seed(9)
    B, H, S, D = 1, 2, 256, 64
    q, k, v = (torch.randn(B, H, S, D, dtype=torch.bfloat16) for _ in range(3))
    o, o_full = torch.empty_like(q), torch.empty_like(q)
    causal = run(K.flash_attention(B, H, S, S, D, is_causal=True), arch, [q, k, v, o], max_cores=8)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert ((o.float() - ref).abs() <= attention_error_bound(q, k, v, ref, True, "bhsd")).all()
    full = run(K.flash_attention(B, H, S, S, D), arch, [q, k, v, o_full], max_cores=8)
    n = S // 64
    assert causal.report["total"]["matmul_tiles"] * 2 * n == full.report["total"]["matmul_tiles"] * (n + 1)


@pytest.mark.parametrize("batch,heads,kv_heads,seq_q,seq_kv,dim,arch", FLASH)
def test_flash_attention_forward(batch, heads, kv_heads, seq_q, seq_kv, dim, arch):
    """TileLang's FlashAttention forward (non-causal) against torch's SDPA, within the bound derived in
    tests/tt/helpers.attention_error_bound (bf16 probabilities, TF32 scores, bf16 output). Counters: Q is read
    once, K and V once per Q block and block of query heads (GQA: the heads of a group SDPAFusionTT put in one
    block read them once); the matmul tiles are those of QK^T and P.V."""
    import torch.nn.functional as F

    torch.manual_seed(7)
    q = torch.randn(batch, heads, seq_q, dim, dtype=torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, seq_kv, dim, dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    kernel = run(K.flash_attention(batch, heads, seq_q, seq_kv, dim, kv_heads=kv_heads), arch, [q, k, v, o],
                 max_cores=8)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=kv_heads != heads)
    assert ((o.float() - ref).abs() <= attention_error_bound(q, k, v, ref, False, "bhsd")).all()
    q_blocks = -(-seq_q // 64)
    total = kernel.report["total"]
    kv_bytes = 2 * seq_kv * dim * 2                      # one head's K and V, bf16
    head_blocks = heads // kernel.plan["sdpa"].get("heads_per_block", 1)
    assert total["dram_read_bytes"] == q.numel() * 2 + batch * head_blocks * q_blocks * kv_bytes
    assert total["dram_write_bytes"] == o.numel() * 2
    tiles = lambda n: -(-n // 32)                        # noqa: E731
    per_pair = tiles(64) * tiles(64) * tiles(dim) * 2    # QK^T and P.V per (Q block, K block)
    assert total["matmul_tiles"] == batch * heads * q_blocks * tiles(seq_kv) // 2 * per_pair
