// tt-sim: the compute kernel API: DST handshake, unpacker/packer configuration, inits and tile ops.

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "compute_internal.hpp"

namespace tt_sim {

// =========================================================================================================
// kernel API: compute
namespace compute_detail {

ComputeState& cs(uint32_t line) {
    Task& t = cur();
    if (t.role != Role::Compute) kernel_error(line, "compute API called from a data-movement kernel");
    return t.compute;
}

float* dst_tile(ComputeState& c, uint32_t dst, uint32_t line, const char* op) {
    if (dst >= c.capacity) {
        kernel_error(line, format("%s: DST index %u exceeds the %u tiles DST holds%s", op, dst, c.capacity,
                                  c.fp32_acc ? " with fp32 accumulation" : ""));
    }
    return c.dst.data() + static_cast<size_t>(dst) * kTileElems;
}

void require_math(ComputeState& c, uint32_t line, const char* op) {
    if (c.phase != ComputeState::Phase::Math) {
        kernel_error(line, format("%s outside tile_regs_acquire()/tile_regs_commit()", op));
    }
}

const uint8_t* front_tile(uint32_t cb, uint32_t tile, uint32_t line, const char* op) {
    CBState& s = cb_of(cb, line);
    if (tile >= s.waited) {
        kernel_error(line, format("%s reads tile %u of CB %u but only %u pages were obtained with cb_wait_front", op,
                                  tile, cb, s.waited));
    }
    const uint32_t page = (s.rd_ptr + tile) % s.num_pages;
    return l1_ptr(*cur().core, s.base + page * s.page_size, s.page_size, line);
}

void check_src_format(int configured, uint32_t cb, const char* reg, uint32_t line, const char* op) {
    const CBState& s = cb_of(cb, line);
    const uint8_t want = configured >= 0 ? cur().core->cbs[static_cast<uint32_t>(configured)].fmt : 0xff;
    if (configured < 0 || want != s.fmt) {
        kernel_error(line, format("%s unpacks CB %u (%s) through %s, which is configured for %s; call "
                                  "reconfig_data_format first", op, cb, fmt_name(s.fmt), reg,
                                  configured < 0 ? "nothing" : fmt_name(want)));
    }
}

void after_math(ComputeState& c, float* tile) {
    if (!c.fp32_acc) round_tile(tile, c.dst_fmt);
}

void require_no_reduce(const ComputeState& c, uint32_t line, const char* op) {
    if (c.reduce_active) {
        kernel_error(line, format("reduce_uninit() must be called before %s: the reduce_init at line %u is still "
                                  "active (its unpacker/math state and the packer's edge mask stay configured until "
                                  "reduce_uninit)", op, c.reduce_line));
    }
}

float* fpu_operands(ComputeState& c, const SrcOperand& x, const SrcOperand& y, uint32_t dst, uint32_t line,
                    const char* op, float* a, float* b) {
    require_math(c, line, op);
    check_src_format(x.configured, x.cb, x.reg, line, op);
    check_src_format(y.configured, y.cb, y.reg, line, op);
    const uint8_t* a_bytes = front_tile(x.cb, x.tile, line, op);
    const uint8_t* b_bytes = front_tile(y.cb, y.tile, line, op);
    float* out = dst_tile(c, dst, line, op);
    if (!sim().protocol_only) {
        unpack_tile(a_bytes, cur().core->cbs[x.cb].fmt, a);
        unpack_tile(b_bytes, cur().core->cbs[y.cb].fmt, b);
    }
    return out;
}

float apply(Binary op, float a, float b) {
    switch (op) {
        case Binary::Add: return a + b;
        case Binary::Sub: return a - b;
        case Binary::Mul: return a * b;
        case Binary::Div: return a / b;
        case Binary::RSub: return b - a;
        case Binary::Max: return a >= b ? a : b;
        case Binary::Min: return a <= b ? a : b;
        case Binary::Lt: return a < b ? 1.0f : 0.0f;
        case Binary::Gt: return a > b ? 1.0f : 0.0f;
        case Binary::Le: return a <= b ? 1.0f : 0.0f;
        case Binary::Ge: return a >= b ? 1.0f : 0.0f;
        case Binary::Eq: return a == b ? 1.0f : 0.0f;
        case Binary::Ne: return a != b ? 1.0f : 0.0f;
        case Binary::Pow: return std::pow(a, b);
    }
    return a;
}

}  // namespace compute_detail

using namespace compute_detail;

namespace {

void require_started(ComputeState& c, uint32_t line) {
    if (!c.started) kernel_error(line, "compute call before compute_kernel_hw_startup()");
}

}  // namespace

void hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb, SrcOrder order, uint32_t line) {
    ComputeState& c = cs(line);
    if (c.started) kernel_error(line, "compute_kernel_hw_startup() called twice");
    cb_of(icb0, line);
    cb_of(icb1, line);
    cb_of(ocb, line);
    c.started = true;
    c.srca = static_cast<int>(order == SrcOrder::Reverse ? icb1 : icb0);
    c.srcb = static_cast<int>(order == SrcOrder::Reverse ? icb0 : icb1);
    c.pack = static_cast<int>(ocb);
    c.dst_fmt = cur().core->cbs[icb0].fmt;
}

void reconfig_srca(uint32_t cb, uint32_t line) {
    ComputeState& c = cs(line);
    cb_of(cb, line);
    c.srca = static_cast<int>(cb);
}

void reconfig_srcb(uint32_t cb, uint32_t line) {
    ComputeState& c = cs(line);
    cb_of(cb, line);
    c.srcb = static_cast<int>(cb);
}

void reconfig_pack(uint32_t cb, uint32_t line) {
    ComputeState& c = cs(line);
    cb_of(cb, line);
    c.pack = static_cast<int>(cb);
}

void tile_regs_acquire(uint32_t line) {
    ComputeState& c = cs(line);
    require_started(c, line);
    if (c.phase != ComputeState::Phase::Idle) kernel_error(line, "tile_regs_acquire() while DST is already acquired");
    // Pack release leaves DST undefined: FPU ops read it as their identity (0 for sums and matmul; reduce MAX
    // substitutes -inf itself) and the packer as 0, so the storage is zero; SFPU reads of it are refused.
    std::fill(c.dst.begin(), c.dst.end(), 0.0f);
    c.defined.fill(false);
    c.phase = ComputeState::Phase::Math;
}

void tile_regs_commit(uint32_t line) {
    ComputeState& c = cs(line);
    if (c.phase != ComputeState::Phase::Math) kernel_error(line, "tile_regs_commit() without tile_regs_acquire()");
    c.phase = ComputeState::Phase::Committed;
}

void tile_regs_wait(uint32_t line) {
    ComputeState& c = cs(line);
    if (c.phase != ComputeState::Phase::Committed) kernel_error(line, "tile_regs_wait() without tile_regs_commit()");
    c.phase = ComputeState::Phase::Packing;
}

void tile_regs_release(uint32_t line) {
    ComputeState& c = cs(line);
    if (c.phase != ComputeState::Phase::Packing) kernel_error(line, "tile_regs_release() without tile_regs_wait()");
    c.phase = ComputeState::Phase::Idle;
}

void pack_tile(uint32_t dst, uint32_t cb, uint32_t out_index, bool out_of_order, uint32_t line) {
    ComputeState& c = cs(line);
    if (c.phase != ComputeState::Phase::Packing) {
        kernel_error(line, "pack_tile() outside tile_regs_wait()/tile_regs_release()");
    }
    CBState& s = cb_of(cb, line);
    if (c.pack != static_cast<int>(cb) && cur().core->cbs[static_cast<uint32_t>(c.pack)].fmt != s.fmt) {
        kernel_error(line, format("pack_tile into CB %u (%s) but the packer is configured for %s; call "
                                  "pack_reconfig_data_format first", cb, fmt_name(s.fmt),
                                  fmt_name(cur().core->cbs[static_cast<uint32_t>(c.pack)].fmt)));
    }
    const uint32_t slot = out_of_order ? out_index : s.packed;
    if (slot >= s.reserved) {
        kernel_error(line, format("pack_tile writes slot %u of CB %u but only %u pages were reserved", slot, cb,
                                  s.reserved));
    }
    const float* tile = dst_tile(c, dst, line, "pack_tile");
    const uint32_t page = (s.wr_ptr + slot) % s.num_pages;
    if (!sim().protocol_only) {
        uint8_t* out = l1_ptr(*cur().core, s.base + page * s.page_size, s.page_size, line);
        if (c.reduce_active) {
            // reduce_init's packer edge mask: only the reduce's result positions are written, 0 elsewhere
            float masked[kTileElems] = {};
            const uint32_t rows = c.reduce_axis == ReduceAxis::Row ? 32 : 1;
            const uint32_t cols = c.reduce_axis == ReduceAxis::Col ? 32 : 1;
            for (uint32_t r = 0; r < rows; ++r) {
                for (uint32_t col = 0; col < cols; ++col) masked[face_index(r, col)] = tile[face_index(r, col)];
            }
            pack_tile_bytes(masked, s.fmt, out);
        } else {
            pack_tile_bytes(tile, s.fmt, out);
        }
    }
    if (!out_of_order) s.packed++;
    else s.packed = std::max(s.packed, slot + 1);
    cur().core->counters.packs++;
}

void op_init(Init kind, uint32_t cb_a, uint32_t cb_b, uint32_t flag, const char* name, uint32_t line) {
    ComputeState& c = cs(line);
    require_started(c, line);
    if (kind == Init::Sfpu) return;   // SFPU inits touch neither the unpacker nor the packer's edge mask
    require_no_reduce(c, line, (std::string(name) + "()").c_str());
    if (kind == Init::Matmul) c.matmul_transpose = flag;
    cb_of(cb_a, line);
    cb_of(cb_b, line);
}

void copy_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "copy_tile");
    require_no_reduce(c, line, "copy_tile (after copy_init)");
    check_src_format(c.srca, cb, "SrcA", line, "copy_tile");
    const uint8_t* src = front_tile(cb, tile, line, "copy_tile");
    float* out = dst_tile(c, dst, line, "copy_tile");
    if (!sim().protocol_only) {
        unpack_tile(src, cur().core->cbs[cb].fmt, out);
        after_math(c, out);
    }
    c.defined[dst] = true;
    cur().core->counters.tile_ops++;
}

void transpose_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "transpose_tile");
    require_no_reduce(c, line, "transpose_tile (after transpose_init)");
    check_src_format(c.srca, cb, "SrcA", line, "transpose_tile");
    const uint8_t* src = front_tile(cb, tile, line, "transpose_tile");
    float* out = dst_tile(c, dst, line, "transpose_tile");
    if (!sim().protocol_only) {
        float in[kTileElems];
        unpack_tile(src, cur().core->cbs[cb].fmt, in);
        for (uint32_t r = 0; r < 32; ++r)
            for (uint32_t col = 0; col < 32; ++col) out[face_index(r, col)] = in[face_index(col, r)];
        after_math(c, out);
    }
    c.defined[dst] = true;
    cur().core->counters.tile_ops++;
}

void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_no_reduce(c, line, "matmul_tiles (after matmul_init)");
    float a[kTileElems], b[kTileElems];
    float* out = fpu_operands(c, {in0, t0, c.srcb, "SrcB (matmul in0)"}, {in1, t1, c.srca, "SrcA (matmul in1)"}, dst,
                              line, "matmul_tiles", a, b);
    if (!sim().protocol_only) {
        float ar[32][32], br[32][32];
        for (uint32_t r = 0; r < 32; ++r) {
            for (uint32_t k = 0; k < 32; ++k) {
                ar[r][k] = a[face_index(r, k)];
                br[r][k] = c.matmul_transpose ? b[face_index(k, r)] : b[face_index(r, k)];
            }
        }
        // accumulates into DST; an undefined (acquired, unwritten) tile reads as 0, the storage's value
        for (uint32_t r = 0; r < 32; ++r) {
            float row[32] = {};
            for (uint32_t k = 0; k < 32; ++k) {
                const float av = ar[r][k];
                for (uint32_t col = 0; col < 32; ++col) row[col] += av * br[k][col];
            }
            for (uint32_t col = 0; col < 32; ++col) out[face_index(r, col)] += row[col];
        }
        after_math(c, out);
    }
    c.defined[dst] = true;
    cur().core->counters.matmul_tiles++;
}

void binary_tiles(Binary op, uint32_t cb_a, uint32_t cb_b, uint32_t ta, uint32_t tb, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_no_reduce(c, line, "an eltwise binary tile op (after add/sub/mul_init)");
    float a[kTileElems], b[kTileElems];
    float* out = fpu_operands(c, {cb_a, ta, c.srca, "SrcA"}, {cb_b, tb, c.srcb, "SrcB"}, dst, line,
                              "eltwise binary tile op", a, b);
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = apply(op, a[i], b[i]);
        after_math(c, out);
    }
    c.defined[dst] = true;
    cur().core->counters.tile_ops++;
}

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
    c.defined[out] = true;
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

void fill_tile(uint32_t dst, float value, uint32_t line) {
    sfpu_op({}, dst, 4, line, "fill_tile", [&](uint32_t) { return value; });
}

}  // namespace tt_sim
