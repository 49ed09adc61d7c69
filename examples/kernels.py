"""Kernels written in plain TileLang, shared by the main job, tests and benchmarks.

Nothing here is Tenstorrent specific: these are ordinary grid kernels, exactly what a TileLang user
writes for a GPU. ``tilelang.compile(func, target="tt")`` turns them into persistent TT kernels.
"""


import tilelang.language as T


def design_gemm(M: int = 256, N: int = 256, K: int = 256, dtype: str = "bfloat16", block: int = 32):
    """The design document's GEMM: 32x32 blocks, bf16 in and out, no annotations."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_blk = T.alloc_shared((block, block), dtype)
            B_blk = T.alloc_shared((block, block), dtype)
            C_acc = T.alloc_fragment((block, block), dtype)
            T.clear(C_acc)
            for kk in T.serial(T.ceildiv(K, block)):
                T.copy(A[by * block, kk * block], A_blk)
                T.copy(B[kk * block, bx * block], B_blk)
                T.gemm(A_blk, B_blk, C_acc)
            T.copy(C_acc, C[by * block, bx * block])

    return gemm


def tilelang_example_gemm(M: int = 1024, N: int = 1024, K: int = 1024, block_M: int = 128, block_N: int = 128,
                          block_K: int = 32, dtype: str = "float16", accum_dtype: str = "float32",
                          num_stages: int = 3):
    """GEMM as TileLang's own example writes it: B transposed, fp16 in, fp32 accumulate, C staged in shared."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return gemm


def elementwise_add(M: int = 256, N: int = 256, dtype: str = "float32", block_M: int = 32, block_N: int = 32):
    """Elementwise add in TileLang's usual style: a T.Parallel body indexing global tensors."""

    @T.prim_func
    def add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]

    return add


def fused_chain(M: int = 128, N: int = 128, dtype: str = "bfloat16", block_M: int = 32, block_N: int = 64):
    """``exp(a) * b + 1`` staged through shared memory; the chain is fused in DST."""

    @T.prim_func
    def chain(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_N), dtype)
            B_s = T.alloc_shared((block_M, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], A_s)
            T.copy(B[by * block_M, bx * block_N], B_s)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.exp(A_s[i, j]) * B_s[i, j] + 1.0
            T.copy(C_l, C[by * block_M, bx * block_N])

    return chain


def dynamic_scale_add(N: int = 64, dtype: str = "float32", block_M: int = 32, block_N: int = 32):
    """``C = 2 * A + B`` over a symbolic number of rows M (``T.dynamic``): one compiled kernel, any M."""
    M = T.dynamic("M")

    @T.prim_func
    def scale_add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] * 2.0 + \
                    B[by * block_M + i, bx * block_N + j]

    return scale_add


def dynamic_gemm(N: int = 64, K: int = 96, dtype: str = "bfloat16", block: int = 32):
    """A GEMM whose M is symbolic (``T.dynamic``): the per-core split happens at launch."""
    M = T.dynamic("M")

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block), dtype)
            B_s = T.alloc_shared((block, block), dtype)
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K, block)):
                T.copy(A[by * block, k * block], A_s)
                T.copy(B[k * block, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return gemm
