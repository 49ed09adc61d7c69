"""TT tile intrinsics: the TIR operators the passes emit, and the one table mapping each to its C++.

Two layers live here and nowhere else:

* ``TTOps``: TIR ``Op``s (each call's last argument is the TileLang statement it lowers, for comments) (registered from Python under ``tilelang_tt.*``) that the passes leave in the IR:
  ``read_block`` / ``write_block`` (reader / writer transfers between a tensor and a CB), and the compute
  ops ``fill``, ``matmul`` and ``eltwise``.
* ``CALLS``: every TT-Metalium call the printers emit (CB protocol, NoC helpers, DST ownership, inits,
  reconfigs, tile ops, pack) with its C++ form in the exact 0.81 API, its header and what the verifier needs
  to know about it (which init a tile op needs, which arguments are CB page counts).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import Op

_PREFIX = "tilelang_tt."


@lru_cache(maxsize=1)
def registered_op_names() -> frozenset:
    """TVM's registered op names when first asked: one walk of ~900 names through the FFI (~3-7 ms), for
    transform.common's UnsupportedOps."""
    return frozenset(str(n) for n in tvm.ir._ffi_api.ListOpNames())


# A global function registered once the ops below are: the TVM registries are per process and outlive a reload of
# this module, whose ops must not be registered twice (TVM refuses; a failed Op.get costs ~1 s of backtrace).
_REGISTERED_MARK = _PREFIX + "intrinsics_registered"
_FIRST_LOAD = tvm_ffi.get_global_func(_REGISTERED_MARK, allow_missing=True) is None


def _register(name: str, num_inputs: int) -> Op:
    full = _PREFIX + name
    if _FIRST_LOAD:
        tvm.ir._ffi_api.RegisterOp(full, f"tilelang-tt tile intrinsic {name}")
        op = Op.get(full)
        tvm.ir._ffi_api.OpSetNumInputs(op, num_inputs)
        tvm.ir.register_op_attr(full, "TCallEffectKind", tirx.CallEffectKind.Opaque)
        tvm.ir.register_op_attr(full, "TScriptPrinterName", f"tt_{name}")
    return Op.get(full)


class TTOps:
    # read_block(cb, tensor_index, tile_row, tile_col, rows, cols, row_off, nrows, col_off, ncols): reader moves a
    # rows x cols block of tiles; a block smaller than a tile is the window [row_off, +nrows) x [col_off, +ncols)
    # of its one tile (0, 32, 0, 32 for whole tiles)
    read_block = _register("read_block", 11)
    # write_block(cb, tensor_index, tile_row, tile_col, rows, cols, row_off, nrows, col_off, ncols): writer stores
    # a block (only the window of a sub-tile block) from a CB
    write_block = _register("write_block", 11)
    # insert_window(dst_cb, part_cb, prev_cb, tile_row, tile_col): dst becomes prev (a block the reader filled, or
    # dst itself) with the tiles at [tile_row, +part rows) x [tile_col, +part cols) replaced by part's (zeros
    # outside when dst holds nothing yet): a T.Parallel store into a tile-aligned window of a tile buffer
    insert_window = _register("insert_window", 6)
    # reduce(src_cb, dst_cb, kind, dim, clear, scratch_cb): dst (column vector for dim 1, row vector for dim 0) =
    # reduction of src along dim; kind is "sum" | "max" | "min" | "abssum" | "absmax"; scratch_cb (-1 if none)
    # holds |src| or -src for the abs / min kinds
    reduce = _register("reduce", 7)
    # fill(dst_cb, value): every tile of the destination becomes `value`
    fill = _register("fill", 3)
    # matmul(a_cb, b_cb, c_cb, transpose_a, transpose_b): C += A @ B over whole blocks
    matmul = _register("matmul", 6)
    # eltwise(dst_cb, expr): expr is a TIR expression over BufferLoad(tile buffer, [0, 0]) leaves and scalars
    eltwise = _register("eltwise", 3)
    # transpose(src_cb, dst_cb): dst block (C x R tiles) = transpose of the src block (R x C tiles)
    transpose = _register("transpose", 3)
    # index_load(tensor_index, row, col, cb): element (row, col) of an int32 index tensor's 2-D view, in a T.copy
    # offset (X[Table[b, j] * 32, 0]); the kernel that moves the block reads it from L1 through the index CB ``cb``
    # (LowerToTTProgram: read_index, noc_async_read_barrier, index_value)
    index_load = _register("index_load", 4)
    # index_value(cb, col): the element read_index left in ``cb``'s reserved page (an expression of the kernel)
    index_value = _register("index_value", 2)
    # tile_value(cb, offset): compute's load of the 32-bit word ``offset`` of the waited page of ``cb``
    # (api/compute/cb_api.h read_tile_value: the UNPACK thread reads it and hands it to MATH and PACK)
    tile_value = _register("tile_value", 2)
    # half_value(cb, word, shift, is_float16): a bfloat16 / float16 element as fp32 bits: bits [shift, shift + 16) of
    # the 32-bit word ``word`` of the waited page of ``cb`` (read_tile_value), widened (bfloat16_bits / float16_bits)
    half_value = _register("half_value", 4)
    # gather_rows(cb, tensor_index, index_tensor_index, pos_row, pos_col, step_row, step_col, scale, base, rows,
    # col_tile, cols, count, tensor_rows, index_cb, scratch_cb): row i of the block (rows x cols tiles from tile
    # column col_tile) is the tensor row v * scale + base, v the element (pos_row + i * step_row, pos_col + i *
    # step_col) of the int32 index tensor; positions at or past ``count`` along the gathered axis, and rows outside
    # the tensor's ``tensor_rows``, read no row (zeros)
    gather_rows = _register("gather_rows", 17)
    # im2col_rows(cb, tensor_index, nhw_step, c_step, N, H, W, C, kernel, stride, dilation, pad, rows, cols, scratch_cb):
    # T.im2col of an NHWC tensor (viewed as [N*H*W, C]): row i of the block is output pixel nhw_step * rows + i, its
    # cols tiles the channels of kernel tap (kh, kw) that column block c_step covers; padding taps read zeros
    im2col_rows = _register("im2col_rows", 16)
    # offset_rows(cb, tensor_index, row, rows, col_tile, cols, count, scratch_cb): a block of ``rows`` tensor rows
    # from element row ``row`` (not a multiple of 32: a varlen sequence's start), tile columns [col_tile, col_tile
    # + cols); rows at or past ``count`` (the tensor's rows) read zeros
    offset_rows = _register("offset_rows", 8)
    # write_rows(cb, tensor_index, row, rows, col_tile, cols, count, bound): row i of the block of ``cb`` written to
    # tensor row ``row + i`` (``row`` not a multiple of 32) over tile columns [col_tile, col_tile + cols) when
    # ``i < bound`` (a guard ``i < n`` of the T.Parallel that stores it; else ``rows``) and the row is inside the
    # tensor's ``count`` rows
    write_rows = _register("write_rows", 8)


if _FIRST_LOAD:
    tvm_ffi.register_global_func(_REGISTERED_MARK, lambda: True)


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
class CallSpec:
    """One TT-Metalium call the printers emit. ``cpp`` formats the call's arguments ({0}, {1}, ...).

    ``kind``: cb (CB protocol), dst (tile_regs_*), noc (data movement), startup, reconfig, init (sets the
    unpack/math state of ``unit``), op (a tile op needing the init named ``init``, whose arguments at
    ``init_args`` must equal the init's leading arguments), pack, packer (the packer's L1 accumulation flag).
    ``unit``: "fpu" (unpacker + FPU math) or
    "sfpu". ``pages``: (cb argument, page-count argument) of a CB protocol call."""

    cpp: str
    kind: str
    header: str | None = None
    unit: str | None = None
    init: str | None = None
    init_args: tuple = ()
    pages: tuple | None = None


_BIN = "api/compute/eltwise_binary.h"
_SFPU_BIN = "api/compute/eltwise_binary_sfpu.h"
_SCALAR = "api/compute/eltwise_unary/binop_with_scalar.h"


def _sfpu(header: str, init: str, op: str) -> dict[str, CallSpec]:
    return {init: CallSpec(f"{init}()", "init", header, "sfpu"),
            op: CallSpec(f"{op}({{0}})", "op", header, "sfpu", init)}


COMPARISONS = ("gt", "lt", "ge", "le", "eq", "ne")
BCAST_DIMS = {"rows": "ROW", "cols": "COL", "scalar": "SCALAR"}
POOLS = {"sum": "SUM", "max": "MAX"}


def _sfpu_param(header: str, init: str, op: str) -> dict[str, CallSpec]:
    return {init: CallSpec(f"{init}()", "init", header, "sfpu"),
            op: CallSpec(f"{op}({{0}}, {{1}})", "op", header, "sfpu", init)}


def _sfpu_binary(header: str, op: str) -> dict[str, CallSpec]:
    return {f"{op}_init": CallSpec(f"{op}_init()", "init", header, "sfpu"),
            op: CallSpec(f"{op}({{0}}, {{1}}, {{0}})", "op", header, "sfpu", f"{op}_init")}


def _bcast(dim: str) -> dict[str, CallSpec]:
    t = f"BroadcastType::{BCAST_DIMS[dim]}"
    h = "api/compute/bcast.h"
    return {f"unary_bcast_init_{dim}": CallSpec(f"unary_bcast_init<{t}>({{0}})", "init", h, "fpu"),
            f"unary_bcast_{dim}": CallSpec(f"unary_bcast<{t}>({{0}}, {{1}}, {{2}})", "op", h, "fpu",
                                           f"unary_bcast_init_{dim}", (0,)),
            f"unary_bcast_uninit_{dim}": CallSpec(f"unary_bcast_uninit<{t}>({{0}})", "init", h, "fpu")}


def _reduce(pool: str, dim: str) -> dict[str, CallSpec]:
    t = f"PoolType::{POOLS[pool]}, ReduceDim::REDUCE_{dim.upper()}"
    h = "api/compute/reduce.h"
    return {f"reduce_init_{pool}_{dim}": CallSpec(f"reduce_init<{t}>({{0}}, {{1}}, {{2}})", "init", h, "fpu"),
            f"reduce_tile_{pool}_{dim}": CallSpec(f"reduce_tile<{t}>({{0}}, {{1}}, {{2}}, {{3}}, {{4}})", "op", h, "fpu",
                                                  f"reduce_init_{pool}_{dim}", (0, 1))}


# The SFPU reduce (compute_kernel_api.h, 0.81.1): the data is in DST (copy_tile, unpack-to-DEST for Float32), the SFPU
# folds it in fp32 into column 0 (ROW) / row 0 (COL) of DST[{0}]: the exact path of float32 reductions.
SFPU_POOLS = {"sum": "SUM", "max": "MAX", "min": "MIN"}


def _sfpu_reduce(pool: str, dim: str) -> dict[str, CallSpec]:
    t = f"PoolType::{SFPU_POOLS[pool]}, DataFormat::Float32"
    h = "api/compute/compute_kernel_api.h"
    return {f"sfpu_reduce_init_{pool}": CallSpec(f"sfpu_reduce_init<{t}>()", "init", h, "sfpu"),
            f"sfpu_reduce_{pool}_{dim}": CallSpec(f"sfpu_reduce<{t}, ReduceDim::REDUCE_{dim.upper()}>({{0}})", "op", h,
                                                  "sfpu", f"sfpu_reduce_init_{pool}")}


# The reader's whole-tile block reads: row-major tile order, or transposed (tile (r, c) of the window at position
# c * rows + r: T.gemm(transpose_B=True)'s B, so matmul_block finds one K step's tiles adjacent).
BLOCK_READS = ("read_tiles", "read_tiles_transposed")

CALLS: dict[str, CallSpec] = {
    # CB protocol (both kinds of kernel).
    "cb_reserve_back": CallSpec("cb_reserve_back({0}, {1})", "cb", pages=(0, 1)),
    "cb_push_back": CallSpec("cb_push_back({0}, {1})", "cb", pages=(0, 1)),
    "cb_wait_front": CallSpec("cb_wait_front({0}, {1})", "cb", pages=(0, 1)),
    "cb_pop_front": CallSpec("cb_pop_front({0}, {1})", "cb", pages=(0, 1)),
    # Data movement: the helpers in templates/dataflow.cpp.j2 issue one NoC transfer per tile of a block.
    "read_tiles": CallSpec("read_tiles({0}, {1}, {1}_grid, {2}, {3}, {4}, {5})", "noc"),
    "read_tiles_window": CallSpec("read_tiles({0}, {1}, {1}_grid, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9})", "noc"),
    "read_tiles_transposed": CallSpec("read_tiles_transposed({0}, {1}, {1}_grid, {2}, {3}, {4}, {5})", "noc"),
    "noc_async_read_barrier": CallSpec("noc_async_read_barrier()", "noc"),
    # Indices from tensors: the 16-element face row holding element ({2}, {3}) of an int32 tensor, read into the
    # reserved page of the index CB {0}; after the read barrier, TTOps.index_value reads the element from L1.
    "read_index": CallSpec("read_index({0}, {1}, {1}_grid, {2}, {3})", "noc"),
    # A 16-bit element ({2}, {3}) used as a scalar: the 64-byte aligned part of its tile page holding it (two face
    # rows) into the reserved page of CB {0}; compute reads it with TTOps.half_value.
    "read_half": CallSpec("read_half({0}, {1}, {1}_grid, {2}, {3})", "noc"),
    # Row gathers: row {1} of the block at the back of CB {0} is row {3} (tile columns [{4}, {4} + {5})) of tensor
    # {2}, each face-row segment read as its 64-byte aligned chunk into the reserved page of the scratch CB {6} (the
    # tensor's format) and moved within L1; {7} = 0 zero-fills the row instead (a position past the index tensor).
    "gather_row": CallSpec("gather_row({0}, {1}, {2}, {2}_grid, {3}, {4}, {5}, {6}, {7})", "noc"),
    # Row scatters: row {1} of the block at the front of CB {0} written to row {3} of tensor {2} (tile columns
    # [{4}, {4} + {5})), one face-row segment at a time; {6} = 0 writes nothing (a row the kernel's guard excludes).
    "scatter_row": CallSpec("scatter_row({0}, {1}, {2}, {2}_grid, {3}, {4}, {5}, {6})", "noc"),
    # TTMulticastReuse's handshake, one TT-Metalium call each ({0}: the group, a McastGroup of
    # templates/dataflow_helpers.h.j2 holding the core's route and the L1 addresses of the group's two semaphores).
    # Sender: hold VALID in its own receiver semaphore (the flag's source word), wait until every receiver is ready
    # and reset the count, multicast the {2} tiles at the back of CB {1}, then the VALID flag.
    "mcast_hold_valid": CallSpec("noc_semaphore_set(semaphore_ptr({0}.receiver_sem_addr), kSemValid)", "noc"),
    "mcast_wait_ready": CallSpec("noc_semaphore_wait(semaphore_ptr({0}.sender_sem_addr), {0}.num_dests)", "noc"),
    "mcast_reset_ready": CallSpec("noc_semaphore_set(semaphore_ptr({0}.sender_sem_addr), 0)", "noc"),
    "mcast_write_block": CallSpec("noc_async_write_multicast(get_write_ptr({1}), mcast_addr({0}, get_write_ptr({1})), "
                                  "{2} * get_tile_size({1}), {0}.num_dests)", "noc"),
    "noc_async_writes_flushed": CallSpec("noc_async_writes_flushed()", "noc"),
    "mcast_set_valid": CallSpec("noc_semaphore_set_multicast({0}.receiver_sem_addr, "
                                "mcast_addr({0}, {0}.receiver_sem_addr), {0}.num_dests)", "noc"),
    # Receiver: reset its flag, tell the sender it has reserved the block, wait for VALID.
    "mcast_clear_valid": CallSpec("noc_semaphore_set(semaphore_ptr({0}.receiver_sem_addr), kSemInvalid)", "noc"),
    "mcast_signal_ready": CallSpec("noc_semaphore_inc(get_noc_addr({0}.sender_x, {0}.sender_y, "
                                   "{0}.sender_sem_addr), 1)", "noc"),
    "mcast_wait_valid": CallSpec("noc_semaphore_wait(semaphore_ptr({0}.receiver_sem_addr), kSemValid)", "noc"),
    "noc_async_atomic_barrier": CallSpec("noc_async_atomic_barrier()", "noc"),
    "write_tiles": CallSpec("write_tiles({0}, {1}, {1}_grid, {2}, {3}, {4}, {5})", "noc"),
    "write_tiles_window": CallSpec("write_tiles({0}, {1}, {1}_grid, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9})", "noc"),
    "noc_async_write_barrier": CallSpec("noc_async_write_barrier()", "noc"),
    # DST ownership between math and pack.
    "tile_regs_acquire": CallSpec("tile_regs_acquire()", "dst"),
    "tile_regs_commit": CallSpec("tile_regs_commit()", "dst"),
    "tile_regs_wait": CallSpec("tile_regs_wait()", "dst"),
    "tile_regs_release": CallSpec("tile_regs_release()", "dst"),
    # Constant tiles the reader builds: the reduce scaler (1.0 in row 0 of every face, the rest 0).
    "generate_reduce_scaler": CallSpec("generate_reduce_scaler({0})", "noc"),
    # ... and the index tiles (each element's row / column within its tile, float32) of loop variables used as values.
    "generate_index_tile": CallSpec("generate_index_tile({0}, {1})", "noc"),
    # Start-up and data-format reconfiguration.
    "hw_startup": CallSpec("compute_kernel_hw_startup({0}, {1}, {2})", "startup",
                           "api/compute/compute_kernel_hw_startup.h"),
    "hw_startup_matmul": CallSpec("compute_kernel_hw_startup<SrcOrder::Reverse>({0}, {1}, {2})", "startup",
                                  "api/compute/compute_kernel_hw_startup.h"),
    "reconfig_data_format": CallSpec("reconfig_data_format({0}, {1})", "reconfig", "api/compute/reconfig_data_format.h"),
    "reconfig_data_format_srca": CallSpec("reconfig_data_format_srca({0})", "reconfig",
                                          "api/compute/reconfig_data_format.h"),
    "pack_reconfig_data_format": CallSpec("pack_reconfig_data_format({0})", "reconfig",
                                          "api/compute/reconfig_data_format.h"),
    "pack_tile": CallSpec("pack_tile({0}, {1})", "pack", "api/compute/pack.h"),
    # Packer L1 accumulation (1: pack_tile adds DST to the tile already in L1; 0: plain writes). A packer setting
    # of its own kind: HoistInits neither hoists nor drops it (LowerToTTProgram places each pair).
    "pack_reconfig_l1_acc": CallSpec("pack_reconfig_l1_acc({0})", "packer", "api/compute/pack.h"),
    # Unpack a CB tile into DST, plain or transposed.
    "copy_init": CallSpec("copy_init({0})", "init", "api/compute/tile_move_copy.h", "fpu"),
    "copy_tile": CallSpec("copy_tile({0}, {1}, {2})", "op", "api/compute/tile_move_copy.h", "fpu", "copy_init", (0,)),
    "transpose_init": CallSpec("transpose_init({0})", "init", "api/compute/transpose.h", "fpu"),
    "transpose_tile": CallSpec("transpose_tile({0}, {1}, {2})", "op", "api/compute/transpose.h", "fpu",
                               "transpose_init", (0,)),
    # Matmul: DST[dst] += A[ia] @ B[ib]; the init's flag transposes B (in1) tiles.
    "matmul_init": CallSpec("matmul_init({0}, {1}, {2})", "init", "api/compute/matmul.h", "fpu"),
    "matmul_tiles": CallSpec("matmul_tiles({0}, {1}, {2}, {3}, {4})", "op", "api/compute/matmul.h", "fpu",
                             "matmul_init", (0, 1)),
    # matmul_block(in0, in1, i0, i1, idst, transpose, ct, rt, kt): DST[idst + r * ct + c] += A[i0 + r * kt] @
    # B[i1 + c] for r < rt, c < ct: rt in0 tiles and ct in1 tiles unpacked for rt * ct tile matmuls. Its init
    # takes the block shape (in0, in1, transpose, ct, rt, kt).
    "matmul_block_init": CallSpec("matmul_block_init({0}, {1}, {2}, {3}, {4}, {5})", "init", "api/compute/matmul.h",
                                  "fpu"),
    "matmul_block": CallSpec("matmul_block({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8})", "op", "api/compute/matmul.h",
                             "fpu", "matmul_block_init", (0, 1)),
    # FPU binary ops between two CB tiles (result overwrites DST[dst]).
    "add_init": CallSpec("add_init({0}, {1})", "init", _BIN, "fpu"),
    "add_tiles": CallSpec("add_tiles({0}, {1}, {2}, {3}, {4})", "op", _BIN, "fpu", "add_init", (0, 1)),
    "sub_init": CallSpec("sub_init({0}, {1})", "init", _BIN, "fpu"),
    "sub_tiles": CallSpec("sub_tiles({0}, {1}, {2}, {3}, {4})", "op", _BIN, "fpu", "sub_init", (0, 1)),
    "mul_init": CallSpec("mul_init({0}, {1})", "init", _BIN, "fpu"),
    "mul_tiles": CallSpec("mul_tiles({0}, {1}, {2}, {3}, {4})", "op", _BIN, "fpu", "mul_init", (0, 1)),
    # SFPU binary ops between DST slots: DST[{0}] = DST[{0}] op DST[{1}].
    "add_binary_tile_init": CallSpec("add_binary_tile_init()", "init", _SFPU_BIN, "sfpu"),
    "add_binary_tile": CallSpec("add_binary_tile({0}, {1}, {0})", "op", _SFPU_BIN, "sfpu", "add_binary_tile_init"),
    "sub_binary_tile_init": CallSpec("sub_binary_tile_init()", "init", _SFPU_BIN, "sfpu"),
    "sub_binary_tile": CallSpec("sub_binary_tile({0}, {1}, {0})", "op", _SFPU_BIN, "sfpu", "sub_binary_tile_init"),
    "mul_binary_tile_init": CallSpec("mul_binary_tile_init()", "init", _SFPU_BIN, "sfpu"),
    "mul_binary_tile": CallSpec("mul_binary_tile({0}, {1}, {0})", "op", _SFPU_BIN, "sfpu", "mul_binary_tile_init"),
    "div_binary_tile_init": CallSpec("div_binary_tile_init()", "init", _SFPU_BIN, "sfpu"),
    "div_binary_tile": CallSpec("div_binary_tile({0}, {1}, {0})", "op", _SFPU_BIN, "sfpu", "div_binary_tile_init"),
    # SFPU ops with a scalar (its fp32 bit pattern).
    "binop_with_scalar_tile_init": CallSpec("binop_with_scalar_tile_init()", "init", _SCALAR, "sfpu"),
    **{f"{k}_unary_tile": CallSpec(f"{k}_unary_tile({{0}}, {{1}})", "op", _SCALAR, "sfpu", "binop_with_scalar_tile_init")
       for k in ("add", "sub", "rsub", "mul", "div")},
    # SFPU unary math, in place on DST[{0}].
    **_sfpu("api/compute/eltwise_unary/exp.h", "exp_tile_init", "exp_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "log_tile_init", "log_tile"),
    **_sfpu("api/compute/eltwise_unary/sqrt.h", "sqrt_tile_init", "sqrt_tile"),
    **_sfpu("api/compute/eltwise_unary/rsqrt.h", "rsqrt_tile_init", "rsqrt_tile"),
    **_sfpu("api/compute/eltwise_unary/recip.h", "recip_tile_init", "recip_tile"),
    **_sfpu("api/compute/eltwise_unary/relu.h", "relu_tile_init", "relu_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "tanh_tile_init", "tanh_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "sigmoid_tile_init", "sigmoid_tile"),
    **_sfpu("api/compute/eltwise_unary/erf_erfc.h", "erf_tile_init", "erf_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "exp2_tile_init", "exp2_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "abs_tile_init", "abs_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "square_tile_init", "square_tile"),
    **_sfpu("api/compute/compute_kernel_api.h", "silu_tile_init", "silu_tile"),
    **_sfpu("api/compute/eltwise_unary/negative.h", "negative_tile_init", "negative_tile"),
    # SFPU unary with one parameter: DST[{0}] = f(DST[{0}], {1}) ({1}: an fp32 bit pattern, power_tile's exponent too).
    **_sfpu_param("api/compute/compute_kernel_api.h", "power_tile_init", "power_tile"),
    **_sfpu_param("api/compute/compute_kernel_api.h", "unary_max_tile_init", "unary_max_tile"),
    **_sfpu_param("api/compute/compute_kernel_api.h", "unary_min_tile_init", "unary_min_tile"),
    **{k: v for cmp in COMPARISONS for k, v in _sfpu_param("api/compute/eltwise_unary/comp.h", f"unary_{cmp}_tile_init",
                                                           f"unary_{cmp}_tile").items()},
    # SFPU binary max/min and comparisons between DST slots (1.0 / 0.0): DST[{0}] = op(DST[{0}], DST[{1}]).
    **{k: v for op in ("max", "min") for k, v in _sfpu_binary("api/compute/binary_max_min.h", f"binary_{op}_tile").items()},
    **{k: v for cmp in COMPARISONS for k, v in _sfpu_binary(_SFPU_BIN, f"{cmp}_binary_tile").items()},
    # clamp: DST[{0}] = min(max(DST[{0}], lo), hi) (bounds as fp32 bit patterns).
    "clamp_tile_init": CallSpec("clamp_tile_init()", "init", "api/compute/eltwise_unary/clamp.h", "sfpu"),
    "clamp_tile": CallSpec("clamp_tile({0}, {1}, {2})", "op", "api/compute/eltwise_unary/clamp.h", "sfpu",
                           "clamp_tile_init"),
    # select: DST[{1}] = DST[{0}] != 0 ? DST[{1}] : DST[{2}] (the DST format of the kernel as template argument).
    "where_tile_init": CallSpec("where_tile_init()", "init", "api/compute/eltwise_unary/where.h", "sfpu"),
    "where_tile": CallSpec("where_tile<{3}>({0}, {1}, {2}, {1})", "op", "api/compute/eltwise_unary/where.h", "sfpu",
                           "where_tile_init"),
    # typecast between an integer and a float DST value, in place on DST[{2}]: typecast_tile<IN, OUT> with IN, OUT
    # tt::DataFormat values ({0}, {1}: static_cast<uint32_t>(DataFormat::X)); the pairs LowerToTTProgram emits are
    # <UInt8, Float32> after copy_tile of a UInt8 CB and <Float32, UInt8> before pack_tile into one.
    "typecast_tile_init": CallSpec("typecast_tile_init<{0}, {1}>()", "init", "api/compute/eltwise_unary/typecast.h",
                                   "sfpu"),
    "typecast_tile": CallSpec("typecast_tile<{0}, {1}>({2})", "op", "api/compute/eltwise_unary/typecast.h", "sfpu",
                              "typecast_tile_init", (0, 1)),
    # FPU binary ops whose second operand (a row / column / scalar vector tile) is broadcast.
    **{k: v for op in ("add", "sub", "mul") for dim in BCAST_DIMS for k, v in {
        f"{op}_bcast_{dim}_init": CallSpec(f"{op}_bcast_{dim}_init({{0}}, {{1}})", "init", "api/compute/bcast.h", "fpu"),
        f"{op}_tiles_bcast_{dim}": CallSpec(f"{op}_tiles_bcast_{dim}({{0}}, {{1}}, {{2}}, {{3}}, {{4}})", "op",
                                            "api/compute/bcast.h", "fpu", f"{op}_bcast_{dim}_init", (0, 1))}.items()},
    # Broadcast a row / column / scalar vector tile into DST (unpacked through SrcB), then restore the unpacker.
    **{k: v for dim in BCAST_DIMS for k, v in _bcast(dim).items()},
    # Reductions (the scaler CB {1} holds 1.0 in row 0 of every face); the result folds into DST[{4}].
    **{k: v for pool in POOLS for dim in ("row", "col") for k, v in _reduce(pool, dim).items()},
    "reduce_uninit": CallSpec("reduce_uninit()", "init", "api/compute/reduce.h", "fpu"),
    **{k: v for pool in SFPU_POOLS for dim in ("row", "col") for k, v in _sfpu_reduce(pool, dim).items()},
    # Fill DST[{0}] with a constant.
    "fill_tile_init": CallSpec("fill_tile_init()", "init", "api/compute/eltwise_unary/fill.h", "sfpu"),
    "fill_tile": CallSpec("fill_tile({0}, {1})", "op", "api/compute/eltwise_unary/fill.h", "sfpu", "fill_tile_init"),
    "fill_tile_bitcast": CallSpec("fill_tile_bitcast({0}, {1})", "op", "api/compute/eltwise_unary/fill.h", "sfpu",
                                  "fill_tile_init"),
}


# TIR math operators that map to one SFPU unary intrinsic (matched by Op identity).
UNARY_TIR_OPS: dict[str, str] = {
    "tirx.exp": "exp_tile",
    "tirx.log": "log_tile",
    "tirx.sqrt": "sqrt_tile",
    "tirx.rsqrt": "rsqrt_tile",
    "tirx.tanh": "tanh_tile",
    "tirx.sigmoid": "sigmoid_tile",
    "tirx.erf": "erf_tile",
    "tirx.exp2": "exp2_tile",
    "tirx.fabs": "abs_tile",
}

# Headers every compute kernel includes.
COMPUTE_BASE_HEADERS = ("api/compute/common.h", "api/compute/compute_kernel_hw_startup.h", "api/compute/tile_move_copy.h",
                        "api/compute/reconfig_data_format.h", "api/compute/pack.h")
DATAFLOW_HEADER = "api/dataflow/dataflow_api.h"
