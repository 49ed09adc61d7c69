// tt-sim: Bfp8_b / Bfp4_b tiles as the Tensix unpacker and packer see them (needs only the generated hardware table).
//
// Tile = [64 shared-exponent bytes][datums]; exponent byte i is shared by datums 16i..16i+15 (one face row, tile
// face order). Bfp8_b: one byte per datum (sign bit 7, 7-bit magnitude); Bfp4_b: one nibble per datum (sign bit 3,
// 3-bit magnitude), datum 2j in the low nibble of byte 64+j. See docs/formats.md.
#pragma once

#include <cstdint>

#include "tt_sim/hw_constants.hpp"   // generated from python/tilelang_tt/device.py, the one hardware table

namespace tt_sim {
namespace bfp {

// The format's row of the hardware table (a format the table does not list has tile_bytes 0).
constexpr hw::FormatInfo format_info(uint8_t fmt) {
    for (const hw::FormatInfo& f : hw::kFormats) {
        if (f.value == fmt) return f;
    }
    return hw::FormatInfo{"", fmt, 0, 0, 0};
}

constexpr uint8_t kBfp8_b = hw::kBfp8_b;   // tt::DataFormat values
constexpr uint8_t kBfp4_b = hw::kBfp4_b;
constexpr uint32_t kExpBytes = format_info(hw::kBfp8_b).exponent_bytes;
constexpr uint32_t kTileElems = hw::kTileElems;
static_assert(format_info(hw::kBfp4_b).exponent_bytes == kExpBytes, "one shared-exponent section layout");

bool is_bfp(uint8_t fmt);
uint32_t tile_bytes(uint8_t fmt);   // 1088 / 576, 0 for other formats

// Unpacker (ISA FloatBitPatterns.md BFP8ToBF16; BFP4 = datum << 4): 1024 floats in face order, each exactly a
// BF16 value. Sign 1 with magnitude 0 reads as -Inf; the 8-bit exponent wraps when it underflows.
void unpack_bfp_tile(const uint8_t* src, uint8_t fmt, float* out1024);

// Packer (ISA Packers/FormatConversion.md): each float (a DST datum) rounded to E8M6 (nearest, ties away from
// zero; denormal and -0 -> +0, NaN -> Inf), shared exponent = max of the 16, magnitudes shifted with rounding to
// nearest, ties away from zero; Bfp4_b = that Bfp8 magnitude truncated to 3 bits. A zero magnitude gets sign 0.
void pack_bfp_tile(const float* in1024, uint8_t fmt, uint8_t* dst);

}  // namespace bfp
}  // namespace tt_sim
