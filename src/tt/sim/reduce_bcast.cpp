// tt-sim: reduce (reduce.h) and broadcast (bcast.h) tile ops of the compute kernel API.
//
// reduce_tile<P, D>(icb, icb_scaler, itile, itile_scaler, idst) folds one tile into DST[idst]:
//   REDUCE_ROW     DST[r][0] (op)= reduce_c A[r][c] * s
//   REDUCE_COL     DST[0][c] (op)= reduce_r A[r][c] * s
//   REDUCE_SCALAR  DST[0][0] (op)= reduce_rc (A[r][c] * s) * s   (the hardware pools twice, each pass applying s;
//                  ttnn's AVG SCALAR scaler is 1/sqrt(N) for that reason)
// with (op) = + for SUM/AVG and max for MAX. s is the scaler tile's value: row 0 of every face must hold one value
// (tt-sim refuses anything else); MAX (GMPOOL) uses only its sign and exponent. DST accumulates across calls; an
// undefined DST tile (acquired, not written) reads as 0 for SUM/AVG and -inf for MAX. Operands: REDUCE_ROW with
// SUM/AVG unpacks the scaler through SrcA and the data through SrcB (an MVMUL); MAX and the other dims the data
// through SrcA and the scaler through SrcB. Between reduce_init and reduce_uninit the packer's edge mask writes only
// the result positions (pack_tile in compute.cpp).
//
// Broadcast: out[r][c] = a[r][c] (op) b', with b' = b[0][c] (ROW), b[r][0] (COL), b[0][0] (SCALAR); A through
// SrcA, B through SrcB; DST[idst] is overwritten.

#include <algorithm>
#include <cmath>
#include <limits>

#include "compute_internal.hpp"

namespace tt_sim {

using namespace compute_detail;

namespace {

const char* pool_name(ReducePool p) {
    return p == ReducePool::Sum ? "PoolType::SUM" : (p == ReducePool::Avg ? "PoolType::AVG" : "PoolType::MAX");
}

const char* axis_name(ReduceAxis a) {
    return a == ReduceAxis::Row ? "ReduceDim::REDUCE_ROW"
                                : (a == ReduceAxis::Col ? "ReduceDim::REDUCE_COL" : "ReduceDim::REDUCE_SCALAR");
}

// The scaler's value: row 0 of each of the four faces must hold one value.
float uniform_scaler(const float* s, uint32_t cb, uint32_t tile, uint32_t line) {
    const float v0 = s[0];
    for (uint32_t f = 0; f < hw::kFacesPerTile; ++f) {
        for (uint32_t col = 0; col < hw::kFace; ++col) {
            const float v = s[f * hw::kFaceElems + col];
            if (v != v0 || std::isnan(v)) {
                kernel_error(line, format("reduce_tile: the scaler tile (CB %u, tile %u) must hold one value in row 0 "
                                          "of every face (the reduce multiplies each datum by it); face %u column %u "
                                          "holds %g where face 0 column 0 holds %g (tt-sim emulates uniform scalers "
                                          "only)", cb, tile, f, col, static_cast<double>(v), static_cast<double>(v0)));
            }
        }
    }
    return v0;
}

}  // namespace

void reduce_init(ReducePool pool, ReduceAxis axis, uint32_t icb, uint32_t icb_scaler, uint32_t ocb, uint32_t line) {
    ComputeState& c = cs(line);
    if (!c.started) kernel_error(line, "compute call before compute_kernel_hw_startup()");
    cb_of(icb, line);
    cb_of(icb_scaler, line);
    cb_of(ocb, line);
    // the init configures the unpacker for its operands: they must already have the CBs' formats (LLK assert)
    const char* init = "reduce_init";
    if (axis == ReduceAxis::Row && pool != ReducePool::Max) {   // MVMUL: the scaler in SrcA, the data in SrcB
        check_init_format(c.srca, icb_scaler, "SrcA", init, line);
        check_init_format(c.srcb, icb, "SrcB", init, line);
    } else {
        check_init_format(c.srca, icb, "SrcA", init, line);
        check_init_format(c.srcb, icb_scaler, "SrcB", init, line);
    }
    c.reduce_active = true;
    c.reduce_pool = pool;
    c.reduce_axis = axis;
    c.reduce_line = line;
}

void reduce_uninit(uint32_t line) {
    ComputeState& c = cs(line);
    c.reduce_active = false;
}

void reduce_tile(ReducePool pool, ReduceAxis axis, uint32_t icb, uint32_t icb_scaler, uint32_t itile,
                 uint32_t itile_scaler, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    const char* op = "reduce_tile";
    require_math(c, line, op);
    if (!c.reduce_active) {
        kernel_error(line, format("reduce_tile<%s, %s> without an active reduce_init (call reduce_init<%s, %s>(icb, "
                                  "icb_scaler, ocb) before the reduction)", pool_name(pool), axis_name(axis),
                                  pool_name(pool), axis_name(axis)));
    }
    if (c.reduce_pool != pool || c.reduce_axis != axis) {
        kernel_error(line, format("reduce_tile<%s, %s> but the active reduce_init (%s) configured <%s, %s>",
                                  pool_name(pool), axis_name(axis), line_text(c.reduce_line).c_str(), pool_name(c.reduce_pool),
                                  axis_name(c.reduce_axis)));
    }
    const bool is_max = pool == ReducePool::Max;
    const bool swapped = axis == ReduceAxis::Row && !is_max;   // MVMUL: scaler in SrcA, data in SrcB
    float a[kTileElems], b[kTileElems];
    float* out = swapped
                     ? fpu_operands(c, {icb_scaler, itile_scaler, c.srca, "SrcA (the reduce scaler)"},
                                    {icb, itile, c.srcb, "SrcB (the reduce data)"}, dst, line, op, a, b)
                     : fpu_operands(c, {icb, itile, c.srca, "SrcA (the reduce data)"},
                                    {icb_scaler, itile_scaler, c.srcb, "SrcB (the reduce scaler)"}, dst, line, op, a, b);
    if (!sim().protocol_only) {
        const float* data = swapped ? b : a;
        const float s = uniform_scaler(swapped ? a : b, icb_scaler, itile_scaler, line);
        // GMPOOL takes only the scaler's sign and exponent
        const float f = !is_max || s == 0.0f || !std::isfinite(s) ? s : std::copysign(std::ldexp(1.0f, std::ilogb(s)), s);
        // SUM/AVG (GAPOOL, or the MVMUL of REDUCE_ROW) multiplies datum by scaler with the fidelity phases
        const uint32_t ph = c.fidelity_phases;
        auto scaled = [&](float v) { return is_max ? v * f : (swapped ? fidelity_mul(f, v, ph) : fidelity_mul(v, f, ph)); };
        const float identity = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
        auto fold = [&](float acc, float v) { return is_max ? std::max(acc, v) : acc + v; };
        auto combine = [&](uint32_t i, float v) {
            const float prev = c.defined[dst] ? out[i] : identity;   // undefined DST reads as the identity
            out[i] = fold(prev, v);
        };
        if (axis == ReduceAxis::Row) {
            for (uint32_t r = 0; r < 32; ++r) {
                float acc = identity;
                for (uint32_t col = 0; col < 32; ++col) acc = fold(acc, scaled(data[face_index(r, col)]));
                combine(face_index(r, 0), acc);
            }
        } else if (axis == ReduceAxis::Col) {
            for (uint32_t col = 0; col < 32; ++col) {
                float acc = identity;
                for (uint32_t r = 0; r < 32; ++r) acc = fold(acc, scaled(data[face_index(r, col)]));
                combine(face_index(0, col), acc);
            }
        } else {
            float acc = identity;
            for (uint32_t r = 0; r < 32; ++r) {
                for (uint32_t col = 0; col < 32; ++col) acc = fold(acc, scaled(data[face_index(r, col)]));
            }
            combine(face_index(0, 0), acc * f);
        }
        after_math(c, out);
    }
    wrote(c, dst);
    cur().core->counters.tile_ops++;
    cur().core->counters.reduce_tiles++;
}

namespace {

const char* bcast_op_name(Binary op, BcastDim dim) {
    static const char* const names[3][4] = {
        {"add_tiles_bcast<BroadcastType::NONE>", "add_tiles_bcast_cols", "add_tiles_bcast_rows", "add_tiles_bcast_scalar"},
        {"sub_tiles_bcast<BroadcastType::NONE>", "sub_tiles_bcast_cols", "sub_tiles_bcast_rows", "sub_tiles_bcast_scalar"},
        {"mul_tiles_bcast<BroadcastType::NONE>", "mul_tiles_bcast_cols", "mul_tiles_bcast_rows", "mul_tiles_bcast_scalar"},
    };
    const uint32_t i = op == Binary::Add ? 0 : (op == Binary::Sub ? 1 : 2);
    return names[i][static_cast<uint8_t>(dim)];
}

// The broadcast source position of element (r, c).
inline uint32_t bcast_index(BcastDim dim, uint32_t r, uint32_t col) {
    switch (dim) {
        case BcastDim::Row: return face_index(0, col);
        case BcastDim::Col: return face_index(r, 0);
        case BcastDim::Scalar: return 0;
        default: return face_index(r, col);
    }
}

}  // namespace

void bcast_tiles(Binary op, BcastDim dim, uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t dst,
                 uint32_t bcast_row_idx, uint32_t line) {
    ComputeState& c = cs(line);
    const char* name = bcast_op_name(op, dim);
    require_no_reduce(c, line, name);
    if (bcast_row_idx != 0) {
        kernel_error(line, format("%s with bcast_row_idx %u: only the default 0 (row 0 of B) is emulated", name,
                                  bcast_row_idx));
    }
    float a[kTileElems], b[kTileElems];
    float* out = fpu_operands(c, {icb0, itile0, c.srca, "SrcA"}, {icb1, itile1, c.srcb, "SrcB (the broadcast operand)"},
                              dst, line, name, a, b);
    if (!sim().protocol_only) {
        for (uint32_t r = 0; r < 32; ++r) {
            for (uint32_t col = 0; col < 32; ++col) {
                const uint32_t i = face_index(r, col);
                const float bv = b[bcast_index(dim, r, col)];   // ELWMUL runs the fidelity phases
                out[i] = op == Binary::Mul ? fidelity_mul(a[i], bv, c.fidelity_phases) : apply(op, a[i], bv);
            }
        }
        after_math(c, out);
    }
    wrote(c, dst);
    cur().core->counters.tile_ops++;
}

void unary_bcast(BcastDim dim, uint32_t icb, uint32_t itile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    const char* name = "unary_bcast";
    require_math(c, line, name);
    require_no_reduce(c, line, name);
    // the broadcast modes leave the tile in SrcB (B2D); NONE copies through SrcA
    if (dim == BcastDim::None) check_src_format(c.srca, icb, "SrcA", line, name);
    else check_src_format(c.srcb, icb, "SrcB", line, name);
    require_float_cb(icb, line, name);
    const uint8_t* src = front_tile(icb, itile, line, name);
    float* out = dst_tile(c, dst, line, name);
    if (!sim().protocol_only) {
        float in[kTileElems];
        unpack_a2d(c, icb, src, in);
        for (uint32_t r = 0; r < 32; ++r) {
            for (uint32_t col = 0; col < 32; ++col) out[face_index(r, col)] = in[bcast_index(dim, r, col)];
        }
        after_math(c, out);
    }
    wrote(c, dst);
    cur().core->counters.tile_ops++;
}

}  // namespace tt_sim
