// tt-sim: the compute kernel API: DST handshake, unpacker/packer configuration, inits and tile ops.

#include <algorithm>
#include <cmath>

#include "sim_internal.hpp"

namespace tt_sim {

// =========================================================================================================
// kernel API: compute
namespace {

ComputeState& cs(uint32_t line) {
    Task& t = cur();
    if (t.role != Role::Compute) kernel_error(line, "compute API called from a data-movement kernel");
    return t.compute;
}

void require_started(ComputeState& c, uint32_t line) {
    if (!c.started) kernel_error(line, "compute call before compute_kernel_hw_startup()");
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

// A tile at the front of a CB that the compute kernel has waited for.
const uint8_t* front_tile(uint32_t cb, uint32_t tile, uint32_t line, const char* op) {
    CBState& s = cb_of(cb, line);
    if (tile >= s.waited) {
        kernel_error(line, format("%s reads tile %u of CB %u but only %u pages were obtained with cb_wait_front", op,
                                  tile, cb, s.waited));
    }
    const uint32_t page = (s.rd_ptr + tile) % s.num_pages;
    return l1_ptr(*cur().core, s.base + page * s.page_size, s.page_size, line);
}

void check_src_format(ComputeState& c, int configured, uint32_t cb, const char* reg, uint32_t line, const char* op) {
    const CBState& s = cb_of(cb, line);
    const uint8_t want = configured >= 0 ? cur().core->cbs[static_cast<uint32_t>(configured)].fmt : 0xff;
    if (configured < 0 || want != s.fmt) {
        kernel_error(line, format("%s unpacks CB %u (%s) through %s, which is configured for %s; call "
                                  "reconfig_data_format first", op, cb, fmt_name(s.fmt), reg,
                                  configured < 0 ? "nothing" : fmt_name(want)));
    }
    (void)c;
}

void after_math(ComputeState& c, float* tile) {
    if (!c.fp32_acc) round_tile(tile, c.dst_fmt);
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
    std::fill(c.dst.begin(), c.dst.end(), 0.0f);   // the packer clears DST on release
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
        pack_tile_bytes(tile, s.fmt, l1_ptr(*cur().core, s.base + page * s.page_size, s.page_size, line));
    }
    if (!out_of_order) s.packed++;
    else s.packed = std::max(s.packed, slot + 1);
    cur().core->counters.packs++;
}

void op_init(Init kind, uint32_t cb_a, uint32_t cb_b, uint32_t flag, uint32_t line) {
    ComputeState& c = cs(line);
    require_started(c, line);
    if (kind == Init::Matmul) c.matmul_transpose = flag;
    if (kind == Init::Copy || kind == Init::Transpose || kind == Init::Binary || kind == Init::Matmul) {
        cb_of(cb_a, line);
        cb_of(cb_b, line);
    }
}

void copy_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "copy_tile");
    check_src_format(c, c.srca, cb, "SrcA", line, "copy_tile");
    const uint8_t* src = front_tile(cb, tile, line, "copy_tile");
    float* out = dst_tile(c, dst, line, "copy_tile");
    if (!sim().protocol_only) {
        unpack_tile(src, cur().core->cbs[cb].fmt, out);
        after_math(c, out);
    }
    cur().core->counters.tile_ops++;
}

void transpose_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "transpose_tile");
    check_src_format(c, c.srca, cb, "SrcA", line, "transpose_tile");
    const uint8_t* src = front_tile(cb, tile, line, "transpose_tile");
    float* out = dst_tile(c, dst, line, "transpose_tile");
    if (!sim().protocol_only) {
        float in[kTileElems];
        unpack_tile(src, cur().core->cbs[cb].fmt, in);
        for (uint32_t r = 0; r < 32; ++r)
            for (uint32_t col = 0; col < 32; ++col) out[face_index(r, col)] = in[face_index(col, r)];
        after_math(c, out);
    }
    cur().core->counters.tile_ops++;
}

namespace {

// One FPU operand: CB `cb`, tile `tile`, through source register `reg` configured for CB `configured`.
struct SrcOperand {
    uint32_t cb, tile;
    int configured;
    const char* reg;
};

// Checks and unpacks the two FPU operands of `op` into a and b (unless protocol-only); returns DST tile `dst`.
float* fpu_operands(ComputeState& c, const SrcOperand& x, const SrcOperand& y, uint32_t dst, uint32_t line,
                    const char* op, float* a, float* b) {
    require_math(c, line, op);
    check_src_format(c, x.configured, x.cb, x.reg, line, op);
    check_src_format(c, y.configured, y.cb, y.reg, line, op);
    const uint8_t* a_bytes = front_tile(x.cb, x.tile, line, op);
    const uint8_t* b_bytes = front_tile(y.cb, y.tile, line, op);
    float* out = dst_tile(c, dst, line, op);
    if (!sim().protocol_only) {
        unpack_tile(a_bytes, cur().core->cbs[x.cb].fmt, a);
        unpack_tile(b_bytes, cur().core->cbs[y.cb].fmt, b);
    }
    return out;
}

}  // namespace

void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
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
    cur().core->counters.matmul_tiles++;
}

namespace {
inline float apply(Binary op, float a, float b) {
    switch (op) {
        case Binary::Add: return a + b;
        case Binary::Sub: return a - b;
        case Binary::Mul: return a * b;
        case Binary::Div: return a / b;
        default: return b - a;
    }
}
}  // namespace

void binary_tiles(Binary op, uint32_t cb_a, uint32_t cb_b, uint32_t ta, uint32_t tb, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    float a[kTileElems], b[kTileElems];
    float* out = fpu_operands(c, {cb_a, ta, c.srca, "SrcA"}, {cb_b, tb, c.srcb, "SrcB"}, dst, line,
                              "eltwise binary tile op", a, b);
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = apply(op, a[i], b[i]);
        after_math(c, out);
    }
    cur().core->counters.tile_ops++;
}

void binary_dst(Binary op, uint32_t dst_a, uint32_t dst_b, uint32_t dst_out, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "SFPU binary op");
    float* a = dst_tile(c, dst_a, line, "SFPU binary op");
    float* b = dst_tile(c, dst_b, line, "SFPU binary op");
    float* out = dst_tile(c, dst_out, line, "SFPU binary op");
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = apply(op, a[i], b[i]);
        after_math(c, out);
    }
    cur().core->counters.tile_ops++;
}

namespace {

// An SFPU-style op applied in place to DST tile `dst` (`fn(float*)` computes the tile).
template <typename Fn>
void on_dst_tile(uint32_t dst, uint32_t line, const char* op, Fn fn) {
    ComputeState& c = cs(line);
    require_math(c, line, op);
    float* t = dst_tile(c, dst, line, op);
    if (!sim().protocol_only) {
        fn(t);
        after_math(c, t);
    }
    cur().core->counters.tile_ops++;
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
    }
    return x;
}

}  // namespace

void binary_scalar(Binary op, uint32_t dst, uint32_t param_bits, uint32_t line) {
    const float s = u2f(param_bits);
    on_dst_tile(dst, line, "SFPU scalar op", [&](float* t) {
        for (uint32_t i = 0; i < kTileElems; ++i) t[i] = apply(op, t[i], s);
    });
}

void unary(Unary op, uint32_t dst, uint32_t line) {
    on_dst_tile(dst, line, "SFPU unary op", [&](float* t) {
        for (uint32_t i = 0; i < kTileElems; ++i) t[i] = unary_value(op, t[i]);
    });
}

void fill_tile(uint32_t dst, float value, uint32_t line) {
    on_dst_tile(dst, line, "fill_tile", [&](float* t) { std::fill(t, t + kTileElems, value); });
}

}  // namespace tt_sim
