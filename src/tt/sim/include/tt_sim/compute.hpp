// tt-sim: the TT-Metalium 0.81 compute kernel API (api/compute/*), executed by the emulator.
// The compute kernel runs as one task (the UNPACK/MATH/PACK split is not visible at this API level apart
// from the DST handshake, which the emulator checks). Signatures (template parameters and their defaults
// included) match the SDK's api/compute headers; a trailing defaulted `line` records the caller's source line
// for diagnostics. Template parameters that select hardware approximations or DST precision are accepted and
// ignored: the emulator computes in fp32 and rounds DST by the kernel's fp32_dest_acc_en (docs/emulator.md).
#pragma once

#include <cstdint>

#include "tt_sim/common.hpp"
#include "tt_sim/hw_constants.hpp"

// The kernel JIT defines TT_SIM_DST_ACCUM_MODE / TT_SIM_APPROX from the ComputeConfig (the SDK's JIT writes the
// same constants into chlkc_*.h).
#ifndef TT_SIM_DST_ACCUM_MODE
#define TT_SIM_DST_ACCUM_MODE 0
#endif
#ifndef TT_SIM_APPROX
#define TT_SIM_APPROX 0
#endif
constexpr bool DST_ACCUM_MODE = TT_SIM_DST_ACCUM_MODE != 0;
constexpr bool APPROX = TT_SIM_APPROX != 0;

// tt::DataFormat as device code sees it (tensix_types.h: a global enum class).
enum class DataFormat : uint8_t { TT_SIM_DATA_FORMAT_ENUMERATORS };

// The SDK declares these in namespace ckernel (llk_defs.h, api/compute/*.h) and kernels see them through
// `using namespace ckernel`.
namespace ckernel {
enum class VectorMode : uint8_t { None = 0, R = 1, C = 2, RC = 4, RC_custom = 6, Invalid = 0xFF };
enum class ReduceDim : uint8_t { REDUCE_ROW, REDUCE_COL, REDUCE_SCALAR };
enum class PoolType : uint8_t { SUM, AVG, MAX, MIN };
enum class EltwiseBinaryType : uint8_t { ELWMUL, ELWDIV, ELWADD, ELWSUB, ELWLESS };
enum class BroadcastType : uint8_t { NONE = 0x0, COL = 0x1, ROW = 0x2, SCALAR = 0x3 };
enum class DstRoundingMode : uint8_t { Default = 0, NearestEven = 1 };
enum class InputClamping : uint8_t { ClampToNegative = 1, None = 0 };
enum class RsqrtMode { Default, Fast };
enum class ReciprocalDestAcc { BF16, FP32 };
enum class ReciprocalApproxMode { Default, Precise, Approximate };
}  // namespace ckernel
using namespace ckernel;

enum class SrcOrder : uint8_t { Regular, Reverse };

namespace tt_sim {
uint32_t cb_tile_value(uint32_t cb, uint32_t tile_index, uint32_t element_offset, uint32_t line);
}  // namespace tt_sim

// api/compute/cb_api.h: a 32-bit word of a waited tile, the same value on every compute thread.
inline uint32_t read_tile_value(uint32_t cb_id, uint32_t tile_index, uint32_t element_offset, TT_SIM_LINE) {
    return tt_sim::cb_tile_value(cb_id, tile_index, element_offset, line);
}

namespace tt_sim::kapi {
constexpr uint8_t vm(VectorMode mode) { return static_cast<uint8_t>(mode); }
constexpr uint8_t kRC = static_cast<uint8_t>(VectorMode::RC);
inline void sfpu_init(const char* name, uint32_t line) { tt_sim::op_init(tt_sim::Init::Sfpu, 0, 0, 0, name, line); }
template <PoolType P>
constexpr tt_sim::ReducePool pool() {
    static_assert(P != PoolType::MIN,
                  "The FPU reduce has no MIN: the hardware provides GMPOOL (max) and GAPOOL (average) only. "
                  "Use the SFPU reduce instead (ckernel_sfpu_reduce.h::calculate_reduce).");
    return P == PoolType::SUM ? tt_sim::ReducePool::Sum
                              : (P == PoolType::AVG ? tt_sim::ReducePool::Avg : tt_sim::ReducePool::Max);
}
template <ReduceDim D>
constexpr tt_sim::ReduceAxis axis() {
    return D == ReduceDim::REDUCE_ROW ? tt_sim::ReduceAxis::Row
                                      : (D == ReduceDim::REDUCE_COL ? tt_sim::ReduceAxis::Col : tt_sim::ReduceAxis::Scalar);
}
constexpr tt_sim::BcastDim bdim(BroadcastType t) { return static_cast<tt_sim::BcastDim>(static_cast<uint8_t>(t)); }
constexpr tt_sim::Binary bop(EltwiseBinaryType t) {
    return t == EltwiseBinaryType::ELWADD ? tt_sim::Binary::Add
                                          : (t == EltwiseBinaryType::ELWSUB ? tt_sim::Binary::Sub : tt_sim::Binary::Mul);
}
}  // namespace tt_sim::kapi

// ---- start-up and data formats -------------------------------------------------------------------------
template <SrcOrder src_order = SrcOrder::Regular>
inline void compute_kernel_hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb, TT_SIM_LINE) {
    tt_sim::hw_startup(icb0, icb1, ocb,
                       src_order == SrcOrder::Reverse ? tt_sim::SrcOrder::Reverse : tt_sim::SrcOrder::Regular, line);
}
inline void compute_kernel_hw_startup(uint32_t icb0, uint32_t ocb, TT_SIM_LINE) {
    tt_sim::hw_startup(icb0, icb0, ocb, tt_sim::SrcOrder::Regular, line);
}
// (icb0 -> SrcA, icb1 -> SrcB; SrcOrder::Reverse swaps them, as for matmul)
template <SrcOrder src_order = SrcOrder::Regular>
inline void reconfig_data_format(uint32_t icb0_new_operand, uint32_t icb1_new_operand, TT_SIM_LINE) {
    constexpr bool reverse = src_order == SrcOrder::Reverse;
    tt_sim::reconfig_srca(reverse ? icb1_new_operand : icb0_new_operand, line);
    tt_sim::reconfig_srcb(reverse ? icb0_new_operand : icb1_new_operand, line);
}
template <SrcOrder src_order = SrcOrder::Regular>
inline void reconfig_data_format(uint32_t icb0_old_operand, uint32_t icb0_new_operand, uint32_t icb1_old_operand,
                                 uint32_t icb1_new_operand, TT_SIM_LINE) {
    (void)icb0_old_operand;
    (void)icb1_old_operand;
    reconfig_data_format<src_order>(icb0_new_operand, icb1_new_operand, line);
}
inline void reconfig_data_format_srca(uint32_t srca_new, TT_SIM_LINE) { tt_sim::reconfig_srca(srca_new, line); }
inline void reconfig_data_format_srca(uint32_t srca_old, uint32_t srca_new, TT_SIM_LINE) {
    (void)srca_old;
    tt_sim::reconfig_srca(srca_new, line);
}
inline void reconfig_data_format_srcb(uint32_t srcb_new, TT_SIM_LINE) { tt_sim::reconfig_srcb(srcb_new, line); }
inline void reconfig_data_format_srcb(uint32_t srcb_old, uint32_t srcb_new, TT_SIM_LINE) {
    (void)srcb_old;
    tt_sim::reconfig_srcb(srcb_new, line);
}
template <bool is_tile_dim_reconfig_en = false>
inline void pack_reconfig_data_format(uint32_t new_cb, TT_SIM_LINE) {
    tt_sim::reconfig_pack(new_cb, line);
}
template <bool is_tile_dim_reconfig_en = false>
inline void pack_reconfig_data_format(uint32_t old_cb, uint32_t new_cb, TT_SIM_LINE) {
    (void)old_cb;
    tt_sim::reconfig_pack(new_cb, line);
}

// ---- DST handshake and packing ---------------------------------------------------------------------------
inline void tile_regs_acquire(TT_SIM_LINE) { tt_sim::tile_regs_acquire(line); }
inline void tile_regs_commit(TT_SIM_LINE) { tt_sim::tile_regs_commit(line); }
inline void tile_regs_wait(TT_SIM_LINE) { tt_sim::tile_regs_wait(line); }
inline void tile_regs_release(TT_SIM_LINE) { tt_sim::tile_regs_release(line); }

template <bool out_of_order_output = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void pack_tile(uint32_t ifrom_dst, uint32_t icb, uint32_t output_tile_index = 0, TT_SIM_LINE) {
    tt_sim::pack_tile(ifrom_dst, icb, output_tile_index, out_of_order_output, line);
}

inline void pack_reconfig_l1_acc(const std::uint32_t l1_acc_en, TT_SIM_LINE) {
    tt_sim::pack_reconfig_l1_acc(l1_acc_en, line);
}

// ---- unpack to DST ---------------------------------------------------------------------------------------
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void copy_init(uint32_t cb, uint32_t transpose = 0, uint32_t transpose_within_16x16_face = false,
                      uint32_t call_line = __builtin_LINE()) {
    (void)transpose_within_16x16_face;
    tt_sim::op_init(tt_sim::Init::Copy, cb, cb, transpose, "copy_init", call_line);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void copy_tile(uint32_t in_cb_id, uint32_t in_tile_index, uint32_t dst_tile_index, TT_SIM_LINE) {
    tt_sim::copy_tile(in_cb_id, in_tile_index, dst_tile_index, line);
}
inline void transpose_init(uint32_t icb, uint32_t call_line = __builtin_LINE()) {
    tt_sim::op_init(tt_sim::Init::Transpose, icb, icb, 0, "transpose_init", call_line);
}
inline void transpose_tile(uint32_t icb, uint32_t itile, uint32_t idst, TT_SIM_LINE) {
    tt_sim::transpose_tile(icb, itile, idst, line);
}

// ---- matmul ----------------------------------------------------------------------------------------------
inline void matmul_init(uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t transpose = 0,
                        uint32_t call_line = __builtin_LINE()) {
    tt_sim::op_init(tt_sim::Init::Matmul, in0_cb_id, in1_cb_id, transpose, "matmul_init", call_line);
}
inline void matmul_tiles(uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index,
                         uint32_t idst, TT_SIM_LINE) {
    tt_sim::matmul_tiles(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, line);
}
// matmul_block: DST[idst + r * ct_dim + c] += in0[in0_tile_index + r * kt_dim] @ in1[in1_tile_index + c]
inline void matmul_block_init(uint32_t in0_cb_id, uint32_t in1_cb_id, const uint32_t transpose = 0, uint32_t ct_dim = 1,
                              uint32_t rt_dim = 1, uint32_t kt_dim = 1, uint32_t call_line = __builtin_LINE()) {
    tt_sim::op_init(tt_sim::Init::Matmul, in0_cb_id, in1_cb_id, transpose, "matmul_block_init", call_line);
    tt_sim::matmul_block_dims(ct_dim, rt_dim, kt_dim, call_line);
}
inline void matmul_block(uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index,
                         uint32_t idst, const uint32_t transpose, uint32_t ct_dim, uint32_t rt_dim, uint32_t kt_dim,
                         uint32_t call_line = __builtin_LINE()) {
    tt_sim::matmul_block(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, transpose, ct_dim, rt_dim, kt_dim,
                         call_line);
}

// ---- FPU binary (eltwise_binary.h) -----------------------------------------------------------------------
inline void add_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, uint32_t call_line = __builtin_LINE()) {
    tt_sim::op_init(tt_sim::Init::Binary, icb0, icb1, acc_to_dest, "add_init", call_line);
}
inline void sub_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, uint32_t call_line = __builtin_LINE()) {
    tt_sim::op_init(tt_sim::Init::Binary, icb0, icb1, acc_to_dest, "sub_init", call_line);
}
inline void mul_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = true, uint32_t call_line = __builtin_LINE()) {
    tt_sim::op_init(tt_sim::Init::Binary, icb0, icb1, acc_to_dest, "mul_init", call_line);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void add_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) {
    tt_sim::binary_tiles(tt_sim::Binary::Add, icb0, icb1, itile0, itile1, idst, line);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void sub_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) {
    tt_sim::binary_tiles(tt_sim::Binary::Sub, icb0, icb1, itile0, itile1, idst, line);
}
template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void mul_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) {
    tt_sim::binary_tiles(tt_sim::Binary::Mul, icb0, icb1, itile0, itile1, idst, line);
}

// ---- reduce (reduce.h) -----------------------------------------------------------------------------------
// REDUCE_ROW: DST[r][0] (op)= reduce_c A[r][c] * scaler; REDUCE_COL: DST[0][c]; REDUCE_SCALAR: DST[0][0].
// Accumulates into DST; the packer writes only those positions (0 elsewhere) until reduce_uninit().
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void reduce_init(uint32_t icb, uint32_t icb_scaler, uint32_t ocb, uint32_t call_line = __builtin_LINE()) {
    tt_sim::reduce_init(tt_sim::kapi::pool<reduce_type>(), tt_sim::kapi::axis<reduce_dim>(), icb, icb_scaler, ocb,
                        call_line);
}
inline void reduce_uninit(uint32_t icb = 0, TT_SIM_LINE) {
    (void)icb;
    tt_sim::reduce_uninit(line);
}
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void reduce_tile(uint32_t icb, uint32_t icb_scaler, uint32_t itile, uint32_t itile_scaler, uint32_t idst,
                        TT_SIM_LINE) {
    tt_sim::reduce_tile(tt_sim::kapi::pool<reduce_type>(), tt_sim::kapi::axis<reduce_dim>(), icb, icb_scaler, itile,
                        itile_scaler, idst, line);
}
template <PoolType reduce_type, ReduceDim reduce_dim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void reduce_block(uint32_t icb, uint32_t icb_scaler, uint32_t start_itile, uint32_t itile_scaler,
                         uint32_t start_idst, uint32_t ntiles, TT_SIM_LINE) {
    for (uint32_t i = 0; i < ntiles; ++i) {
        tt_sim::reduce_tile(tt_sim::kapi::pool<reduce_type>(), tt_sim::kapi::axis<reduce_dim>(), icb, icb_scaler,
                            start_itile + i, itile_scaler, start_idst + i, line);
    }
}

// ---- SFPU reduce (compute_kernel_api.h, 0.81.1: sfpu_reduce / sfpu_reduce_init) ---------------------------
// The data is in DST already (copy_tile); the SFPU reduces it in fp32 (Float32 data needs fp32_dest_acc_en):
// REDUCE_ROW: each row of the ct_dim x rt_dim block of tiles at idst into column 0 of the first tile of its tile
// row (SUM, AVG, MAX, MIN); REDUCE_COL (one tile): each column into row 0. The other positions of those tiles hold
// the SFPU's partial results on hardware: tt-sim writes NaN there, so a kernel that reads them shows it.
template <PoolType pool_type, DataFormat format, ReduceDim reduce_dim = ReduceDim::REDUCE_COL,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void sfpu_reduce(uint32_t idst, uint32_t ct_dim = 1, uint32_t rt_dim = 1, TT_SIM_LINE) {
    static_assert(reduce_dim == ReduceDim::REDUCE_COL ||
                      (reduce_dim == ReduceDim::REDUCE_ROW &&
                       (pool_type == PoolType::SUM || pool_type == PoolType::MAX || pool_type == PoolType::MIN)),
                  "Only column reduction (REDUCE_COL) is supported for all pool types; row reduction (REDUCE_ROW) is "
                  "only supported for SUM, MAX and MIN");
    static_assert(format == DataFormat::Float32 || format == DataFormat::Int32 || format == DataFormat::UInt32 ||
                      format == DataFormat::UInt16 || format == DataFormat::Float16_b,
                  "Unsupported data format. Supported formats: Float32, Int32, UInt32, UInt16, Float16_b");
    static_assert(format == DataFormat::Float32 || format == DataFormat::Float16_b,
                  "tt-sim: sfpu_reduce is emulated for Float32 and Float16_b data");
    tt_sim::sfpu_reduce(static_cast<uint8_t>(pool_type), tt_sim::kapi::axis<reduce_dim>(), static_cast<uint8_t>(format),
                        idst, ct_dim, rt_dim, line);
}
template <PoolType pool_type, DataFormat format, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void sfpu_reduce_init(TT_SIM_LINE) {
    static_assert(format == DataFormat::Float32 || format == DataFormat::Int32 || format == DataFormat::UInt32 ||
                      format == DataFormat::UInt16 || format == DataFormat::Float16_b,
                  "Unsupported data format. Supported formats: Float32, Int32, UInt32, UInt16, Float16_b");
    tt_sim::sfpu_reduce_init(static_cast<uint8_t>(pool_type), static_cast<uint8_t>(format), line);
}

// ---- broadcast (bcast.h): B (icb1) broadcast over A; ROW: b[0][c], COL: b[r][0], SCALAR: b[0][0] -------------
#define TT_SIM_BCAST_INIT(name, kind)                                                                       \
    inline void name(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {                 \
        tt_sim::op_init(tt_sim::Init::Bcast, icb0, icb1, 0, #name, call_line);                               \
    }
TT_SIM_BCAST_INIT(add_bcast_rows_init, Row)
TT_SIM_BCAST_INIT(sub_bcast_rows_init, Row)
TT_SIM_BCAST_INIT(mul_bcast_rows_init, Row)
TT_SIM_BCAST_INIT(add_bcast_cols_init, Col)
TT_SIM_BCAST_INIT(sub_bcast_cols_init, Col)
TT_SIM_BCAST_INIT(mul_bcast_cols_init, Col)
TT_SIM_BCAST_INIT(add_bcast_scalar_init, Scalar)
TT_SIM_BCAST_INIT(sub_bcast_scalar_init, Scalar)
TT_SIM_BCAST_INIT(mul_bcast_scalar_init, Scalar)
#undef TT_SIM_BCAST_INIT

#define TT_SIM_BCAST_TILES(name, op, dim)                                                                   \
    template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                                                    \
    inline void name(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) { \
        tt_sim::bcast_tiles(tt_sim::Binary::op, tt_sim::BcastDim::dim, icb0, icb1, itile0, itile1, idst, 0, line); \
    }
#define TT_SIM_BCAST_ROWS(name, op)                                                                         \
    template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                                                    \
    inline void name(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst,         \
                     uint32_t bcast_row_idx = 0, TT_SIM_LINE) {                                             \
        tt_sim::bcast_tiles(tt_sim::Binary::op, tt_sim::BcastDim::Row, icb0, icb1, itile0, itile1, idst,     \
                            bcast_row_idx, line);                                                           \
    }
TT_SIM_BCAST_ROWS(add_tiles_bcast_rows, Add)
TT_SIM_BCAST_ROWS(sub_tiles_bcast_rows, Sub)
TT_SIM_BCAST_ROWS(mul_tiles_bcast_rows, Mul)
TT_SIM_BCAST_TILES(add_tiles_bcast_cols, Add, Col)
TT_SIM_BCAST_TILES(sub_tiles_bcast_cols, Sub, Col)
TT_SIM_BCAST_TILES(mul_tiles_bcast_cols, Mul, Col)
TT_SIM_BCAST_TILES(add_tiles_bcast_scalar, Add, Scalar)
TT_SIM_BCAST_TILES(sub_tiles_bcast_scalar, Sub, Scalar)
TT_SIM_BCAST_TILES(mul_tiles_bcast_scalar, Mul, Scalar)
#undef TT_SIM_BCAST_TILES
#undef TT_SIM_BCAST_ROWS

template <EltwiseBinaryType tBcastOp, BroadcastType tBcastDim>
inline void bcast_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    static_assert(tBcastOp == EltwiseBinaryType::ELWADD || tBcastOp == EltwiseBinaryType::ELWSUB ||
                      tBcastOp == EltwiseBinaryType::ELWMUL,
                  "tt-sim: broadcast ops are ELWADD, ELWSUB and ELWMUL");
    tt_sim::op_init(tt_sim::Init::Bcast, icb0, icb1, 0, "bcast_init", call_line);
}
template <EltwiseBinaryType tBcastOp, BroadcastType tBcastDim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void any_tiles_bcast(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst,
                            uint32_t bcast_row_idx = 0, TT_SIM_LINE) {
    static_assert(tBcastOp == EltwiseBinaryType::ELWADD || tBcastOp == EltwiseBinaryType::ELWSUB ||
                      tBcastOp == EltwiseBinaryType::ELWMUL,
                  "tt-sim: broadcast ops are ELWADD, ELWSUB and ELWMUL");
    tt_sim::bcast_tiles(tt_sim::kapi::bop(tBcastOp), tt_sim::kapi::bdim(tBcastDim), icb0, icb1, itile0, itile1, idst,
                        bcast_row_idx, line);
}
#define TT_SIM_BCAST_GENERIC(name, op)                                                                       \
    template <BroadcastType tBcastDim, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                            \
    inline void name(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst,          \
                     uint32_t bcast_row_idx = 0, TT_SIM_LINE) {                                              \
        tt_sim::bcast_tiles(tt_sim::Binary::op, tt_sim::kapi::bdim(tBcastDim), icb0, icb1, itile0, itile1, idst, \
                            bcast_row_idx, line);                                                            \
    }
TT_SIM_BCAST_GENERIC(add_tiles_bcast, Add)
TT_SIM_BCAST_GENERIC(sub_tiles_bcast, Sub)
TT_SIM_BCAST_GENERIC(mul_tiles_bcast, Mul)
#undef TT_SIM_BCAST_GENERIC

// unary_bcast: DST[idst] = the broadcast of one tile (ROW: t[0][c], COL: t[r][0], SCALAR: t[0][0], NONE: t).
// (The SDK's unary_bcast_init has no call_line parameter, so that a stale 2-argument call does not compile.)
template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void unary_bcast_init(uint32_t icb) {
    tt_sim::op_init(tt_sim::Init::UnaryBcast, icb, icb, static_cast<uint32_t>(bcast_type), "unary_bcast_init", 0);
}
template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void unary_bcast(uint32_t icb, uint32_t in_tile_index, uint32_t dst_tile_index, TT_SIM_LINE) {
    tt_sim::unary_bcast(tt_sim::kapi::bdim(bcast_type), icb, in_tile_index, dst_tile_index, line);
}
template <BroadcastType bcast_type>
inline void unary_bcast_uninit(uint32_t icb, TT_SIM_LINE) {
    (void)icb;
    (void)line;
}

// ---- SFPU binary between DST tiles (eltwise_binary_sfpu.h, binary_max_min.h) -----------------------------
#define TT_SIM_SFPU_BINARY_INIT(name)                                                                 \
    inline void name##_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init(#name "_init", line); }
#define TT_SIM_SFPU_BINARY(name, op, tparams)                                                         \
    tparams inline void name(uint32_t idst0, uint32_t idst1, uint32_t odst, TT_SIM_LINE) {            \
        tt_sim::binary_dst(tt_sim::Binary::op, idst0, idst1, odst, tt_sim::kapi::kRC, line);          \
    }                                                                                                 \
    TT_SIM_SFPU_BINARY_INIT(name)
#define TT_SIM_FP32_ACC template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
#define TT_SIM_ROUNDING_FP32_ACC \
    template <DstRoundingMode dst_rounding_mode = DstRoundingMode::Default, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
#define TT_SIM_NO_TEMPLATE
TT_SIM_SFPU_BINARY(add_binary_tile, Add, TT_SIM_ROUNDING_FP32_ACC)
TT_SIM_SFPU_BINARY(sub_binary_tile, Sub, TT_SIM_ROUNDING_FP32_ACC)
TT_SIM_SFPU_BINARY(rsub_binary_tile, RSub, TT_SIM_ROUNDING_FP32_ACC)
TT_SIM_SFPU_BINARY(mul_binary_tile, Mul, TT_SIM_FP32_ACC)
TT_SIM_SFPU_BINARY(div_binary_tile, Div, TT_SIM_FP32_ACC)
TT_SIM_SFPU_BINARY(power_binary_tile, Pow, TT_SIM_FP32_ACC)
// comparisons: 1.0 where the relation holds, else 0.0
TT_SIM_SFPU_BINARY(lt_binary_tile, Lt, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_BINARY(gt_binary_tile, Gt, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_BINARY(le_binary_tile, Le, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_BINARY(ge_binary_tile, Ge, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_BINARY(eq_binary_tile, Eq, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_BINARY(ne_binary_tile, Ne, TT_SIM_NO_TEMPLATE)
#undef TT_SIM_SFPU_BINARY
#undef TT_SIM_FP32_ACC
#undef TT_SIM_ROUNDING_FP32_ACC
#undef TT_SIM_NO_TEMPLATE

inline void binary_max_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VectorMode vector_mode = VectorMode::RC,
                            TT_SIM_LINE) {
    tt_sim::binary_dst(tt_sim::Binary::Max, idst0, idst1, odst, tt_sim::kapi::vm(vector_mode), line);
}
inline void binary_min_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VectorMode vector_mode = VectorMode::RC,
                            TT_SIM_LINE) {
    tt_sim::binary_dst(tt_sim::Binary::Min, idst0, idst1, odst, tt_sim::kapi::vm(vector_mode), line);
}
TT_SIM_SFPU_BINARY_INIT(binary_max_tile)
TT_SIM_SFPU_BINARY_INIT(binary_min_tile)
#undef TT_SIM_SFPU_BINARY_INIT

// where.h: odst = idst0 != 0 ? idst1 : idst2 (data_format: the DST data, Float32 or Float16_b)
template <DataFormat data_format>
inline void where_tile(uint32_t idst0, uint32_t idst1, uint32_t idst2, uint32_t odst, TT_SIM_LINE) {
    static_assert(data_format == DataFormat::Float32 || data_format == DataFormat::Float16_b,
                  "tt-sim: where_tile is emulated for Float32 and Float16_b data");
    tt_sim::where_tile(idst0, idst1, idst2, odst, line);
}
inline void where_tile_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init("where_tile_init", line); }

// typecast.h: DST integers <-> floats. The SDK's pairs are a long list (0.81.1 typecast.h:38-71); the emulator
// models UInt8 -> Float32 / Float16_b (exact: 0..255), Int8 -> Float32 / Float16_b (the UInt8 CB's byte as two's
// complement, exact: -128..127), Float32 / Float16_b -> UInt8 (truncation toward zero, modulo 256; 0 for
// |x| >= 2^31, Inf and NaN: ckernel_sfpu_typecast.h calculate_typecast_fp32_to_uint8) and -> Int32 (truncation
// toward zero, saturating: calculate_typecast_fp32_to_int32); Int32 -> Float32 (calculate_typecast_int32_to_fp32);
// Float32 -> Float16_b in place (round to nearest even, low 16 bits cleared: calculate_typecast_fp32_to_fp16b).
template <uint32_t IN_DTYPE, uint32_t OUT_DTYPE>
inline void typecast_tile_init(TT_SIM_LINE) {
    tt_sim::kapi::sfpu_init("typecast_tile_init", line);
}
template <uint32_t IN_DTYPE, uint32_t OUT_DTYPE, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void typecast_tile(uint32_t idst, TT_SIM_LINE) {
    constexpr auto in = static_cast<DataFormat>(IN_DTYPE);
    constexpr auto out = static_cast<DataFormat>(OUT_DTYPE);
    static_assert(((in == DataFormat::UInt8 || in == DataFormat::Int8) &&
                   (out == DataFormat::Float32 || out == DataFormat::Float16_b)) ||
                      ((out == DataFormat::UInt8 || out == DataFormat::Int32) &&
                       (in == DataFormat::Float32 || in == DataFormat::Float16_b)) ||
                      (in == DataFormat::Int32 && out == DataFormat::Float32) ||
                      (in == DataFormat::Float32 && out == DataFormat::Float16_b),
                  "tt-sim: typecast_tile is emulated for UInt8 / Int8 -> Float32 / Float16_b, Float32 / "
                  "Float16_b -> UInt8 / Int32, Int32 -> Float32 and Float32 -> Float16_b");
    // typecast.h: "For input/output to be UInt32, Int32, or Float32, Dest must be in 32 bit mode"
    static_assert((out != DataFormat::Int32 && in != DataFormat::Int32) || is_fp32_dest_acc_en,
                  "Int32 typecast requires Dest in 32 bit mode");
    // typecast.h: Int8 (two's-complement bytes in a UInt8 CB) needs DST in 32-bit mode
    static_assert(in != DataFormat::Int8 || is_fp32_dest_acc_en, "Int8 typecast requires Dest in 32 bit mode");
    tt_sim::typecast_tile(static_cast<uint8_t>(IN_DTYPE), static_cast<uint8_t>(OUT_DTYPE), idst, line);
}

// ---- SFPU with a scalar (binop_with_scalar.h; param: fp32 bit pattern) -----------------------------------
inline void binop_with_scalar_tile_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init("binop_with_scalar_tile_init", line); }
#define TT_SIM_SFPU_SCALAR(name, op)                                                                  \
    template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>                                              \
    inline void name##_unary_tile(uint32_t idst, uint32_t param1, TT_SIM_LINE) {                      \
        tt_sim::binary_scalar(tt_sim::Binary::op, idst, param1, line);                                \
    }
TT_SIM_SFPU_SCALAR(add, Add)
TT_SIM_SFPU_SCALAR(sub, Sub)
TT_SIM_SFPU_SCALAR(mul, Mul)
TT_SIM_SFPU_SCALAR(div, Div)
TT_SIM_SFPU_SCALAR(rsub, RSub)
#undef TT_SIM_SFPU_SCALAR

// ---- SFPU unary, in place ----------------------------------------------------------------------------------
// Each op's init and call with the SDK's template parameters (`init_tparams` / `tparams`; TT_SIM_NO_TEMPLATE for
// plain functions).
#define TT_SIM_NO_TEMPLATE
#define TT_SIM_SFPU_UNARY(name, op, init_tparams, tparams)                                            \
    init_tparams inline void name##_tile_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init(#name "_tile_init", line); } \
    tparams inline void name##_tile(uint32_t idst, TT_SIM_LINE) {                                     \
        tt_sim::unary(tt_sim::Unary::op, idst, tt_sim::kapi::kRC, line);                              \
    }
#define TT_SIM_COMMA ,
TT_SIM_SFPU_UNARY(log, Log,
                  template <bool fast_and_approx = false TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>,
                  template <bool fast_and_approx = false TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(sqrt, Sqrt, TT_SIM_NO_TEMPLATE,
                  template <bool FAST_APPROX = false TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(rsqrt, Rsqrt, TT_SIM_NO_TEMPLATE,
                  template <RsqrtMode mode = RsqrtMode::Default TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(relu, Relu, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(gelu, Gelu,
                  template <bool fast_and_approx = true TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>,
                  template <bool fast_and_approx = true TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(gelu_tanh, GeluTanh, template <bool fast = false>,
                  template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE TT_SIM_COMMA bool fast = false>)
TT_SIM_SFPU_UNARY(negative, Negative, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(tanh, Tanh,
                  template <bool fast_and_approx = false TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>,
                  template <bool fast_and_approx = false TT_SIM_COMMA bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(erf, Erf, template <bool fast_and_approx = true>, template <bool fast_and_approx = true>)
TT_SIM_SFPU_UNARY(erfc, Erfc, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(exp2, Exp2, template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>,
                  template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(abs, Abs, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(square, Square, TT_SIM_NO_TEMPLATE, template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(silu, Silu, TT_SIM_NO_TEMPLATE, template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)
TT_SIM_SFPU_UNARY(sign, Sign, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
// comp.h: 1.0 where x (op) 0 holds, else 0.0
TT_SIM_SFPU_UNARY(gtz, Gtz, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(ltz, Ltz, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(gez, Gez, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(lez, Lez, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(eqz, Eqz, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_UNARY(nez, Nez, TT_SIM_NO_TEMPLATE, TT_SIM_NO_TEMPLATE)
#undef TT_SIM_SFPU_UNARY

// compute_kernel_api.h: sigmoid with a template VectorMode
template <bool fast_and_approx = false>
inline void sigmoid_tile_init(TT_SIM_LINE) {
    tt_sim::kapi::sfpu_init("sigmoid_tile_init", line);
}
template <VectorMode vec_mode = VectorMode::RC, bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void sigmoid_tile(uint32_t idst, TT_SIM_LINE) {
    tt_sim::unary(tt_sim::Unary::Sigmoid, idst, tt_sim::kapi::vm(vec_mode), line);
}

// recip.h
template <ReciprocalDestAcc dest_acc = DST_ACCUM_MODE ? ReciprocalDestAcc::FP32 : ReciprocalDestAcc::BF16,
          ReciprocalApproxMode approximation = ReciprocalApproxMode::Default>
inline void recip_tile_init(TT_SIM_LINE) {
    tt_sim::kapi::sfpu_init("recip_tile_init", line);
}
template <ReciprocalDestAcc dest_acc = DST_ACCUM_MODE ? ReciprocalDestAcc::FP32 : ReciprocalDestAcc::BF16,
          ReciprocalApproxMode approximation = ReciprocalApproxMode::Default>
inline void recip_tile(uint32_t idst, VectorMode vector_mode = VectorMode::RC, TT_SIM_LINE) {
    tt_sim::unary(tt_sim::Unary::Recip, idst, tt_sim::kapi::vm(vector_mode), line);
}

// exp.h (`scale_en`: exp(x * bf16 scale))
template <bool approx = false, uint32_t scale = 0x3F800000, InputClamping input_clamping = InputClamping::ClampToNegative,
          bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void exp_tile_init(TT_SIM_LINE) {
    tt_sim::kapi::sfpu_init("exp_tile_init", line);
}
template <bool approx = false, bool scale_en = false, InputClamping input_clamping = InputClamping::ClampToNegative,
          int iterations = 8, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
inline void exp_tile(uint32_t idst, VectorMode vector_mode = VectorMode::RC, uint16_t scale = 0x3F80, TT_SIM_LINE) {
    if constexpr (scale_en) {
        tt_sim::unary_param(tt_sim::UnaryParam::ExpScaled, idst, static_cast<uint32_t>(scale) << 16, 0,
                            tt_sim::kapi::vm(vector_mode), line);
    } else {
        (void)scale;
        tt_sim::unary(tt_sim::Unary::Exp, idst, tt_sim::kapi::vm(vector_mode), line);
    }
}

// ---- SFPU unary with parameters (fp32 bit patterns unless noted) -------------------------------------------
#define TT_SIM_SFPU_PARAM(name, op, tparams)                                                          \
    inline void name##_tile_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init(#name "_tile_init", line); } \
    tparams inline void name##_tile(uint32_t idst, uint32_t param0, TT_SIM_LINE) {                    \
        tt_sim::unary_param(tt_sim::UnaryParam::op, idst, param0, 0, tt_sim::kapi::kRC, line);        \
    }
TT_SIM_SFPU_PARAM(power, Power, template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>)   // x ** float(param0)
TT_SIM_SFPU_PARAM(power_iterative, PowerIterative, TT_SIM_NO_TEMPLATE)                  // x ** param0 (integer)
TT_SIM_SFPU_PARAM(unary_max, Max, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_min, Min, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_gt, Gt, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_lt, Lt, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_ge, Ge, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_le, Le, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_eq, Eq, TT_SIM_NO_TEMPLATE)
TT_SIM_SFPU_PARAM(unary_ne, Ne, TT_SIM_NO_TEMPLATE)
#undef TT_SIM_SFPU_PARAM
#undef TT_SIM_COMMA
#undef TT_SIM_NO_TEMPLATE

// clamp.h: min(max(x, float(param0)), float(param1))
inline void clamp_tile_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init("clamp_tile_init", line); }
inline void clamp_tile(uint32_t idst, uint32_t param0, uint32_t param1, TT_SIM_LINE) {
    tt_sim::unary_param(tt_sim::UnaryParam::Clamp, idst, param0, param1, tt_sim::kapi::kRC, line);
}

// fill.h
inline void fill_tile_init(TT_SIM_LINE) { tt_sim::kapi::sfpu_init("fill_tile_init", line); }
inline void fill_tile(uint32_t idst, float param0, TT_SIM_LINE) { tt_sim::fill_tile(idst, param0, line); }
inline void fill_tile_bitcast(uint32_t idst, uint32_t param0, TT_SIM_LINE) {
    float value;
    std::memcpy(&value, &param0, sizeof(value));
    tt_sim::fill_tile(idst, value, line);
}
