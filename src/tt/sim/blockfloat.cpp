// tt-sim: Bfp8_b / Bfp4_b unpack and pack, bit-exact with the hardware rules in docs/formats.md.

#include "tt_sim/blockfloat.hpp"

#include <cstring>

namespace tt_sim {
namespace bfp {

namespace {

constexpr uint32_t kRow = 16;   // datums sharing one exponent

template <typename To, typename From>
To bit_cast(From from) {   // std::bit_cast is C++20
    static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
    To to;
    std::memcpy(&to, &from, sizeof(To));
    return to;
}

// ISA BFP8ToBF16: datum = sign bit 7 + 7-bit magnitude, no hidden bit.
uint16_t bfp8_to_bf16(uint8_t datum, uint8_t exp) {
    const uint32_t sign = datum >> 7;
    uint8_t mag = static_cast<uint8_t>(datum << 1);
    if (mag == 0) return sign ? 0xff80u : 0u;
    uint32_t lz = 0;
    while (!(mag & 0x80u)) {
        mag = static_cast<uint8_t>(mag << 1);
        ++lz;
    }
    exp = static_cast<uint8_t>(exp - lz);   // uint8 arithmetic: wraps, as the ISA pseudo-code
    return static_cast<uint16_t>((sign << 15) | (static_cast<uint32_t>(exp) << 7) | (mag & 0x7eu));
}

struct E8M6 {
    uint32_t sign;
    uint32_t exp;   // biased, 0 = zero
    uint32_t sig;   // 1.m6 as 7 bits (64..127), 0 for zero
};

// Early packer conversion to E8M6: round to nearest, ties away from zero.
E8M6 to_e8m6(float f) {
    const uint32_t u = bit_cast<uint32_t>(f);
    E8M6 r{u >> 31, (u >> 23) & 0xffu, 0};
    if (r.exp == 0) return E8M6{0, 0, 0};            // denormals and -0 -> +0
    if (r.exp == 0xffu) {                             // Inf stays, NaN -> Inf
        r.sig = 64;
        return r;
    }
    r.sig = (((u & 0x7fffffu) | 0x800000u) + (1u << 16)) >> 17;
    if (r.sig == 128) {                               // carry into the exponent (0xff: Inf)
        r.sig = 64;
        ++r.exp;
    }
    return r;
}

}  // namespace

bool is_bfp(uint8_t fmt) { return fmt == kBfp8_b || fmt == kBfp4_b; }

uint32_t tile_bytes(uint8_t fmt) { return is_bfp(fmt) ? format_info(fmt).tile_bytes : 0; }

void unpack_bfp_tile(const uint8_t* src, uint8_t fmt, float* out1024) {
    const uint8_t* data = src + kExpBytes;
    for (uint32_t k = 0; k < kTileElems; ++k) {
        uint8_t datum;
        if (fmt == kBfp8_b) {
            datum = data[k];
        } else {
            const uint8_t nibble = (k & 1u) ? static_cast<uint8_t>(data[k / 2] >> 4) : (data[k / 2] & 0xfu);
            datum = static_cast<uint8_t>(nibble << 4);
        }
        out1024[k] = bit_cast<float>(static_cast<uint32_t>(bfp8_to_bf16(datum, src[k / kRow])) << 16);
    }
}

void pack_bfp_tile(const float* in1024, uint8_t fmt, uint8_t* dst) {
    uint8_t* data = dst + kExpBytes;
    if (fmt == kBfp4_b) std::memset(data, 0, kTileElems / 2);
    for (uint32_t row = 0; row < kTileElems / kRow; ++row) {
        E8M6 v[kRow];
        uint32_t shared = 0;
        for (uint32_t j = 0; j < kRow; ++j) {
            v[j] = to_e8m6(in1024[row * kRow + j]);
            if (v[j].exp > shared) shared = v[j].exp;
        }
        dst[row] = static_cast<uint8_t>(shared);
        for (uint32_t j = 0; j < kRow; ++j) {
            const uint32_t d = shared - v[j].exp;
            uint32_t mag = v[j].sig;
            if (d > 0) mag = d > 8 ? 0 : (v[j].sig >> d) + ((v[j].sig >> (d - 1)) & 1u);
            const uint32_t k = row * kRow + j;
            if (fmt == kBfp8_b) {
                data[k] = static_cast<uint8_t>(((mag ? v[j].sign : 0u) << 7) | mag);
            } else {
                const uint32_t mag4 = mag >> 4;
                const uint32_t nibble = ((mag4 ? v[j].sign : 0u) << 3) | mag4;
                data[k / 2] = static_cast<uint8_t>(data[k / 2] | (nibble << ((k & 1u) * 4)));
            }
        }
    }
}

}  // namespace bfp
}  // namespace tt_sim
