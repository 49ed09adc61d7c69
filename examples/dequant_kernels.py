"""Dequantize GEMMs for TT, in the form of TileLang's ``examples/dequantize_gemm``: low-precision weights are
read into a shared tile, dequantized in a ``T.Parallel`` into a bf16 tile, then ``T.gemm``.

* ``bfp_gemm``: bf16 activations x weights stored block-float (``T.TTShard(format="Bfp8_b" | "Bfp4_b")``), as
  tt-metal's models store them; no dequant code: the unpacker expands Bfp tiles to BF16.
* ``dequant_gemm_int8``: int8 weights ``B[N, K]`` with per-output-channel scales ``Scale[N]``:
  ``B_deq[i, j] = B_shared[i, j].astype(bf16) * Scale[bx * block_N + i]``, ``C = A @ B_deq^T``. int8 tensors are
  stored as Bfp8_b, which holds every integer in [-127, 127] exactly (docs/usage.md "Data formats").
* ``dequant_gemm_int8_grouped``: int8 weights ``B[K, N]`` with one scale per output channel and group of
  ``group_size`` K elements (``group_size`` a multiple of block_K). TT broadcasts only a tile's first row, so
  the scales of group g are stored at row ``32 * g`` of ``Scale[K // group_size * 32, N]`` (the other rows are
  unused); the plain ``Scale[K // group_size, N]`` form is refused with an error saying so.
* ``dequant_gemm_packed_int4``: TileLang's packed form (two int4 per uint8, unpacked with shifts and masks in the
  ``T.Parallel``); TT refuses it with an error that says to store the weights unpacked (int8, or Bfp4_b).
"""

import tilelang.language as T


def bfp_gemm(M, N, K, weight_format="Bfp8_b", block_M=64, block_N=64, block_K=64, math_fidelity=None):
    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "bfloat16")
            B_shared = T.alloc_shared((block_K, block_N), "bfloat16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.annotate_tt_sharding({B: T.TTShard(format=weight_format)})
            if math_fidelity is not None:
                T.annotate_tt_compute(math_fidelity=math_fidelity)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def dequant_gemm_int8(M, N, K, block_M=64, block_N=64, block_K=64, in_dtype="bfloat16", accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), "int8"), Scale: T.Tensor((N,), in_dtype),
             C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), "int8")
            B_dequantize_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_shared[i, j] = B_shared[i, j].astype(in_dtype) * Scale[bx * block_N + i]
                T.gemm(A_shared, B_dequantize_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def dequant_gemm_int8_grouped(M, N, K, group_size=128, block_M=64, block_N=64, block_K=64, in_dtype="bfloat16",
                              accum_dtype="float32"):
    assert group_size % block_K == 0

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), "int8"),
             Scale: T.Tensor((K // group_size * 32, N), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), "int8")
            B_dequantize_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                for i, j in T.Parallel(block_K, block_N):
                    B_dequantize_shared[i, j] = B_shared[i, j].astype(in_dtype) * \
                        Scale[k * block_K // group_size * 32, bx * block_N + j]
                T.gemm(A_shared, B_dequantize_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def dequant_gemm_packed_int4(M, N, K, block_M=64, block_N=64, block_K=64, in_dtype="bfloat16",
                             accum_dtype="float32"):
    num_elems_per_byte = 2

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K // num_elems_per_byte), "uint8"),
             C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K // num_elems_per_byte), "uint8")
            B_dequantize_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_shared[i, j] = ((B_shared[i, j // num_elems_per_byte] >>
                                                  (4 * (j % num_elems_per_byte)).astype("uint8")) &
                                                 T.uint8(0xF)).astype(in_dtype)
                T.gemm(A_shared, B_dequantize_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
