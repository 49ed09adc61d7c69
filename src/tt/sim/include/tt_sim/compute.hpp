// tt-sim: the TT-Metalium 0.81 compute kernel API (api/compute/*), executed by the emulator.
// The compute kernel runs as one task (the UNPACK/MATH/PACK split is not visible at this API level apart
// from the DST handshake, which the emulator checks). Signatures match the SDK; a trailing defaulted `line`
// records the caller's source line for diagnostics.
#pragma once

#include <cstdint>

#include "tt_sim/common.hpp"

#define TT_SIM_LINE uint32_t line = __builtin_LINE()

enum class SrcOrder : uint8_t { Regular, Reverse };

// ---- start-up and data formats -------------------------------------------------------------------------
template <SrcOrder src_order = SrcOrder::Regular>
inline void compute_kernel_hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb, TT_SIM_LINE) {
    tt_sim::hw_startup(icb0, icb1, ocb,
                       src_order == SrcOrder::Reverse ? tt_sim::SrcOrder::Reverse : tt_sim::SrcOrder::Regular, line);
}
inline void compute_kernel_hw_startup(uint32_t icb, uint32_t ocb, TT_SIM_LINE) {
    tt_sim::hw_startup(icb, icb, ocb, tt_sim::SrcOrder::Regular, line);
}
inline void reconfig_data_format(uint32_t srca_new, uint32_t srcb_new, TT_SIM_LINE) {
    tt_sim::reconfig_srca(srca_new, line);
    tt_sim::reconfig_srcb(srcb_new, line);
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
inline void pack_reconfig_data_format(uint32_t new_cb, TT_SIM_LINE) { tt_sim::reconfig_pack(new_cb, line); }
inline void pack_reconfig_data_format(uint32_t old_cb, uint32_t new_cb, TT_SIM_LINE) {
    (void)old_cb;
    tt_sim::reconfig_pack(new_cb, line);
}

// ---- DST handshake and packing ---------------------------------------------------------------------------
inline void tile_regs_acquire(TT_SIM_LINE) { tt_sim::tile_regs_acquire(line); }
inline void tile_regs_commit(TT_SIM_LINE) { tt_sim::tile_regs_commit(line); }
inline void tile_regs_wait(TT_SIM_LINE) { tt_sim::tile_regs_wait(line); }
inline void tile_regs_release(TT_SIM_LINE) { tt_sim::tile_regs_release(line); }

template <bool out_of_order_output = false>
inline void pack_tile(uint32_t ifrom_dst, uint32_t icb, uint32_t output_tile_index = 0, TT_SIM_LINE) {
    tt_sim::pack_tile(ifrom_dst, icb, output_tile_index, out_of_order_output, line);
}

// ---- unpack to DST ---------------------------------------------------------------------------------------
inline void copy_init(uint32_t cb, uint32_t transpose = 0, uint32_t transpose_within_face = 0, TT_SIM_LINE) {
    (void)transpose_within_face;
    tt_sim::op_init(tt_sim::Init::Copy, cb, cb, transpose, line);
}
inline void copy_tile(uint32_t in_cb_id, uint32_t in_tile_index, uint32_t dst_tile_index, TT_SIM_LINE) {
    tt_sim::copy_tile(in_cb_id, in_tile_index, dst_tile_index, line);
}
inline void transpose_init(uint32_t icb, TT_SIM_LINE) { tt_sim::op_init(tt_sim::Init::Transpose, icb, icb, 0, line); }
inline void transpose_tile(uint32_t icb, uint32_t itile, uint32_t idst, TT_SIM_LINE) {
    tt_sim::transpose_tile(icb, itile, idst, line);
}

// ---- matmul ----------------------------------------------------------------------------------------------
inline void matmul_init(uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t transpose = 0, TT_SIM_LINE) {
    tt_sim::op_init(tt_sim::Init::Matmul, in0_cb_id, in1_cb_id, transpose, line);
}
inline void matmul_tiles(uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index,
                         uint32_t idst, TT_SIM_LINE) {
    tt_sim::matmul_tiles(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, line);
}

// ---- FPU binary ------------------------------------------------------------------------------------------
inline void add_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, TT_SIM_LINE) {
    tt_sim::op_init(tt_sim::Init::Binary, icb0, icb1, acc_to_dest, line);
}
inline void sub_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, TT_SIM_LINE) {
    tt_sim::op_init(tt_sim::Init::Binary, icb0, icb1, acc_to_dest, line);
}
inline void mul_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = true, TT_SIM_LINE) {
    tt_sim::op_init(tt_sim::Init::Binary, icb0, icb1, acc_to_dest, line);
}
inline void add_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) {
    tt_sim::binary_tiles(tt_sim::Binary::Add, icb0, icb1, itile0, itile1, idst, line);
}
inline void sub_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) {
    tt_sim::binary_tiles(tt_sim::Binary::Sub, icb0, icb1, itile0, itile1, idst, line);
}
inline void mul_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, TT_SIM_LINE) {
    tt_sim::binary_tiles(tt_sim::Binary::Mul, icb0, icb1, itile0, itile1, idst, line);
}

// ---- SFPU binary between DST tiles -----------------------------------------------------------------------
#define TT_SIM_SFPU_BINARY(name, op)                                                                  \
    inline void name##_binary_tile_init(TT_SIM_LINE) {                                                \
        tt_sim::op_init(tt_sim::Init::Sfpu, 0, 0, 0, line);                                           \
    }                                                                                                 \
    inline void name##_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, TT_SIM_LINE) {      \
        tt_sim::binary_dst(tt_sim::Binary::op, idst0, idst1, odst, line);                             \
    }
TT_SIM_SFPU_BINARY(add, Add)
TT_SIM_SFPU_BINARY(sub, Sub)
TT_SIM_SFPU_BINARY(mul, Mul)
TT_SIM_SFPU_BINARY(div, Div)
TT_SIM_SFPU_BINARY(rsub, RSub)
#undef TT_SIM_SFPU_BINARY

// ---- SFPU with a scalar (fp32 bit pattern) ---------------------------------------------------------------
inline void binop_with_scalar_tile_init(TT_SIM_LINE) { tt_sim::op_init(tt_sim::Init::Sfpu, 0, 0, 0, line); }
#define TT_SIM_SFPU_SCALAR(name, op)                                                                  \
    inline void name##_unary_tile(uint32_t idst, uint32_t param1, TT_SIM_LINE) {                      \
        tt_sim::binary_scalar(tt_sim::Binary::op, idst, param1, line);                                \
    }
TT_SIM_SFPU_SCALAR(add, Add)
TT_SIM_SFPU_SCALAR(sub, Sub)
TT_SIM_SFPU_SCALAR(mul, Mul)
TT_SIM_SFPU_SCALAR(div, Div)
TT_SIM_SFPU_SCALAR(rsub, RSub)
#undef TT_SIM_SFPU_SCALAR

// ---- SFPU unary ------------------------------------------------------------------------------------------
#define TT_SIM_SFPU_UNARY(name, op)                                                                   \
    inline void name##_tile_init(TT_SIM_LINE) { tt_sim::op_init(tt_sim::Init::Sfpu, 0, 0, 0, line); } \
    inline void name##_tile(uint32_t idst, TT_SIM_LINE) { tt_sim::unary(tt_sim::Unary::op, idst, line); }
TT_SIM_SFPU_UNARY(log, Log)
TT_SIM_SFPU_UNARY(sqrt, Sqrt)
TT_SIM_SFPU_UNARY(rsqrt, Rsqrt)
TT_SIM_SFPU_UNARY(recip, Recip)
TT_SIM_SFPU_UNARY(relu, Relu)
TT_SIM_SFPU_UNARY(gelu, Gelu)
TT_SIM_SFPU_UNARY(gelu_tanh, GeluTanh)
TT_SIM_SFPU_UNARY(negative, Negative)
TT_SIM_SFPU_UNARY(tanh, Tanh)
TT_SIM_SFPU_UNARY(sigmoid, Sigmoid)
TT_SIM_SFPU_UNARY(erf, Erf)
#undef TT_SIM_SFPU_UNARY

template <bool approx = false, uint32_t scale = 0x3F800000>
inline void exp_tile_init(TT_SIM_LINE) {
    tt_sim::op_init(tt_sim::Init::Sfpu, 0, 0, 0, line);
}
template <bool approx = false, bool scale_en = false>
inline void exp_tile(uint32_t idst, int vector_mode = 0, uint16_t scale = 0x3F80, TT_SIM_LINE) {
    (void)vector_mode;
    (void)scale;
    tt_sim::unary(tt_sim::Unary::Exp, idst, line);
}

inline void fill_tile_init(TT_SIM_LINE) { tt_sim::op_init(tt_sim::Init::Sfpu, 0, 0, 0, line); }
inline void fill_tile(uint32_t idst, float param0, TT_SIM_LINE) { tt_sim::fill_tile(idst, param0, line); }
