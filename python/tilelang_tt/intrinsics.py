"""TT tile intrinsics: the TIR operators the passes emit, and the one table mapping each to its C++.

Two layers live here and nowhere else:

* ``TTOps``: TIR ``Op``s (each call's last argument is the TileLang statement it lowers, for comments) (registered from Python under ``tilelang_tt.*``) that the passes leave in the IR:
  ``read_block`` / ``write_block`` (reader / writer transfers between a tensor and a CB), and the compute
  ops ``fill``, ``matmul`` and ``eltwise``.
* ``INTRINSICS``: for every TT-Metalium compute call the generator can emit, its init call, its tile call
  and its header, in the exact 0.81 API. The emitter formats these strings; header checks and the emulator
  read the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import tirx
from tvm.ir import Op

_PREFIX = "tilelang_tt."


def _register(name: str, num_inputs: int) -> Op:
    full = _PREFIX + name
    if full not in [str(n) for n in tvm.ir._ffi_api.ListOpNames()]:
        tvm.ir._ffi_api.RegisterOp(full, f"tilelang-tt tile intrinsic {name}")
        op = Op.get(full)
        tvm.ir._ffi_api.OpSetNumInputs(op, num_inputs)
        tvm.ir.register_op_attr(full, "TCallEffectKind", tirx.CallEffectKind.Opaque)
        tvm.ir.register_op_attr(full, "TScriptPrinterName", f"tt_{name}")
    return Op.get(full)


class TTOps:
    # read_block(cb, tensor_index, tile_row, tile_col, rows, cols): reader moves a rows x cols block of tiles
    read_block = _register("read_block", 7)
    # write_block(cb, tensor_index, tile_row, tile_col, rows, cols): writer stores a block from a CB
    write_block = _register("write_block", 7)
    # fill(dst_cb, value): every tile of the destination becomes `value`
    fill = _register("fill", 3)
    # matmul(a_cb, b_cb, c_cb, transpose_a, transpose_b): C += A @ B over whole blocks
    matmul = _register("matmul", 6)
    # eltwise(dst_cb, expr): expr is a TIR expression over BufferLoad(tile buffer, [0, 0]) leaves and scalars
    eltwise = _register("eltwise", 3)
    # transpose(src_cb, dst_cb): dst block (C x R tiles) = transpose of the src block (R x C tiles)
    transpose = _register("transpose", 3)


def call(op: Op, *args, note: str = "") -> tirx.Evaluate:
    """``Evaluate(op(*args, note))``: the last argument is the TileLang statement the op came from."""
    values = [a if isinstance(a, tvm.ir.PrimExpr) else _imm(a) for a in args]
    return tirx.Evaluate(tirx.Call("handle", op, values + [tirx.StringImm(note)]))


def _imm(v):
    if isinstance(v, bool):
        return tirx.IntImm("bool", int(v))
    if isinstance(v, int):
        return tirx.IntImm("int32", v)
    if isinstance(v, float):
        return tirx.FloatImm("float32", v)
    raise TypeError(v)


def tt_op_of(stmt) -> tuple[Op, tirx.Call] | None:
    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and isinstance(stmt.value.op, Op):
        if str(stmt.value.op.name).startswith(_PREFIX):
            return stmt.value.op, stmt.value
    return None


@dataclass(frozen=True)
class Intrinsic:
    """One TT-Metalium compute call. Placeholders: {a} {b} CB ids, {ia} {ib} tile indices, {dst} {dst2}
    DST slots, {param} a scalar's fp32 bit pattern, {transpose} 0/1, {value} a float literal."""

    init: str
    call: str
    header: str
    kind: str          # "fpu_binary" | "sfpu_unary" | "sfpu_binary" | "sfpu_scalar" | "copy" | "matmul" | "fill"


INTRINSICS: dict[str, Intrinsic] = {
    # FPU binary ops between two CB tiles (result overwrites DST[dst]).
    "add_tiles": Intrinsic("add_init({a}, {b})", "add_tiles({a}, {b}, {ia}, {ib}, {dst})",
                           "api/compute/eltwise_binary.h", "fpu_binary"),
    "sub_tiles": Intrinsic("sub_init({a}, {b})", "sub_tiles({a}, {b}, {ia}, {ib}, {dst})",
                           "api/compute/eltwise_binary.h", "fpu_binary"),
    "mul_tiles": Intrinsic("mul_init({a}, {b})", "mul_tiles({a}, {b}, {ia}, {ib}, {dst})",
                           "api/compute/eltwise_binary.h", "fpu_binary"),
    # Matmul: DST[dst] += A[ia] @ B[ib]; transpose applies to B (in1) tiles.
    "matmul_tiles": Intrinsic("matmul_init({a}, {b}, {transpose})", "matmul_tiles({a}, {b}, {ia}, {ib}, {dst})",
                              "api/compute/matmul.h", "matmul"),
    # Unpack a CB tile into DST.
    "copy_tile": Intrinsic("copy_init({a})", "copy_tile({a}, {ia}, {dst})", "api/compute/tile_move_copy.h", "copy"),
    # SFPU binary ops between DST slots: DST[dst] = DST[dst] op DST[dst2].
    "add_binary_tile": Intrinsic("add_binary_tile_init()", "add_binary_tile({dst}, {dst2}, {dst})",
                                 "api/compute/eltwise_binary_sfpu.h", "sfpu_binary"),
    "sub_binary_tile": Intrinsic("sub_binary_tile_init()", "sub_binary_tile({dst}, {dst2}, {dst})",
                                 "api/compute/eltwise_binary_sfpu.h", "sfpu_binary"),
    "mul_binary_tile": Intrinsic("mul_binary_tile_init()", "mul_binary_tile({dst}, {dst2}, {dst})",
                                 "api/compute/eltwise_binary_sfpu.h", "sfpu_binary"),
    "div_binary_tile": Intrinsic("div_binary_tile_init()", "div_binary_tile({dst}, {dst2}, {dst})",
                                 "api/compute/eltwise_binary_sfpu.h", "sfpu_binary"),
    # SFPU ops with a scalar (fp32 bit pattern).
    "add_unary_tile": Intrinsic("binop_with_scalar_tile_init()", "add_unary_tile({dst}, {param})",
                                "api/compute/eltwise_unary/binop_with_scalar.h", "sfpu_scalar"),
    "sub_unary_tile": Intrinsic("binop_with_scalar_tile_init()", "sub_unary_tile({dst}, {param})",
                                "api/compute/eltwise_unary/binop_with_scalar.h", "sfpu_scalar"),
    "rsub_unary_tile": Intrinsic("binop_with_scalar_tile_init()", "rsub_unary_tile({dst}, {param})",
                                 "api/compute/eltwise_unary/binop_with_scalar.h", "sfpu_scalar"),
    "mul_unary_tile": Intrinsic("binop_with_scalar_tile_init()", "mul_unary_tile({dst}, {param})",
                                "api/compute/eltwise_unary/binop_with_scalar.h", "sfpu_scalar"),
    "div_unary_tile": Intrinsic("binop_with_scalar_tile_init()", "div_unary_tile({dst}, {param})",
                                "api/compute/eltwise_unary/binop_with_scalar.h", "sfpu_scalar"),
    # SFPU unary math, in place on DST[dst].
    "exp": Intrinsic("exp_tile_init()", "exp_tile({dst})", "api/compute/eltwise_unary/exp.h", "sfpu_unary"),
    "log": Intrinsic("log_tile_init()", "log_tile({dst})", "api/compute/compute_kernel_api.h", "sfpu_unary"),
    "sqrt": Intrinsic("sqrt_tile_init()", "sqrt_tile({dst})", "api/compute/eltwise_unary/sqrt.h", "sfpu_unary"),
    "rsqrt": Intrinsic("rsqrt_tile_init()", "rsqrt_tile({dst})", "api/compute/eltwise_unary/rsqrt.h", "sfpu_unary"),
    "recip": Intrinsic("recip_tile_init()", "recip_tile({dst})", "api/compute/eltwise_unary/recip.h", "sfpu_unary"),
    "relu": Intrinsic("relu_tile_init()", "relu_tile({dst})", "api/compute/eltwise_unary/relu.h", "sfpu_unary"),
    "tanh": Intrinsic("tanh_tile_init()", "tanh_tile({dst})", "api/compute/compute_kernel_api.h", "sfpu_unary"),
    "sigmoid": Intrinsic("sigmoid_tile_init()", "sigmoid_tile({dst})", "api/compute/compute_kernel_api.h",
                         "sfpu_unary"),
    "erf": Intrinsic("erf_tile_init()", "erf_tile({dst})", "api/compute/eltwise_unary/erf_erfc.h", "sfpu_unary"),
    # Whole-tile transpose of a CB tile into DST (used for T.gemm(transpose_A=True)).
    "transpose_tile": Intrinsic("transpose_init({a})", "transpose_tile({a}, {ia}, {dst})", "api/compute/transpose.h",
                                "copy"),
    # Fill DST[dst] with a constant.
    "fill_tile": Intrinsic("fill_tile_init()", "fill_tile({dst}, {value})", "api/compute/eltwise_unary/fill.h",
                           "fill"),
}

# TIR math operators that map to one SFPU unary intrinsic (matched by Op identity).
UNARY_TIR_OPS: dict[str, str] = {
    "tirx.exp": "exp",
    "tirx.log": "log",
    "tirx.sqrt": "sqrt",
    "tirx.rsqrt": "rsqrt",
    "tirx.tanh": "tanh",
    "tirx.sigmoid": "sigmoid",
    "tirx.erf": "erf",
}

# Headers every compute kernel includes.
COMPUTE_BASE_HEADERS = ("api/compute/common.h", "api/compute/compute_kernel_hw_startup.h", "api/compute/tile_move_copy.h",
                        "api/compute/reconfig_data_format.h", "api/compute/pack.h")
DATAFLOW_HEADER = "api/dataflow/dataflow_api.h"
