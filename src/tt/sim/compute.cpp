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
    c.dirty |= 1u << dst;
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

void check_init_format(int configured, uint32_t cb, const char* reg, const char* init, uint32_t line) {
    const CBState& s = cb_of(cb, line);
    const uint8_t have = configured >= 0 ? cur().core->cbs[static_cast<uint32_t>(configured)].fmt : 0xff;
    if (configured >= 0 && have == s.fmt) return;
    kernel_error(line, format("%s for CB %u (%s) while %s is configured for %s: reconfig_data_format%s must come "
                              "before the init it affects (the LLK's init asserts that the unpacker is configured "
                              "for the CB's format: are_unpackers_AB_configured_correctly)", init, cb, fmt_name(s.fmt),
                              reg, configured < 0 ? "nothing" : fmt_name(have),
                              std::string(reg) == "SrcA" ? "(_srca)" : "(_srcb)"));
}

void require_float_cb(uint32_t cb, uint32_t line, const char* op) {
    const uint8_t fmt = cb_of(cb, line).fmt;
    if (!int_format(fmt)) return;
    kernel_error(line, format("%s reads CB %u (%s): the emulator models integer tiles on the copy_tile + "
                              "typecast_tile path only (the FPU's integer math is not emulated); copy_tile the tile "
                              "and convert it with typecast_tile", op, cb, fmt_name(fmt)));
}

void after_math(ComputeState& c, float* tile) {
    if (!c.fp32_acc) round_tile(tile, c.dst_fmt);
}

void require_no_reduce(const ComputeState& c, uint32_t line, const char* op) {
    if (c.reduce_active) {
        kernel_error(line, format("reduce_uninit() must be called before %s: the reduce_init at %s is still "
                                  "active (its unpacker/math state and the packer's edge mask stay configured until "
                                  "reduce_uninit)", op, line_text(c.reduce_line).c_str()));
    }
}

FpuTiles fpu_tiles(ComputeState& c, const SrcOperand& x, const SrcOperand& y, uint32_t dst, uint32_t line,
                   const char* op) {
    require_math(c, line, op);
    check_src_format(x.configured, x.cb, x.reg, line, op);
    check_src_format(y.configured, y.cb, y.reg, line, op);
    require_src_path(c, x.cb, x.reg, line, op);
    require_src_path(c, y.cb, y.reg, line, op);
    require_float_cb(x.cb, line, op);
    require_float_cb(y.cb, line, op);
    const uint8_t* x_bytes = front_tile(x.cb, x.tile, line, op);
    const uint8_t* y_bytes = front_tile(y.cb, y.tile, line, op);
    return {x_bytes, y_bytes, dst_tile(c, dst, line, op)};
}

float* fpu_operands(ComputeState& c, const SrcOperand& x, const SrcOperand& y, uint32_t dst, uint32_t line,
                    const char* op, float* a, float* b) {
    const FpuTiles t = fpu_tiles(c, x, y, dst, line, op);
    if (!sim().protocol_only) {
        unpack_tile(t.x, cur().core->cbs[x.cb].fmt, a);
        unpack_tile(t.y, cur().core->cbs[y.cb].fmt, b);
        narrow_to_src(a, cur().core->cbs[x.cb].fmt, c.fp32_acc, c.fp16_src);
        narrow_to_src(b, cur().core->cbs[y.cb].fmt, c.fp32_acc, c.fp16_src);
    }
    return t.out;
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

// A pack with L1 accumulation adds to what the page holds: the page must hold a value this program wrote (a
// previous pack, or a data-movement push); otherwise the result is whatever L1 held plus DST.
void check_l1_acc_target(const CBState& s, uint32_t cb, uint32_t page, uint32_t line) {
    if (s.written[page] == 0) {
        kernel_error(line, format("pack_tile with L1 accumulation (pack_reconfig_l1_acc(1)) onto page %u of CB %u, "
                                  "which nothing has written since the CB was created: it would add DST to "
                                  "uninitialised L1 (pack the first partial without accumulation, or initialise "
                                  "the CB)", page, cb));
    }
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
    // 16-bit DST holds the unpacker's 16-bit format: Float16 for Float16 data, else Float16_b (Float32 data too)
    c.dst_fmt = cur().core->cbs[icb0].fmt == kFloat16 ? kFloat16 : kFloat16_b;
    // The 0.81 library chooses the unpacker's destination format for Float32 CBs per program: FP16 when any CB is
    // Float16 (TT_KERNEL_PATTERNS.md 5b: the library's data-format selection, called directly)
    c.fp16_src = false;
    for (const CBState& s : cur().core->cbs) c.fp16_src = c.fp16_src || (s.configured && s.fmt == kFloat16);
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
    // substitutes -inf itself) and the packer as 0, so the storage is zero (the `capacity` tiles dst_tile lets the
    // kernel address); SFPU reads of it are refused. Every access to DST goes through dst_tile, so the tiles it
    // handed out since the last acquire are the only ones that can be non-zero.
    for (uint32_t i = 0; i < c.capacity; ++i) {
        if (c.dirty >> i & 1u) std::fill_n(c.dst.data() + static_cast<size_t>(i) * kTileElems, kTileElems, 0.0f);
    }
    c.dirty = 0;
    c.defined.fill(false);
    c.integer.fill(false);
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
    if (c.defined[dst] && c.integer[dst] != int_format(s.fmt)) {
        kernel_error(line, format("pack_tile of DST[%u], which holds %s, into CB %u (%s): %s", dst,
                                  c.integer[dst] ? "32-bit integers" : "floats", cb, fmt_name(s.fmt),
                                  c.integer[dst] ? "the packer would take the integers' bits for floats; convert "
                                                   "them with typecast_tile<..., Float32> first"
                                                 : "the packer reads DST as 32-bit integers for an integer CB (the "
                                                   "floats' bits); convert with typecast_tile<Float32, ...> first"));
    }
    if (int_format(s.fmt) && (c.l1_acc || !c.fp32_acc)) {
        kernel_error(line, format("pack_tile into CB %u (%s) with %s: not supported for integer tiles", cb,
                                  fmt_name(s.fmt),
                                  c.l1_acc ? "L1 accumulation (pack_reconfig_l1_acc(1))" : "fp32_dest_acc_en off"));
    }
    const uint32_t page = (s.wr_ptr + slot) % s.num_pages;
    if (c.l1_acc) check_l1_acc_target(s, cb, page, line);
    if (!sim().protocol_only) {
        uint8_t* out = l1_ptr(*cur().core, s.base + page * s.page_size, s.page_size, line);
        float value[kTileElems];
        if (c.reduce_active) {
            // reduce_init's packer edge mask: only the reduce's result positions are written, 0 elsewhere
            std::fill(value, value + kTileElems, 0.0f);
            const uint32_t rows = c.reduce_axis == ReduceAxis::Row ? 32 : 1;
            const uint32_t cols = c.reduce_axis == ReduceAxis::Col ? 32 : 1;
            for (uint32_t r = 0; r < rows; ++r) {
                for (uint32_t col = 0; col < cols; ++col) value[face_index(r, col)] = tile[face_index(r, col)];
            }
        } else {
            std::copy(tile, tile + kTileElems, value);
        }
        if (c.l1_acc) {
            // near-memory accumulate in the CB's format: the packer's output (DST rounded to the format) is added
            // to the L1 datum (fp32 add), the sum rounded to the format again
            float held[kTileElems];
            unpack_tile(out, s.fmt, held);
            round_packed(value, s.fmt, c.fp32_acc);
            for (uint32_t i = 0; i < kTileElems; ++i) value[i] += held[i];
        }
        pack_tile_bytes(value, s.fmt, out, c.fp32_acc);
    }
    s.written[page] = 1;
    if (!out_of_order) s.packed++;
    else s.packed = std::max(s.packed, slot + 1);
    cur().core->counters.packs++;
}

void pack_reconfig_l1_acc(uint32_t enable, uint32_t line) {
    ComputeState& c = cs(line);
    require_started(c, line);
    if (enable > 1) kernel_error(line, format("pack_reconfig_l1_acc(%u): the flag must be 0 or 1", enable));
    c.l1_acc = enable == 1;
}

void op_init(Init kind, uint32_t cb_a, uint32_t cb_b, uint32_t flag, const char* name, uint32_t line) {
    ComputeState& c = cs(line);
    require_started(c, line);
    if (kind == Init::Sfpu) {   // SFPU inits touch neither the unpacker nor the packer's edge mask; each one
        c.sfpu_reduce_pool = -1;  // reprograms the SFPU (sfpu_reduce_init sets its own state after this)
        return;
    }
    require_no_reduce(c, line, (std::string(name) + "()").c_str());
    if (kind == Init::Matmul) {   // matmul_block_init sets its block shape after this
        c.matmul_transpose = flag;
        c.mm_ct = c.mm_rt = c.mm_kt = 0;
    }
    cb_of(cb_a, line);
    cb_of(cb_b, line);
    switch (kind) {
        case Init::Copy:
        case Init::Transpose: check_init_format(c.srca, cb_a, "SrcA", name, line); break;
        case Init::Matmul:   // in0 -> SrcB, in1 -> SrcA
            check_init_format(c.srca, cb_b, "SrcA", name, line);
            check_init_format(c.srcb, cb_a, "SrcB", name, line);
            break;
        case Init::UnaryBcast:   // flag: the BroadcastType; NONE copies through SrcA, the broadcasts through SrcB
            if (flag == static_cast<uint32_t>(BcastDim::None)) check_init_format(c.srca, cb_a, "SrcA", name, line);
            else check_init_format(c.srcb, cb_a, "SrcB", name, line);
            break;
        default:
            check_init_format(c.srca, cb_a, "SrcA", name, line);
            check_init_format(c.srcb, cb_b, "SrcB", name, line);
            break;
    }
}

void copy_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "copy_tile");
    require_no_reduce(c, line, "copy_tile (after copy_init)");
    check_src_format(c.srca, cb, "SrcA", line, "copy_tile");
    const uint8_t* src = front_tile(cb, tile, line, "copy_tile");
    float* out = dst_tile(c, dst, line, "copy_tile");
    const uint8_t fmt = cur().core->cbs[cb].fmt;
    const bool integer = int_format(fmt);
    if (integer && !c.fp32_acc) {
        kernel_error(line, format("copy_tile of CB %u (%s) with fp32_dest_acc_en off: the unpacker and math "
                                  "move integer tiles into DST as 32-bit values, and the LLK asserts FP32 Dest "
                                  "mode for Int8/UInt8/Int32 data (llk_unpack_common.h, llk_math_common.h); set "
                                  "ComputeConfig.fp32_dest_acc_en", cb, fmt_name(fmt)));
    }
    if (!sim().protocol_only) {
        if (integer) {
            unpack_tile(src, fmt, out);   // UInt8: each byte zero-extended (ALU_FORMAT_SPEC_REG0_SrcAUnsigned)
        } else {
            unpack_a2d(c, cb, src, out);
            after_math(c, out);
        }
    }
    wrote(c, dst, integer);
    cur().core->counters.tile_ops++;
}

void transpose_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "transpose_tile");
    require_no_reduce(c, line, "transpose_tile (after transpose_init)");
    check_src_format(c.srca, cb, "SrcA", line, "transpose_tile");
    require_float_cb(cb, line, "transpose_tile");
    const uint8_t* src = front_tile(cb, tile, line, "transpose_tile");
    float* out = dst_tile(c, dst, line, "transpose_tile");
    if (!sim().protocol_only) {
        float in[kTileElems];
        unpack_a2d(c, cb, src, in);
        for (uint32_t r = 0; r < 32; ++r)
            for (uint32_t col = 0; col < 32; ++col) out[face_index(r, col)] = in[face_index(col, r)];
        after_math(c, out);
    }
    wrote(c, dst);
    cur().core->counters.tile_ops++;
}

void matmul_block_dims(uint32_t ct, uint32_t rt, uint32_t kt, uint32_t line) {
    ComputeState& c = cs(line);
    c.mm_ct = ct;
    c.mm_rt = rt;
    c.mm_kt = kt;
}

void matmul_block(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t transpose, uint32_t ct,
                  uint32_t rt, uint32_t kt, uint32_t line) {
    ComputeState& c = cs(line);
    if (ct != c.mm_ct || rt != c.mm_rt || kt != c.mm_kt || transpose != c.matmul_transpose) {
        kernel_error(line, format("matmul_block(transpose=%u, ct_dim=%u, rt_dim=%u, kt_dim=%u) after a matmul init "
                                  "configured for transpose=%u, ct_dim=%u, rt_dim=%u, kt_dim=%u (matmul_block_init "
                                  "sets the unpacker's and math's block loops; call it with the same block shape)",
                                  transpose, ct, rt, kt, c.matmul_transpose, c.mm_ct, c.mm_rt, c.mm_kt));
    }
    for (uint32_t r = 0; r < rt; ++r) {
        for (uint32_t col = 0; col < ct; ++col) matmul_tiles(in0, in1, t0 + r * kt, t1 + col, dst + r * ct + col, line);
    }
}

void binary_tiles(Binary op, uint32_t cb_a, uint32_t cb_b, uint32_t ta, uint32_t tb, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_no_reduce(c, line, "an eltwise binary tile op (after add/sub/mul_init)");
    float a[kTileElems], b[kTileElems];
    float* out = fpu_operands(c, {cb_a, ta, c.srca, "SrcA"}, {cb_b, tb, c.srcb, "SrcB"}, dst, line,
                              "eltwise binary tile op", a, b);
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) {   // ELWMUL runs the fidelity phases; add/sub do not
            out[i] = op == Binary::Mul ? fidelity_mul(a[i], b[i], c.fidelity_phases) : apply(op, a[i], b[i]);
        }
        after_math(c, out);
    }
    wrote(c, dst);
    cur().core->counters.tile_ops++;
}

}  // namespace tt_sim
