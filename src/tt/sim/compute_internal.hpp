// tt-sim internal: helpers shared by the compute kernel API's source files (compute.cpp, matmul.cpp,
// reduce_bcast.cpp).
#pragma once

#include "sim_internal.hpp"

namespace tt_sim::compute_detail {

ComputeState& cs(uint32_t line);   // the running compute task's state; an error in a data-movement kernel
void require_math(ComputeState& c, uint32_t line, const char* op);   // inside tile_regs_acquire()/commit()
float* dst_tile(ComputeState& c, uint32_t dst, uint32_t line, const char* op);   // DST tile `dst` (capacity)
// A tile at the front of CB `cb` that the compute kernel has waited for.
const uint8_t* front_tile(uint32_t cb, uint32_t tile, uint32_t line, const char* op);
// The unpacker's source register `reg` (configured for CB `configured`) must match CB `cb`'s data format.
void check_src_format(int configured, uint32_t cb, const char* reg, uint32_t line, const char* op);
void after_math(ComputeState& c, float* tile);   // DST rounding (16-bit DST unless fp32_dest_acc_en)
// DST tile `dst` was written: it holds floats (FPU and SFPU results) or, with `integer`, 32-bit integers.
inline void wrote(ComputeState& c, uint32_t dst, bool integer = false) {
    c.defined[dst] = true;
    c.integer[dst] = integer;
}
// An FPU op (or a copy through SrcA/SrcB the emulator models as float) reading CB `cb`: a UInt8 CB is refused.
void require_float_cb(uint32_t cb, uint32_t line, const char* op);
// An FPU init (copy, binary, bcast, matmul, transpose) while a reduce is active: refused (reduce_uninit first).
void require_no_reduce(const ComputeState& c, uint32_t line, const char* op);

// One FPU operand: CB `cb`, tile `tile`, through source register `reg` configured for CB `configured`.
struct SrcOperand {
    uint32_t cb, tile;
    int configured;
    const char* reg;
};

// Checks the two FPU operands of `op`: their tiles' L1 bytes and DST tile `dst`.
struct FpuTiles {
    const uint8_t *x, *y;
    float* out;
};
FpuTiles fpu_tiles(ComputeState& c, const SrcOperand& x, const SrcOperand& y, uint32_t dst, uint32_t line,
                   const char* op);
// Checks and unpacks the two FPU operands of `op` into a and b (unless protocol-only); returns DST tile `dst`.
float* fpu_operands(ComputeState& c, const SrcOperand& x, const SrcOperand& y, uint32_t dst, uint32_t line,
                    const char* op, float* a, float* b);

float apply(Binary op, float a, float b);

// Unpack-to-DEST (fidelity.cpp): CB `cb` has UnpackToDestFp32; an A2D copy (copy_tile, transpose_tile, unary_bcast)
// of it is exact, otherwise it is narrowed as it goes through SrcA/SrcB; FPU ops reading such a CB are refused.
bool unpacks_to_dest(const ComputeState& c, uint32_t cb);
void unpack_a2d(const ComputeState& c, uint32_t cb, const uint8_t* src, float* out);
void require_src_path(const ComputeState& c, uint32_t cb, const char* reg, uint32_t line, const char* op);
// An FPU init: the unpacker must already be configured for its CBs (the LLK asserts in the init).
void check_init_format(int configured, uint32_t cb, const char* reg, const char* init, uint32_t line);

}  // namespace tt_sim::compute_detail
