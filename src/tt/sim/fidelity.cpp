// tt-sim: what the FPU computes with: the unpacker's narrowing of operands into SrcA/SrcB, unpack-to-DEST, and
// the math fidelity phases of the multiplying FPU ops (../shared/reference/TT_KERNEL_PATTERNS.md 5.1, 5.2).
//
// SrcA/SrcB hold 19 bits (TF32: 1 + 8 + 10). A Float32 CB arrives there as TF32 (the low 13 mantissa bits
// dropped) with fp32 DST accumulation, as BF16 (the low 16 bits dropped) without it, and as FP16 when the program
// has a Float16 CB (the 0.81 library's unpack format selection picks FP16 for Float32 CBs then, with or without
// fp32 accumulation: TT_KERNEL_PATTERNS.md 5b); Float16_b / Float16 arrive as they are. Only an A2D copy (copy_tile, transpose_tile, unary_bcast) of a CB whose ComputeConfig
// unpack_to_dest_mode is UnpackToDestFp32 writes the CB's fp32 data straight to DST.
//
// A multiplying op (MVMUL, ELWMUL, GAPOOL) splits its operands (bits of the fp32 encoding):
//   A_hi = a & 0xfff80000 (implicit 1 + 4 MSBs), A_lo = (a & 0xffffc000) - A_hi (the next 5; the last TF32 bit of
//   SrcA is unused); B_hi = b & 0xfffe0000 (implicit 1 + 6 MSBs), B_lo = b - B_hi (the next 4)
// and sums the phases it runs: phase 0 A_hi*B_hi, 1 A_lo*B_hi, 2 A_hi*B_lo, 3 A_lo*B_lo; LoFi runs phase 0, HiFi2
// 0-1, HiFi3 0-2, HiFi4 0-3. Every partial sum of phases is exact in fp32 (at most 10 x 11 significant bits), so:
//   LoFi A_hi * B_hi;  HiFi2 A * B_hi;  HiFi3 A * B - A_lo * B_lo;  HiFi4 A * B   (A = a & 0xffffc000).

#include "compute_internal.hpp"

namespace tt_sim {

namespace {

inline float masked(float v, uint32_t mask) { return u2f(f2u(v) & mask); }

constexpr uint32_t kTf32Mask = 0xffffe000u;   // TF32: drop the low 13 mantissa bits
constexpr uint32_t kBf16Mask = 0xffff0000u;   // BF16: drop the low 16 bits
constexpr uint32_t kSrcAUsed = 0xffffc000u;   // SrcA's multiplier uses 1 + 9 mantissa bits
constexpr uint32_t kSrcAHi = 0xfff80000u;
constexpr uint32_t kSrcBHi = 0xfffe0000u;

// The SrcA / SrcB operand of a multiply at `phases` phases: the bits those phases use.
inline float srca_operand(float a, uint32_t phases) { return masked(a, phases == 1 ? kSrcAHi : kSrcAUsed); }
inline float srcb_operand(float b, uint32_t phases) { return phases <= 2 ? masked(b, kSrcBHi) : b; }

}  // namespace

TT_SIM_TILE_LOOP void narrow_to_src(float* tile, uint8_t cb_fmt, bool fp32_acc, bool fp16_src) {
    if (cb_fmt != kFloat32) return;   // Float16_b, Float16 (and BFP via BF16) reach Src exactly
    if (fp16_src) {   // the program has a Float16 CB: Float32 CBs unpack to FP16 (TT_KERNEL_PATTERNS.md 5b)
        for (uint32_t i = 0; i < kTileElems; ++i) tile[i] = fp32_to_fp16_src(tile[i]);
        return;
    }
    const uint32_t mask = fp32_acc ? kTf32Mask : kBf16Mask;
    for (uint32_t i = 0; i < kTileElems; ++i) tile[i] = masked(tile[i], mask);
}

uint32_t fidelity_phases(int math_fidelity) {
    const uint32_t phases = static_cast<uint32_t>(math_fidelity) & 7u;   // LoFi 0 -> phase 0 only
    return phases == 0 ? 1u : (phases > 4 ? 4u : phases);
}

float fidelity_mul(float a, float b, uint32_t phases) {
    if (phases != 3) return srca_operand(a, phases) * srcb_operand(b, phases);
    const float A = masked(a, kSrcAUsed);
    const float a_lo = A - masked(A, kSrcAHi), b_lo = b - masked(b, kSrcBHi);
    return A * b - a_lo * b_lo;   // phases 0-2: everything but A_lo * B_lo
}

TT_SIM_TILE_LOOP void matmul_operand(const float* tile, bool srca, uint32_t phases, bool transpose, float* hi, float* lo) {
    float rows[kTileElems];   // row-major [row][col], or [col][row] transposed
    for (uint32_t r = 0; r < 32; ++r) {
        if (transpose) {
            for (uint32_t k = 0; k < 32; ++k) rows[r * 32 + k] = tile[face_index(k, r)];
        } else {   // a tile row is 16 contiguous elements in each of two faces
            std::memcpy(rows + r * 32, tile + face_index(r, 0), 16 * sizeof(float));
            std::memcpy(rows + r * 32 + 16, tile + face_index(r, 16), 16 * sizeof(float));
        }
    }
    // srca_operand / srcb_operand as one mask; HiFi3's low part is the operand minus its high phase's bits:
    // A_lo = A_used - A_hi (in1), B_lo = B - B_hi (in0, whose operand at HiFi3 is all of B)
    const uint32_t keep = srca ? (phases == 1 ? kSrcAHi : kSrcAUsed) : (phases <= 2 ? kSrcBHi : 0xffffffffu);
    const uint32_t high = srca ? kSrcAHi : kSrcBHi;
    if (phases != 3) {
        for (uint32_t i = 0; i < kTileElems; ++i) hi[i] = masked(rows[i], keep);
        return;
    }
    for (uint32_t i = 0; i < kTileElems; ++i) {
        hi[i] = masked(rows[i], keep);
        lo[i] = hi[i] - masked(rows[i], high);
    }
}

namespace compute_detail {

bool unpacks_to_dest(const ComputeState& c, uint32_t cb) { return cb < kMaxCBs && (c.unpack_to_dest >> cb & 1u); }

void unpack_a2d(const ComputeState& c, uint32_t cb, const uint8_t* src, float* out) {
    const uint8_t fmt = cur().core->cbs[cb].fmt;
    unpack_tile(src, fmt, out);
    if (!unpacks_to_dest(c, cb)) narrow_to_src(out, fmt, c.fp32_acc, c.fp16_src);   // through SrcA / SrcB
}

void require_src_path(const ComputeState& c, uint32_t cb, const char* reg, uint32_t line, const char* op) {
    if (!unpacks_to_dest(c, cb)) return;
    kernel_error(line, format("%s reads CB %u through %s, but the ComputeConfig's unpack_to_dest_mode[%u] is "
                              "UnpackToDestFp32: the unpacker writes that CB straight to DST, and FPU ops cannot read "
                              "it; use copy_tile and SFPU ops for this CB, or UnpackToDestMode::Default", op, cb, reg,
                              cb));
}

}  // namespace compute_detail

}  // namespace tt_sim
