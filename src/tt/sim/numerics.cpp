// tt-sim: data formats and numerics: tile sizes, fp32 <-> bf16/fp16 conversion, unpack, pack (the packer's
// rounding; Float16 CBs of an fp32-accumulating kernel pack through BF16), DST rounding (16-bit DST: round to nearest
// even), the unpacker's FP32 -> FP16. UInt8 tiles unpack to / pack from DST integers.

#include <cstring>

#include "sim_internal.hpp"
#include "tt_sim/blockfloat.hpp"

namespace tt_sim {

namespace {
const hw::FormatInfo* format_info(uint8_t fmt) {
    for (const hw::FormatInfo& f : hw::kFormats) {
        if (f.value == fmt) return &f;
    }
    return nullptr;
}
}  // namespace

uint32_t tile_bytes(uint8_t fmt) {
    const hw::FormatInfo* f = format_info(fmt);
    return f != nullptr ? f->tile_bytes : 0;
}

const char* fmt_name(uint8_t fmt) {
    const hw::FormatInfo* f = format_info(fmt);
    return f != nullptr ? f->name : "unsupported";
}


namespace {


inline uint16_t float_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) {
        return static_cast<uint16_t>((u >> 16) | 0x40);   // quiet NaN
    }
    u += 0x7fffu + ((u >> 16) & 1u);                      // round to nearest even
    return static_cast<uint16_t>(u >> 16);
}
// The packer's FP32 -> BF16 (TT_KERNEL_PATTERNS.md 5.3): round to nearest, ties away from zero; denormals
// flush to 0, -0 packs as +0, NaN packs as Inf.
inline uint16_t float_to_bf16_packer(float f) {
    const uint32_t u = f2u(f);
    const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return static_cast<uint16_t>((sign | 0x7f800000u) >> 16);   // NaN -> Inf
    if (mag < 0x00800000u) return 0;                                                      // denormal, +-0 -> +0
    return static_cast<uint16_t>((sign | (mag + 0x8000u)) >> 16);   // the magnitude rounds half up (away from 0)
}
inline float bf16_to_float(uint16_t h) { return u2f(static_cast<uint32_t>(h) << 16); }

inline float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        if (mant == 0) return u2f(sign);
        while (!(mant & 0x400)) {
            mant <<= 1;
            exp--;
        }
        exp++;
        mant &= 0x3ff;
    } else if (exp == 31) {
        return u2f(sign | 0x7f800000u | (mant << 13));
    }
    return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
    const uint32_t u = f2u(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000;
        const uint32_t shift = static_cast<uint32_t>(14 - exp);
        uint32_t half = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1);
        const uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return static_cast<uint16_t>(half);
}

// The packer's FP32 DST -> Float16 CB with fp32 accumulation (TT_KERNEL_PATTERNS.md 5b): the 0.81 library picks
// Float16_b as the pack source format of a Float16 CB when fp32_dest_acc_en is on, and the LLK sets Round_10b_mant
// only when that format is Float16 (tt-llk tt_llk_wormhole_b0/common/inc/cpack_common.h: `if (is_fp32_dest_acc_en &&
// pack_src_format == Float16) Round_10b_mant = 1`). So the early conversion rounds FP32 to BF16 (nearest, ties away
// from zero; denormals flush, -0 -> +0, NaN -> Inf) and the late conversion widens BF16 to FP16 (tt-isa-documentation
// WormholeB0/TensixTile/TensixCoprocessor/Packers/FormatConversion.md: "saturate if there is narrowing of exponent";
// inputs below 2^-14 are flushed or mishandled, tt-sim flushes them; NaN/Inf become FP16's infinity): 8 significant
// bits, not fp16's 11.
inline uint16_t float_to_half_via_bf16_packer(float f) {
    const uint16_t b = float_to_bf16_packer(f);
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff);
    if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u);         // Inf (the packer made NaN Inf)
    if (exp == 0) return 0;                                                // +-0 (denormals flushed: +0)
    const int32_t e16 = exp - 127 + 15;
    if (e16 < 1) return 0;                                                 // below FP16's normal range: flushed
    if (e16 > 31) return static_cast<uint16_t>(sign | 0x7fffu);             // saturated (exponent 31 is finite)
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(e16) << 10 | ((u >> 13) & 0x3ffu));
}

inline float round_to(float v, uint8_t fmt) {
    switch (fmt) {
        case kFloat16_b: return bf16_to_float(float_to_bf16(v));
        case kFloat16: return half_to_float(float_to_half(v));
        default: return v;
    }
}

}  // namespace

TT_SIM_TILE_LOOP void unpack_tile(const uint8_t* src, uint8_t fmt, float* out) {
    if (bfp::is_bfp(fmt)) {
        bfp::unpack_bfp_tile(src, fmt, out);   // BFP8ToBF16: exact BF16 values (blockfloat.cpp)
    } else if (fmt == kFloat32) {
        std::memcpy(out, src, tile_bytes(kFloat32));
    } else if (fmt == kUInt8) {   // DST integers: each byte zero-extended to 32 bits (the float carries its bits)
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = u2f(src[i]);
    } else if (fmt == kInt32) {   // DST integers: the 32-bit words (the float carries their bits)
        std::memcpy(out, src, tile_bytes(kInt32));
    } else if (fmt == kFloat16_b) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = bf16_to_float(h[i]);
    } else {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = half_to_float(h[i]);
    }
}

float fp32_to_fp16_src(float v) {
    // The unpacker's FP32 -> FP16 into SrcA/SrcB (UNPACR_Regular.md's FP32ToFP16, not spelled out there): tt-sim
    // truncates the mantissa to 10 bits as the TF32 and BF16 paths do (`DatumBits >> 13`, `>> 16`), saturates at
    // FP16's largest value (the FPU reads exponent 31 as finite: (2 - 2^-10) * 2^16) and flushes values below FP16's
    // normal range (the FPU reads FP16 denormals as 0; FloatBitPatterns.md).
    const uint32_t u = f2u(v);
    const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag >= 0x7f800000u) return u2f(sign | 0x47ffe000u);                // Inf / NaN: saturated
    if (mag < 0x38800000u) return u2f(sign);                               // |v| < 2^-14: 0
    if (mag > 0x47ffe000u) return u2f(sign | 0x47ffe000u);                 // above (2 - 2^-10) * 2^16: saturated
    return u2f(u & 0xffffe000u);                                           // 10 mantissa bits, truncated
}

TT_SIM_TILE_LOOP void round_packed(float* tile, uint8_t fmt, bool fp32_acc) {
    if (fmt == kFloat16_b) {
        for (uint32_t i = 0; i < kTileElems; ++i) tile[i] = bf16_to_float(float_to_bf16_packer(tile[i]));
    } else if (fmt == kFloat16 && fp32_acc) {
        for (uint32_t i = 0; i < kTileElems; ++i) tile[i] = half_to_float(float_to_half_via_bf16_packer(tile[i]));
    } else {
        round_tile(tile, fmt);
    }
}

TT_SIM_TILE_LOOP void pack_tile_bytes(const float* in, uint8_t fmt, uint8_t* dst, bool fp32_acc) {
    if (bfp::is_bfp(fmt)) {
        bfp::pack_bfp_tile(in, fmt, dst);      // the packer's E8M6 + shared-exponent rounding (blockfloat.cpp)
    } else if (fmt == kFloat32) {
        std::memcpy(dst, in, tile_bytes(kFloat32));
    } else if (fmt == kUInt8) {   // DST integers (0..255 after typecast_tile<..., UInt8>): the low byte
        for (uint32_t i = 0; i < kTileElems; ++i) dst[i] = static_cast<uint8_t>(f2u(in[i]) & 0xffu);
    } else if (fmt == kInt32) {   // DST integers (typecast_tile<..., Int32>): the 32-bit words
        std::memcpy(dst, in, tile_bytes(kInt32));
    } else if (fmt == kFloat16_b) {
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_bf16_packer(in[i]);
    } else if (fp32_acc) {   // Float16 from an fp32 DST: through BF16 (above)
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_half_via_bf16_packer(in[i]);
    } else {                 // Float16 from a 16-bit (FP16) DST
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_half(in[i]);
    }
}


TT_SIM_TILE_LOOP void round_tile(float* tile, uint8_t fmt) {
    if (fmt == kFloat32) return;
    if (fmt == kFloat16_b) {   // float_to_bf16 without branches, so that the loop vectorises (after every FPU op)
        for (uint32_t i = 0; i < kTileElems; ++i) {
            const uint32_t u = f2u(tile[i]);
            const uint32_t nan = ((u >> 16) | 0x40u) << 16, rne = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            tile[i] = u2f((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
        }
        return;
    }
    for (uint32_t i = 0; i < kTileElems; ++i) tile[i] = round_to(tile[i], fmt);
}

}  // namespace tt_sim
