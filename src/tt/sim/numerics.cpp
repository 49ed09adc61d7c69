// tt-sim: data formats and numerics: tile sizes, fp32 <-> bf16/fp16 conversion, unpack, pack (the packer's
// rounding), DST rounding (16-bit DST: round to nearest even). UInt8 tiles unpack to / pack from DST integers.

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

inline float round_to(float v, uint8_t fmt) {
    switch (fmt) {
        case kFloat16_b: return bf16_to_float(float_to_bf16(v));
        case kFloat16: return half_to_float(float_to_half(v));
        default: return v;
    }
}

}  // namespace

void unpack_tile(const uint8_t* src, uint8_t fmt, float* out) {
    if (bfp::is_bfp(fmt)) {
        bfp::unpack_bfp_tile(src, fmt, out);   // BFP8ToBF16: exact BF16 values (blockfloat.cpp)
    } else if (fmt == kFloat32) {
        std::memcpy(out, src, tile_bytes(kFloat32));
    } else if (fmt == kUInt8) {   // DST integers: each byte zero-extended to 32 bits (the float carries its bits)
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = u2f(src[i]);
    } else if (fmt == kFloat16_b) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = bf16_to_float(h[i]);
    } else {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = half_to_float(h[i]);
    }
}

void pack_tile_bytes(const float* in, uint8_t fmt, uint8_t* dst) {
    if (bfp::is_bfp(fmt)) {
        bfp::pack_bfp_tile(in, fmt, dst);      // the packer's E8M6 + shared-exponent rounding (blockfloat.cpp)
    } else if (fmt == kFloat32) {
        std::memcpy(dst, in, tile_bytes(kFloat32));
    } else if (fmt == kUInt8) {   // DST integers (0..255 after typecast_tile<..., UInt8>): the low byte
        for (uint32_t i = 0; i < kTileElems; ++i) dst[i] = static_cast<uint8_t>(f2u(in[i]) & 0xffu);
    } else if (fmt == kFloat16_b) {
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_bf16_packer(in[i]);
    } else {
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_half(in[i]);
    }
}


void round_tile(float* tile, uint8_t fmt) {
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
