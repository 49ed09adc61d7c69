// tt-sim: the compute kernel API's SFPU ops: unary, parameterised, binary between DST tiles, where, fill.
// They work in place on DST in fp32 (libm; the hardware's approximations are not modelled).

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "compute_internal.hpp"

namespace tt_sim {

using namespace compute_detail;

// =========================================================================================================
// SFPU ops: in place on DST. Every DST tile they read must have been written since tile_regs_acquire().
namespace {

const char* binary_name(Binary op) {
    static const char* const names[] = {"add_binary_tile", "sub_binary_tile", "mul_binary_tile", "div_binary_tile",
                                        "rsub_binary_tile", "binary_max_tile", "binary_min_tile", "lt_binary_tile",
                                        "gt_binary_tile", "le_binary_tile", "ge_binary_tile", "eq_binary_tile",
                                        "ne_binary_tile", "power_binary_tile"};
    return names[static_cast<uint8_t>(op)];
}

const char* scalar_name(Binary op) {
    static const char* const names[] = {"add_unary_tile", "sub_unary_tile", "mul_unary_tile", "div_unary_tile",
                                        "rsub_unary_tile"};
    return static_cast<uint8_t>(op) < 5 ? names[static_cast<uint8_t>(op)] : "binop_with_scalar tile op";
}

const char* unary_name(Unary op) {
    static const char* const names[] = {"exp_tile", "log_tile", "sqrt_tile", "rsqrt_tile", "recip_tile", "relu_tile",
                                        "gelu_tile", "gelu_tanh_tile", "negative_tile", "tanh_tile", "sigmoid_tile",
                                        "erf_tile", "erfc_tile", "exp2_tile", "abs_tile", "square_tile", "silu_tile",
                                        "sign_tile", "gtz_tile", "ltz_tile", "gez_tile", "lez_tile", "eqz_tile",
                                        "nez_tile"};
    return names[static_cast<uint8_t>(op)];
}

const char* param_name(UnaryParam op) {
    static const char* const names[] = {"power_tile", "power_iterative_tile", "unary_max_tile", "unary_min_tile",
                                        "unary_gt_tile", "unary_lt_tile", "unary_ge_tile", "unary_le_tile",
                                        "unary_eq_tile", "unary_ne_tile", "clamp_tile", "exp_tile<scale_en=true>"};
    return names[static_cast<uint8_t>(op)];
}

// DST tile `dst` read by the SFPU op `op`: it must have been written since tile_regs_acquire().
float* sfpu_read(ComputeState& c, uint32_t dst, uint32_t line, const char* op) {
    float* t = dst_tile(c, dst, line, op);
    if (!c.defined[dst]) {
        kernel_error(line, format("%s reads DST[%u], which nothing wrote since tile_regs_acquire(): DST is undefined "
                                  "after acquire on hardware (pack release issues ZEROACC) and SFPU loads of it are "
                                  "undefined behaviour; write the tile first (copy_tile, an FPU op, fill_tile)", op,
                                  dst));
    }
    if (c.integer[dst]) {
        kernel_error(line, format("%s reads DST[%u], which holds 32-bit integers (copy_tile of a UInt8 CB, or "
                                  "typecast_tile<..., UInt8>): the SFPU op would take their bits for floats; "
                                  "convert them with typecast_tile<UInt8, Float32> first", op, dst));
    }
    return t;
}

// The faces a VectorMode covers (R: faces 0-1, C: faces 0 and 2, RC: all).
uint32_t face_mask(uint8_t vector_mode, uint32_t line, const char* op) {
    switch (vector_mode) {
        case 1: return 0x3;   // VectorMode::R
        case 2: return 0x5;   // VectorMode::C
        case 4: return 0xf;   // VectorMode::RC
        default:
            kernel_error(line, format("%s with VectorMode %u: only R, C and RC are emulated", op, vector_mode));
    }
}

float unary_value(Unary op, float x) {
    switch (op) {
        case Unary::Exp: return std::exp(x);
        case Unary::Log: return std::log(x);
        case Unary::Sqrt: return std::sqrt(x);
        case Unary::Rsqrt: return 1.0f / std::sqrt(x);
        case Unary::Recip: return 1.0f / x;
        case Unary::Relu: return x > 0.0f ? x : 0.0f;
        case Unary::Gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678f));
        case Unary::GeluTanh: return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
        case Unary::Negative: return -x;
        case Unary::Tanh: return std::tanh(x);
        case Unary::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
        case Unary::Erf: return std::erf(x);
        case Unary::Erfc: return std::erfc(x);
        case Unary::Exp2: return std::exp2(x);
        case Unary::Abs: return std::fabs(x);
        case Unary::Square: return x * x;
        case Unary::Silu: return x / (1.0f + std::exp(-x));
        case Unary::Sign: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case Unary::Gtz: return x > 0.0f ? 1.0f : 0.0f;
        case Unary::Ltz: return x < 0.0f ? 1.0f : 0.0f;
        case Unary::Gez: return x >= 0.0f ? 1.0f : 0.0f;
        case Unary::Lez: return x <= 0.0f ? 1.0f : 0.0f;
        case Unary::Eqz: return x == 0.0f ? 1.0f : 0.0f;
        case Unary::Nez: return x != 0.0f ? 1.0f : 0.0f;
    }
    return x;
}

float param_value(UnaryParam op, float x, uint32_t p0, uint32_t p1) {
    const float a = u2f(p0), b = u2f(p1);
    switch (op) {
        case UnaryParam::Power: return std::pow(x, a);
        case UnaryParam::PowerIterative: {
            float y = 1.0f;
            for (uint32_t i = 0; i < p0; ++i) y *= x;
            return y;
        }
        case UnaryParam::Max: return x >= a ? x : a;
        case UnaryParam::Min: return x <= a ? x : a;
        case UnaryParam::Gt: return x > a ? 1.0f : 0.0f;
        case UnaryParam::Lt: return x < a ? 1.0f : 0.0f;
        case UnaryParam::Ge: return x >= a ? 1.0f : 0.0f;
        case UnaryParam::Le: return x <= a ? 1.0f : 0.0f;
        case UnaryParam::Eq: return x == a ? 1.0f : 0.0f;
        case UnaryParam::Ne: return x != a ? 1.0f : 0.0f;
        case UnaryParam::Clamp: return std::min(std::max(x, a), b);
        case UnaryParam::ExpScaled: return std::exp(x * a);
    }
    return x;
}

// An SFPU op writing DST tile `out` from the tiles `in` (all defined): out[i] = fn(i) over the faces of
// `vector_mode`; the other faces keep their values.
template <typename Fn>
void sfpu_op(std::initializer_list<uint32_t> in, uint32_t out, uint8_t vector_mode, uint32_t line, const char* op,
             Fn fn) {
    ComputeState& c = cs(line);
    require_math(c, line, op);
    for (uint32_t d : in) sfpu_read(c, d, line, op);
    float* t = dst_tile(c, out, line, op);
    const uint32_t faces = face_mask(vector_mode, line, op);
    if (!sim().protocol_only) {
        float result[kTileElems];
        std::copy(t, t + kTileElems, result);
        for (uint32_t f = 0; f < hw::kFacesPerTile; ++f) {
            if (!(faces >> f & 1u)) continue;
            for (uint32_t i = f * hw::kFaceElems; i < (f + 1) * hw::kFaceElems; ++i) result[i] = fn(i);
        }
        std::copy(result, result + kTileElems, t);
        after_math(c, t);
    }
    wrote(c, out);
    cur().core->counters.tile_ops++;
}

}  // namespace

void binary_dst(Binary op, uint32_t dst_a, uint32_t dst_b, uint32_t dst_out, uint8_t vector_mode, uint32_t line) {
    ComputeState& c = cs(line);
    const float* a = dst_tile(c, dst_a, line, binary_name(op));
    const float* b = dst_tile(c, dst_b, line, binary_name(op));
    sfpu_op({dst_a, dst_b}, dst_out, vector_mode, line, binary_name(op), [&](uint32_t i) { return apply(op, a[i], b[i]); });
}

void binary_scalar(Binary op, uint32_t dst, uint32_t param_bits, uint32_t line) {
    const float s = u2f(param_bits);
    const float* t = dst_tile(cs(line), dst, line, scalar_name(op));
    sfpu_op({dst}, dst, 4, line, scalar_name(op), [&](uint32_t i) { return apply(op, t[i], s); });
}

void unary(Unary op, uint32_t dst, uint8_t vector_mode, uint32_t line) {
    const float* t = dst_tile(cs(line), dst, line, unary_name(op));
    sfpu_op({dst}, dst, vector_mode, line, unary_name(op), [&](uint32_t i) { return unary_value(op, t[i]); });
}

void unary_param(UnaryParam op, uint32_t dst, uint32_t p0, uint32_t p1, uint8_t vector_mode, uint32_t line) {
    const float* t = dst_tile(cs(line), dst, line, param_name(op));
    sfpu_op({dst}, dst, vector_mode, line, param_name(op), [&](uint32_t i) { return param_value(op, t[i], p0, p1); });
}

void where_tile(uint32_t dst_cond, uint32_t dst_true, uint32_t dst_false, uint32_t dst_out, uint32_t line) {
    ComputeState& c = cs(line);
    const float* cond = dst_tile(c, dst_cond, line, "where_tile");
    const float* yes = dst_tile(c, dst_true, line, "where_tile");
    const float* no = dst_tile(c, dst_false, line, "where_tile");
    sfpu_op({dst_cond, dst_true, dst_false}, dst_out, 4, line, "where_tile",
            [&](uint32_t i) { return cond[i] != 0.0f ? yes[i] : no[i]; });
}

// typecast_tile (api/compute/eltwise_unary/typecast.h, ckernel_sfpu_typecast.h of 0.81.1). UInt8 -> Float32 /
// Float16_b: calculate_typecast_uint32_to_fp32 / _fp16b on the zero-extended byte, exact. Int8 -> Float32 /
// Float16_b (the byte of a UInt8 CB as two's complement): calculate_typecast_int8_to_fp32, (byte ^ 0x80) - 128,
// exact for -128..127. Float -> UInt8:
// calculate_typecast_fp32_to_uint8: |x| truncated toward zero (exponents below 0 give 0), negated for x < 0, the
// low byte of that two's complement value; exponents >= 31 (|x| >= 2^31, Inf, NaN) give 0. Float -> Int32:
// calculate_typecast_fp32_to_int32: truncated toward zero, saturated (|x| >= 2^31 and Inf give INT_MIN / INT_MAX
// by sign; NaN by its sign bit, as the mantissa shift leaves it). Int32 -> Float32: calculate_typecast_int32_to_fp32.
void typecast_tile(uint8_t in_fmt, uint8_t out_fmt, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    const bool from_int32 = in_fmt == kTypecastInt32;
    const bool from_int = in_fmt == kTypecastUInt8 || in_fmt == kTypecastInt8 || from_int32;
    const bool from_int8 = in_fmt == kTypecastInt8;
    const bool to_int32 = out_fmt == kTypecastInt32;
    const bool to_bf16 = !from_int && out_fmt == kFloat16_b;   // a float rounded to bfloat16 in DST
    const char* op = from_int8 ? "typecast_tile<Int8, float>"
                     : from_int32 ? "typecast_tile<Int32, float>"
                     : from_int ? "typecast_tile<UInt8, float>"
                     : to_bf16 ? "typecast_tile<Float32, Float16_b>"
                               : to_int32 ? "typecast_tile<float, Int32>" : "typecast_tile<float, UInt8>";
    require_math(c, line, op);
    float* t = dst_tile(c, dst, line, op);
    if (!c.defined[dst]) sfpu_read(c, dst, line, op);   // the undefined-DST error
    if (!c.fp32_acc) {
        kernel_error(line, format("%s with fp32_dest_acc_en off: DST holds the integers as 32-bit values (the LLK "
                                  "asserts FP32 Dest mode for Int8/UInt8/Int32 data: llk_unpack_common.h, "
                                  "llk_math_common.h); set ComputeConfig.fp32_dest_acc_en", op));
    }
    if (c.integer[dst] != from_int) {
        kernel_error(line, format("%s on DST[%u], which holds %s: %s", op, dst,
                                  c.integer[dst] ? "32-bit integers" : "floats",
                                  from_int ? "the SFPU would take the floats' bits for integers (copy_tile of a "
                                             "UInt8 CB puts integers in DST)"
                                           : "they are integers already (convert them with typecast_tile<UInt8, "
                                             "Float32> first)"));
    }
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) {
            if (from_int32) {   // calculate_typecast_int32_to_fp32: rounded to fp32 (exact below 2^24)
                t[i] = static_cast<float>(static_cast<int32_t>(f2u(t[i])));
            } else if (from_int8) {
                const int32_t byte = static_cast<int32_t>(f2u(t[i]) & 0xffu);
                t[i] = static_cast<float>((byte ^ 0x80) - 128);   // -128..127: exact in Float32 and Float16_b
            } else if (from_int) {
                t[i] = static_cast<float>(f2u(t[i]));   // 0..255: exact in Float32 and Float16_b
            } else if (to_bf16) {   // calculate_typecast_fp32_to_fp16b: + 0x7FFF + lsb, low 16 bits cleared (RNE)
                uint32_t bits = f2u(t[i]);
                bits += 0x7FFFu + ((bits >> 16) & 1u);
                t[i] = u2f(bits & 0xFFFF0000u);
            } else if (to_int32) {
                const float x = t[i];
                int32_t v;
                if (std::isnan(x)) {
                    v = std::signbit(x) ? INT32_MIN : INT32_MAX;
                } else if (std::fabs(x) >= 2147483648.0f) {
                    v = x < 0 ? INT32_MIN : INT32_MAX;
                } else {
                    v = static_cast<int32_t>(std::trunc(x));
                }
                t[i] = u2f(static_cast<uint32_t>(v));
            } else {
                const float x = t[i];
                uint32_t byte = 0;
                if (std::isfinite(x) && std::fabs(x) < 2147483648.0f) {
                    byte = static_cast<uint32_t>(static_cast<int64_t>(std::trunc(x))) & 0xffu;
                }
                t[i] = u2f(byte);
            }
        }
        if (from_int && out_fmt == kFloat16_b) round_tile(t, kFloat16_b);   // FP32_TO_FP16B (a no-op on 0..255)
    }
    wrote(c, dst, !from_int && !to_bf16);
    cur().core->counters.tile_ops++;
}

// ---- the SFPU reduce (compute_kernel_api.h sfpu_reduce / sfpu_reduce_init; ckernel_sfpu_reduce.h of 0.81.1) ------
namespace {

const char* sfpu_pool_name(uint8_t pool) {
    static const char* const names[] = {"PoolType::SUM", "PoolType::AVG", "PoolType::MAX", "PoolType::MIN"};
    return pool < 4 ? names[pool] : "PoolType::?";
}

// 32 values folded as the SFPU's lane reduction does: a pairwise tree (v[i] + v[i + 16], then + 8, + 4, + 2, + 1),
// each add an fp32 add (SFPADD). ckernel_sfpu_reduce.h adds the upper and lower faces, tree-reduces the loaded
// registers and rotates the 8 lanes together by 4, 2 and 1; tt-sim keeps that shape of a 5-level tree, not the exact
// pairing of every lane.
float tree_fold(float* v, uint8_t pool) {
    for (uint32_t half = 16; half >= 1; half /= 2) {
        for (uint32_t i = 0; i < half; ++i) {
            const float a = v[i], b = v[i + half];
            v[i] = pool == 2 ? (a >= b ? a : b) : pool == 3 ? (a <= b ? a : b) : a + b;
        }
    }
    return v[0];
}

}  // namespace

void sfpu_reduce_init(uint8_t pool, uint8_t fmt, uint32_t line) {
    ComputeState& c = cs(line);
    op_init(Init::Sfpu, 0, 0, 0, "sfpu_reduce_init", line);
    c.sfpu_reduce_pool = pool;
    c.sfpu_reduce_fmt = fmt;
}

void sfpu_reduce(uint8_t pool, ReduceAxis axis, uint8_t fmt, uint32_t dst, uint32_t ct, uint32_t rt, uint32_t line) {
    ComputeState& c = cs(line);
    const char* op = "sfpu_reduce";
    require_math(c, line, op);
    if (c.sfpu_reduce_pool != pool || c.sfpu_reduce_fmt != fmt) {
        kernel_error(line, format("sfpu_reduce<%s, %s> without sfpu_reduce_init<%s, %s> since the last SFPU init (the "
                                  "init records the SFPU's replay buffer and constants for that pool and format; "
                                  "other SFPU inits reprogram them)", sfpu_pool_name(pool), fmt_name(fmt),
                                  sfpu_pool_name(pool), fmt_name(fmt)));
    }
    if (fmt == kFloat32 && !c.fp32_acc) {
        kernel_error(line, "sfpu_reduce<..., DataFormat::Float32> with fp32_dest_acc_en off: DST holds 16-bit values; "
                           "Float32 data needs ComputeConfig.fp32_dest_acc_en");
    }
    if (axis == ReduceAxis::Scalar) kernel_error(line, "sfpu_reduce: REDUCE_SCALAR is not an SFPU reduce dimension");
    if (axis == ReduceAxis::Col && (ct != 1 || rt != 1)) {
        kernel_error(line, format("sfpu_reduce<REDUCE_COL> with ct_dim %u, rt_dim %u: the column reduce works on one "
                                  "tile (ct_dim = rt_dim = 1)", ct, rt));
    }
    if (ct == 0 || rt == 0) kernel_error(line, "sfpu_reduce with ct_dim or rt_dim 0");
    for (uint32_t i = 0; i < ct * rt; ++i) sfpu_read(c, dst + i, line, op);
    if (!sim().protocol_only) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const bool avg = pool == 1;
        float v[32];
        for (uint32_t tr = 0; tr < rt; ++tr) {
            float* first = dst_tile(c, dst + tr * ct, line, op);
            float result[32];
            for (uint32_t k = 0; k < 32; ++k) {   // ROW: row k's value; COL: column k's
                float acc = 0.0f;
                for (uint32_t tc = 0; tc < ct; ++tc) {   // per tile, then across the tiles of the row (in order)
                    const float* t = dst_tile(c, dst + tr * ct + tc, line, op);
                    for (uint32_t j = 0; j < 32; ++j) {
                        v[j] = axis == ReduceAxis::Row ? t[face_index(k, j)] : t[face_index(j, k)];
                    }
                    const float part = tree_fold(v, pool);
                    acc = tc == 0 ? part : pool == 2 ? std::max(acc, part) : pool == 3 ? std::min(acc, part) : acc + part;
                }
                result[k] = avg ? acc * (1.0f / static_cast<float>(32 * (axis == ReduceAxis::Row ? ct : 1))) : acc;
            }
            // the SFPU stores partial results over the rest of the tiles it reads; tt-sim makes them NaN
            for (uint32_t tc = 0; tc < ct; ++tc) {
                float* t = dst_tile(c, dst + tr * ct + tc, line, op);
                std::fill(t, t + kTileElems, nan);
            }
            for (uint32_t k = 0; k < 32; ++k) first[axis == ReduceAxis::Row ? face_index(k, 0) : face_index(0, k)] = result[k];
            after_math(c, first);
        }
    }
    for (uint32_t i = 0; i < ct * rt; ++i) wrote(c, dst + i);
    cur().core->counters.tile_ops++;
}

void fill_tile(uint32_t dst, float value, uint32_t line) {
    sfpu_op({}, dst, 4, line, "fill_tile", [&](uint32_t) { return value; });
}

}  // namespace tt_sim
