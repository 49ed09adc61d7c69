"""Dequantize GEMMs for TT, in the form of TileLang's ``examples/dequantize_gemm``: low-precision weights are
read into a shared tile, dequantized in a ``T.Parallel`` into a bf16 tile, then ``T.gemm``.

* ``bfp_gemm``: bf16 activations x weights stored block-float (``T.TTShard(format="Bfp8_b" | "Bfp4_b")``), as
  tt-metal's models store them; no dequant code: the unpacker expands Bfp tiles to BF16.
* ``dequant_gemm_int8``: int8 weights ``B[N, K]`` with per-output-channel scales ``Scale[N]``:
  ``B_deq[i, j] = B_shared[i, j].astype(bf16) * Scale[bx * block_N + i]``, ``C = A @ B_deq^T``. int8 tensors are
  stored as Bfp8_b, which holds every integer in [-127, 127] exactly (docs/usage.md "Data formats").
* ``dequant_gemm_uint8``: uint8 weights ``B[N, K]`` (a UInt8 tensor and CB) with per-output-channel zero points and
  scales: ``B_deq[i, j] = (B_shared[i, j].astype(bf16) - Zero[n]) * Scale[n]``. The T.Parallel copies each uint8
  tile into DST and converts it with ``typecast_tile<UInt8, Float32>`` (docs/formats.md "Integers").
* ``dequant_gemm_int8_grouped``: int8 weights ``B[K, N]`` with one scale per output channel and group of
  ``group_size`` K elements, ``Scale[K // group_size, N]`` (``group_size`` a multiple of block_K and of 32). TT
  broadcasts only a tile's first row: the host stores scale row g as row 0 of its own tile (TilePadTT's
  ``row_pad``), so each K step's scale row is a broadcast row.
* ``dequant_gemm_int4`` / ``dequant_gemm_int4_grouped``: TileLang's packed form, two int4 per byte (uint8 or
  int8 storage) unpacked with shifts and masks in the ``T.Parallel``, in the forms of ``tilelang.quantize``
  (``source_format``): "uint" (``_tir_packed_to_unsigned_convert``), "int" (``_tir_packed_int_to_int_convert``:
  sign extension in int32), "int_reinterpret" (``example_dequant_gemm_w4a8``: ``reinterpret`` to int8 and an
  arithmetic shift, through a fragment copy) and "uint_zp" (unsigned minus a zero point of 8 after the cast,
  ``_tir_packed_to_signed_convert``). The unpack is a function of the packed byte alone, so UnpackWeightsTT moves
  it to the host (int8 tiles stored as Bfp8_b); scales stay on the device.
* ``dequant_gemm_tilelang_readme``: TileLang's README dequantize GEMM verbatim in form (int8 storage, the unpack
  into a fragment, the dequantized weights as the left operand of ``T.gemm``, ``Ct = B_deq @ A^T``).
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


def dequant_gemm_uint8(M, N, K, block_M=64, block_N=64, block_K=64, in_dtype="bfloat16", accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), "uint8"), Zero: T.Tensor((N,), in_dtype),
             Scale: T.Tensor((N,), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), "uint8")
            B_dequantize_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_shared[i, j] = (B_shared[i, j].astype(in_dtype) - Zero[bx * block_N + i]) * \
                        Scale[bx * block_N + i]
                T.gemm(A_shared, B_dequantize_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def dequant_gemm_int8_grouped(M, N, K, group_size=128, block_M=64, block_N=64, block_K=64, in_dtype="bfloat16",
                              accum_dtype="float32"):
    assert group_size % block_K == 0

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), "int8"),
             Scale: T.Tensor((K // group_size, N), in_dtype), C: T.Tensor((M, N), in_dtype)):
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
                        Scale[k * block_K // group_size, bx * block_N + j]
                T.gemm(A_shared, B_dequantize_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def unpack_int4(source_format, storage_dtype, val, pos, dtype):
    """One int4 of a packed byte ``val`` at position ``pos`` (0 or 1), as ``tilelang.quantize`` writes it."""
    from tilelang import tvm  # noqa: F401  (TileLang bundles TVM; its TIR namespace is tirx)
    from tvm import tirx as tir

    if source_format == "uint":          # _tir_packed_to_unsigned_convert
        mask = tir.const(15, storage_dtype)
        return ((val >> (pos * 4).astype(storage_dtype)) & mask).astype(dtype)
    if source_format == "int":           # _tir_packed_int_to_int_convert
        unextended = (val >> (pos.astype("int32") * tir.const(4, "int32"))) & tir.const(15, "int32")
        return tir.Cast(dtype, (unextended << tir.const(28, "int32")) >> tir.const(28, "int32"))
    if source_format == "int_reinterpret":   # example_dequant_gemm_w4a8's _tir_u8_to_i4_to_i8
        i4 = (val >> (pos.astype("uint8") * tir.const(4, "uint8"))) & tir.const(15, "uint8")
        i8 = tir.reinterpret("int8", i4 << tir.const(4, "uint8")) >> tir.const(4, "int8")
        return i8.astype(dtype)
    if source_format == "uint_zp":       # _tir_packed_to_signed_convert: zero point 8
        return ((val >> (pos.astype("uint32") * tir.const(4, "uint32"))) & tir.const(15, "uint32")).astype(dtype) - \
            tir.const(8, dtype)
    raise ValueError(source_format)


def dequant_gemm_int4(M, N, K, source_format="uint", with_scaling=False, group_size=None, block_M=64, block_N=64,
                      block_K=64, in_dtype="bfloat16", accum_dtype="float32", storage_dtype="uint8"):
    """``C = A @ dequant(B)^T``: ``B[N, K // 2]`` packed along K; with scaling, per-channel ``Scale[N]`` or, with
    ``group_size``, per-group ``Scale[N, K // group_size]`` (indexed as TileLang's mxfp4 examples do)."""
    num_elems_per_byte = 2
    if source_format == "int_reinterpret":
        storage_dtype = "uint8"
    scale_shape = (N,) if group_size is None else (N, K // group_size)

    def scale(Scale, n, k, j):
        if group_size is None:
            return Scale[n]
        return Scale[n, k * block_K // group_size + j // group_size]

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K // num_elems_per_byte), storage_dtype),
             Scale: T.Tensor(scale_shape, in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_local = T.alloc_fragment((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_dequantize_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    if with_scaling:
                        B_dequantize_shared[i, j] = unpack_int4(
                            source_format, storage_dtype, B_local[i, j // num_elems_per_byte],
                            j % num_elems_per_byte, in_dtype) * scale(Scale, bx * block_N + i, k, j)
                    else:
                        B_dequantize_shared[i, j] = unpack_int4(
                            source_format, storage_dtype, B_local[i, j // num_elems_per_byte],
                            j % num_elems_per_byte, in_dtype)
                T.gemm(A_shared, B_dequantize_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def dequant_gemm_int4_grouped(M, N, K, source_format="uint", group_size=128, block_M=64, block_N=64, block_K=64,
                              in_dtype="bfloat16", accum_dtype="float32", storage_dtype="uint8"):
    """``C = A @ dequant(B)``: ``B[K, N // 2]`` packed along N, per-group zero points and scales
    ``Zeros[K // group_size, N]``, ``Scale[K // group_size, N]``: ``(unpack(B) - Zeros) * Scale`` (bitblas's
    "original" zeros mode)."""
    num_elems_per_byte = 2
    assert group_size % block_K == 0

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N // num_elems_per_byte), storage_dtype),
             Scale: T.Tensor((K // group_size, N), in_dtype), Zeros: T.Tensor((K // group_size, N), in_dtype),
             C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N // num_elems_per_byte), storage_dtype)
            B_dequantize_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N // num_elems_per_byte], B_shared)
                for i, j in T.Parallel(block_K, block_N):
                    B_dequantize_shared[i, j] = (unpack_int4(
                        source_format, storage_dtype, B_shared[i, j // num_elems_per_byte], j % num_elems_per_byte,
                        in_dtype) - Zeros[k * block_K // group_size, bx * block_N + j]) * \
                        Scale[k * block_K // group_size, bx * block_N + j]
                T.gemm(A_shared, B_dequantize_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def dequant_gemm_tilelang_readme(M, N, K, block_M=64, block_N=64, block_K=64, in_dtype="bfloat16",
                                 out_dtype="bfloat16", accum_dtype="float32", num_bits=4, num_stages=2):
    """TileLang's README dequantize GEMM as written there: int8 storage, ``_tir_packed_to_unsigned_convert("int",
    8)`` into a *fragment*, the dequantized weights as the left operand, ``Ct[N, M] = B_deq @ A^T``."""
    num_elems_per_byte = 8 // num_bits
    storage_dtype = "int8"

    def _tir_packed_to_unsigned_convert(storage_type="uint", storage_nbit=8):   # tilelang.quantize's
        from tilelang import tvm  # noqa: F401
        from tvm import tirx as tir

        storage = storage_type + str(storage_nbit)

        def f_convert(nbit, val, pos, dtype):
            mask = tir.const((1 << nbit) - 1, storage)
            return ((val >> (pos * nbit).astype(storage)) & mask).astype(dtype)

        return f_convert

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K // num_elems_per_byte), storage_dtype),
             Ct: T.Tensor((N, M), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_local = T.alloc_fragment((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_dequantize_local = T.alloc_fragment((block_N, block_K), in_dtype)
            Ct_local = T.alloc_fragment((block_N, block_M), accum_dtype)
            T.clear(Ct_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_local[i, j] = _tir_packed_to_unsigned_convert("int", 8)(
                        num_bits, B_local[i, j // 2], j % 2, dtype=in_dtype)
                T.gemm(B_dequantize_local, A_shared, Ct_local, transpose_B=True)
            T.copy(Ct_local, Ct[bx * block_N, by * block_M])

    return main
