// tt-sim: matmul_tiles, the FPU's MVMUL (TT_KERNEL_PATTERNS.md 5.1, 5.2): DST[dst] += in0 tile x in1 tile.
//
// in0 goes through SrcB, in1 through SrcA; each operand is reduced to the bits its fidelity phases use
// (fidelity.cpp), and HiFi3 is A * B minus the phase it skips, A_lo * B_lo. Every term is exact in fp32, and each
// output element sums its 32 terms in k order 0..31 before it is added to DST (the definition the numerics tests
// pin down; the columns of an output row are independent, so they are computed 16 at a time with AVX-512, 8 with
// AVX2).
//
// Speed: preparing an operand (unpack, narrowing into SrcA/SrcB, the phase masks, row-major layout, in1's
// transpose) costs about as much as the product, and a blocked GEMM multiplies each operand tile several times
// (a 4x4-tile block: 4 times). Prepared operands are therefore cached, in0's and in1's apart: a slot chosen by
// the tile's L1 location holds the tile's L1 bytes and how it was prepared, and is used only while both are
// equal to the current call's (the bytes are compared on every call, so any write to L1 -- NoC, packer, a
// kernel's own pointer -- is seen). All tasks run on one scheduler thread, so the cache needs no locking.

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compute_internal.hpp"

namespace tt_sim {

using namespace compute_detail;

namespace {

constexpr uint32_t kT = 32;                // tile side
constexpr uint32_t kMaxTileBytes = 4096;   // the largest tile (Float32)
constexpr uint32_t kCacheSlots = 256;      // prepared operands kept per operand (~6 KB each, allocated on use)

// One operand tile prepared for the product: row-major [row][k] (in0) or [k][col] (in1, transposed if asked).
struct Prepared {
    alignas(32) float hi[kT * kT];   // the operand bits the phases use
    std::unique_ptr<float[]> lo;     // HiFi3 only: the low part of the skipped phase's operand
    uint32_t tag = ~0u;              // how it was prepared (see prep_tag); ~0u: empty
    std::vector<uint8_t> raw;        // the L1 bytes it was prepared from (the tile's size: every page allocated
                                     // is a page the process faults in, so a 2-byte format's slot holds 2 KB)
};

std::vector<std::unique_ptr<Prepared>>& cache(bool srca) {   // in1's (SrcA) or in0's (SrcB): never the same slot
    static std::vector<std::unique_ptr<Prepared>> slots[2] = {std::vector<std::unique_ptr<Prepared>>(kCacheSlots),
                                                              std::vector<std::unique_ptr<Prepared>>(kCacheSlots)};
    return slots[srca ? 1 : 0];
}

// `src`: how a Float32 CB reaches SrcA/SrcB, bit 0 fp32 accumulation (TF32, else BF16), bit 1 FP16 (fidelity.cpp)
uint32_t prep_tag(uint8_t fmt, bool srca, uint32_t phases, bool transpose, uint32_t src) {
    return fmt | (srca ? 1u : 0u) << 8 | phases << 9 | (transpose ? 1u : 0u) << 13 | src << 14;
}

void prepare(const uint8_t* bytes, uint8_t fmt, bool srca, uint32_t ph, bool transpose, uint32_t src,
             Prepared& p) {
    float t[kTileElems];
    unpack_tile(bytes, fmt, t);
    narrow_to_src(t, fmt, (src & 1u) != 0, (src & 2u) != 0);
    if (ph == 3 && !p.lo) p.lo.reset(new float[kT * kT]);
    matmul_operand(t, srca, ph, transpose, p.hi, p.lo.get());
}

// The prepared operand of the L1 tile at `bytes` (`l1_addr` in its core's L1): from the cache when its slot holds
// the same bytes prepared the same way, else prepared into the slot. The slot is chosen by the L1 address alone,
// not by the core: the cores of a program run the same kernels on the same CB layout, so the slots one core's
// tiles use are the ones every core's use (the cache spans one core's working set, not every core's), and a tile
// multicast to several cores sits at the same address in each, where it is found prepared.
const Prepared& operand(const uint8_t* bytes, uint32_t l1_addr, uint8_t fmt, bool srca, uint32_t ph, bool transpose,
                        uint32_t src) {
    const uint32_t n = tile_bytes(fmt);
    const uint32_t tag = prep_tag(fmt, srca, ph, transpose, src);
    const uint64_t h = (uint64_t{l1_addr} >> 5) * 0x9E3779B97F4A7C15ull;
    std::unique_ptr<Prepared>& slot = cache(srca)[(h >> 40) % kCacheSlots];
    if (!slot) slot.reset(new Prepared);   // default-initialised: the arrays are written before they are read
    Prepared& p = *slot;
    if (n > kMaxTileBytes) die(format("matmul_tiles: %u-byte tiles exceed the operand cache's %u", n, kMaxTileBytes));
    if (p.tag == tag && p.raw.size() == n && std::memcmp(p.raw.data(), bytes, n) == 0) return p;
    prepare(bytes, fmt, srca, ph, transpose, src, p);
    p.raw.assign(bytes, bytes + n);
    p.tag = tag;
    return p;
}

typedef float v8 __attribute__((vector_size(32)));    // 8 columns; loaded with memcpy (no alignment assumed)
typedef float v16 __attribute__((vector_size(64)));   // 16 columns: one face row
// v8 / v16 are passed only between always-inlined helpers of this file, so the AVX argument-passing ABI never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

// out (a DST tile, face layout) += a x b, a [row][k], b [k][col]; HiFi3 subtracts a_lo x b_lo term by term.
// Written out so that the accumulators stay in registers. Each output element is the same sequence of operations
// whatever the vector width (its products rounded, then added in k order 0..31, then added to DST), so the widths
// agree bit for bit.
template <typename V>
inline __attribute__((always_inline)) V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename V>
inline __attribute__((always_inline)) void add_to(float* p, V v) {
    const V s = load<V>(p) + v;
    std::memcpy(p, &s, sizeof s);
}

// 8 columns at a time (AVX2, or SSE from the generic build): two output rows (8 vectors) at a time, one row at
// HiFi3 (its b_lo vectors take the registers).
inline __attribute__((always_inline)) void add_row(float* out, uint32_t r, v8 c0, v8 c1, v8 c2, v8 c3) {
    float* lo = out + face_index(r, 0);    // columns 0-15: face (r/16, 0)
    float* hi = out + face_index(r, 16);   // columns 16-31: face (r/16, 1)
    add_to(lo, c0);
    add_to(lo + 8, c1);
    add_to(hi, c2);
    add_to(hi + 8, c3);
}

template <bool kHiFi3>
inline __attribute__((always_inline)) void product_body(const Prepared& a, const Prepared& b, float* out) {
    if (kHiFi3) {
        for (uint32_t r = 0; r < kT; ++r) {
            v8 c0 = {}, c1 = {}, c2 = {}, c3 = {};
            for (uint32_t k = 0; k < kT; ++k) {
                const float av = a.hi[r * kT + k], av_lo = a.lo[r * kT + k];
                const float *bk = b.hi + k * kT, *bl = b.lo.get() + k * kT;
                c0 += av * load<v8>(bk) - av_lo * load<v8>(bl);
                c1 += av * load<v8>(bk + 8) - av_lo * load<v8>(bl + 8);
                c2 += av * load<v8>(bk + 16) - av_lo * load<v8>(bl + 16);
                c3 += av * load<v8>(bk + 24) - av_lo * load<v8>(bl + 24);
            }
            add_row(out, r, c0, c1, c2, c3);
        }
        return;
    }
    for (uint32_t r = 0; r < kT; r += 2) {
        v8 c0 = {}, c1 = {}, c2 = {}, c3 = {}, d0 = {}, d1 = {}, d2 = {}, d3 = {};
        for (uint32_t k = 0; k < kT; ++k) {
            const float av = a.hi[r * kT + k], aw = a.hi[(r + 1) * kT + k];
            const float* bk = b.hi + k * kT;
            const v8 b0 = load<v8>(bk), b1 = load<v8>(bk + 8), b2 = load<v8>(bk + 16), b3 = load<v8>(bk + 24);
            c0 += av * b0;
            c1 += av * b1;
            c2 += av * b2;
            c3 += av * b3;
            d0 += aw * b0;
            d1 += aw * b1;
            d2 += aw * b2;
            d3 += aw * b3;
        }
        add_row(out, r, c0, c1, c2, c3);
        add_row(out, r + 1, d0, d1, d2, d3);
    }
}

// 16 columns at a time (AVX-512): a face row is one vector; four output rows (8 vectors) at a time, two at HiFi3.
inline __attribute__((always_inline)) void add_row16(float* out, uint32_t r, v16 c0, v16 c1) {
    add_to(out + face_index(r, 0), c0);
    add_to(out + face_index(r, 16), c1);
}

template <bool kHiFi3>
inline __attribute__((always_inline)) void product_body16(const Prepared& a, const Prepared& b, float* out) {
    if (kHiFi3) {
        for (uint32_t r = 0; r < kT; r += 2) {
            v16 c0 = {}, c1 = {}, d0 = {}, d1 = {};
            for (uint32_t k = 0; k < kT; ++k) {
                const float av = a.hi[r * kT + k], av_lo = a.lo[r * kT + k];
                const float aw = a.hi[(r + 1) * kT + k], aw_lo = a.lo[(r + 1) * kT + k];
                const float *bk = b.hi + k * kT, *bl = b.lo.get() + k * kT;
                const v16 b0 = load<v16>(bk), b1 = load<v16>(bk + 16), l0 = load<v16>(bl), l1 = load<v16>(bl + 16);
                c0 += av * b0 - av_lo * l0;
                c1 += av * b1 - av_lo * l1;
                d0 += aw * b0 - aw_lo * l0;
                d1 += aw * b1 - aw_lo * l1;
            }
            add_row16(out, r, c0, c1);
            add_row16(out, r + 1, d0, d1);
        }
        return;
    }
    for (uint32_t r = 0; r < kT; r += 4) {
        v16 c0 = {}, c1 = {}, d0 = {}, d1 = {}, e0 = {}, e1 = {}, f0 = {}, f1 = {};
        for (uint32_t k = 0; k < kT; ++k) {
            const float* ak = a.hi + r * kT + k;
            const float* bk = b.hi + k * kT;
            const v16 b0 = load<v16>(bk), b1 = load<v16>(bk + 16);
            c0 += ak[0] * b0;
            c1 += ak[0] * b1;
            d0 += ak[kT] * b0;
            d1 += ak[kT] * b1;
            e0 += ak[2 * kT] * b0;
            e1 += ak[2 * kT] * b1;
            f0 += ak[3 * kT] * b0;
            f1 += ak[3 * kT] * b1;
        }
        add_row16(out, r, c0, c1);
        add_row16(out, r + 1, d0, d1);
        add_row16(out, r + 2, e0, e1);
        add_row16(out, r + 3, f0, f1);
    }
}

// No FMA in any build (the library is compiled with -ffp-contract=off, and AVX-512F has FMA instructions): a fused
// multiply-add would not round a product that underflows, and the definition rounds every product before it is added.
__attribute__((target("avx512f"))) void product_avx512(const Prepared& a, const Prepared& b, float* out, bool hifi3) {
    if (hifi3) product_body16<true>(a, b, out);
    else product_body16<false>(a, b, out);
}

__attribute__((target("avx2"))) void product_avx2(const Prepared& a, const Prepared& b, float* out, bool hifi3) {
    if (hifi3) product_body<true>(a, b, out);
    else product_body<false>(a, b, out);
}

void product_generic(const Prepared& a, const Prepared& b, float* out, bool hifi3) {
    if (hifi3) product_body<true>(a, b, out);
    else product_body<false>(a, b, out);
}

using Product = void (*)(const Prepared&, const Prepared&, float*, bool);
// TT_SIM_PRODUCT=avx2|generic picks a narrower version (the tests compare them bit for bit)
Product pick_product() {
    const std::string want = env_or("TT_SIM_PRODUCT", "");
    if (__builtin_cpu_supports("avx512f") && want.empty()) return product_avx512;
    if (__builtin_cpu_supports("avx2") && (want.empty() || want == "avx2")) return product_avx2;
    return product_generic;
}
const Product kProduct = pick_product();

}  // namespace

void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_no_reduce(c, line, "matmul_tiles (after matmul_init)");
    const FpuTiles tiles = fpu_tiles(c, {in0, t0, c.srcb, "SrcB (matmul in0)"}, {in1, t1, c.srca, "SrcA (matmul in1)"},
                                     dst, line, "matmul_tiles");
    if (!sim().protocol_only) {
        const Core& core = *cur().core;
        const uint32_t ph = c.fidelity_phases;
        const uint32_t src = (c.fp32_acc ? 1u : 0u) | (c.fp16_src ? 2u : 0u);
        const auto addr = [&](const uint8_t* p) { return static_cast<uint32_t>(p - core.l1.data()); };
        const Prepared& a = operand(tiles.x, addr(tiles.x), core.cbs[in0].fmt, false, ph, false, src);
        const Prepared& b = operand(tiles.y, addr(tiles.y), core.cbs[in1].fmt, true, ph, c.matmul_transpose != 0, src);
        // accumulates into DST; an undefined (acquired, unwritten) tile reads as 0, the storage's value
        kProduct(a, b, tiles.out, ph == 3);
        after_math(c, tiles.out);
    }
    wrote(c, dst);
    cur().core->counters.matmul_tiles++;
}

}  // namespace tt_sim
