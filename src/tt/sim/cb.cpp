// tt-sim: circular buffers: runtime args, cb_reserve_back/push_back/wait_front/pop_front, CB placement in L1.

#include <algorithm>

#include "sim_internal.hpp"

namespace tt_sim {

CBState& cb_of(uint32_t cb, uint32_t line) {
    Task& t = cur();
    if (cb >= kMaxCBs || !t.core->cbs[cb].configured) {
        kernel_error(line, format("circular buffer %u is not configured on this core (CreateCircularBuffer)", cb));
    }
    return t.core->cbs[cb];
}

// =========================================================================================================
// kernel API: args and circular buffers
uint32_t arg(int index, uint32_t line) {
    Task& t = cur();
    auto it = t.kernel->runtime_args.find({t.core->x, t.core->y});
    if (it == t.kernel->runtime_args.end() || index < 0 || static_cast<size_t>(index) >= it->second.size()) {
        kernel_error(line, format("get_arg_val(%d): only %zu runtime args were set for this core", index,
                                  it == t.kernel->runtime_args.end() ? size_t{0} : it->second.size()));
    }
    return it->second[static_cast<size_t>(index)];
}

uint32_t common_arg(int index, uint32_t line) {
    Task& t = cur();
    if (index < 0 || static_cast<size_t>(index) >= t.kernel->common_args.size()) {
        kernel_error(line, format("get_common_arg_val(%d): only %zu common runtime args were set", index,
                                  t.kernel->common_args.size()));
    }
    return t.kernel->common_args[static_cast<size_t>(index)];
}

namespace {

// A reservation/pop of n pages from ring position `ptr` must fit in the CB and must not wrap its end.
void check_ring(const CBState& s, uint32_t cb, uint32_t n, uint32_t ptr, uint32_t line, const char* op) {
    if (n > s.num_pages) {
        kernel_error(line, format("%s(%u, %u): the CB holds only %u pages", op, cb, n, s.num_pages));
    }
    if (ptr + n > s.num_pages) {
        kernel_error(line, format("%s(%u, %u) would wrap around the end of the %u-page ring (pointer at page %u); "
                                  "pushes and pops must add up to the CB size", op, cb, n, s.num_pages, ptr));
    }
}

}  // namespace

void cb_reserve_back(uint32_t cb, uint32_t n, uint32_t line) {
    CBState& s = cb_of(cb, line);
    check_ring(s, cb, n, s.wr_ptr, line, "cb_reserve_back");
    block_until([&] { return s.num_pages - (s.received - s.acked) >= n; }, line,
                format("cb_reserve_back(cb=%u, n=%u) [%u of %u pages in use]", cb, n, s.received - s.acked,
                       s.num_pages));
    if (cur().role != Role::Compute) {   // pages newly reserved are unwritten until a transfer writes them
        if (s.filled.size() != s.num_pages) s.filled.assign(s.num_pages, 1);
        for (uint32_t i = s.reserved; i < n; ++i) s.filled[s.wr_ptr + i] = 0;
    }
    s.reserved = n;
    s.packed = 0;
}

void mark_filled(Core& core, uint32_t lo, uint32_t hi) {
    for (CBState& s : core.cbs) {
        if (!s.configured || s.reserved == 0 || s.filled.size() != s.num_pages) continue;
        const uint32_t base = s.base + s.wr_ptr * s.page_size;
        if (hi <= base || lo >= base + s.reserved * s.page_size) continue;
        const uint32_t first = (lo > base ? lo - base : 0) / s.page_size;
        const uint32_t last = (std::min(hi, base + s.reserved * s.page_size) - base - 1) / s.page_size;
        for (uint32_t i = first; i <= last; ++i) s.filled[s.wr_ptr + i] = 1;
    }
}

void cb_push_back(uint32_t cb, uint32_t n, uint32_t line) {
    CBState& s = cb_of(cb, line);
    Task& t = cur();
    if (n > s.reserved) {
        kernel_error(line, format("cb_push_back(%u, %u) pushes more pages than were reserved (%u)", cb, n, s.reserved));
    }
    noc_maybe_land(t);
    const uint32_t lo = s.base + s.wr_ptr * s.page_size;
    if (const PendingTransfer* p = noc_pending_overlap(*t.core, false, lo, lo + n * s.page_size)) {
        kernel_error(line, format("cb_push_back(%u, %u) publishes pages whose NoC reads were not completed: call "
                                  "noc_async_read_barrier() first (the read issued at %s has not landed)", cb, n,
                                  line_text(p->line).c_str()));
    }
    if (const PendingTransfer* p = noc_pending_inline_overlap(*t.core, lo, lo + n * s.page_size)) {
        kernel_error(line, format("cb_push_back(%u, %u) publishes pages whose NoC writes were not completed: call "
                                  "noc_async_write_barrier() first (the noc_inline_dw_write issued at %s has not "
                                  "landed)", cb, n, line_text(p->line).c_str()));
    }
    if (t.role != Role::Compute) {
        for (uint32_t i = 0; i < n; ++i) s.written[(s.wr_ptr + i) % s.num_pages] = 1;
    }
    if (t.role != Role::Compute && s.filled.size() == s.num_pages) {
        for (uint32_t i = 0; i < n; ++i) {
            if (s.filled[s.wr_ptr + i] != 0) continue;
            kernel_error(line, format("cb_push_back(%u, %u) publishes page %u, which no NoC transfer has written since "
                                      "cb_reserve_back: a multicast receiver must wait for the sender's VALID "
                                      "(noc_semaphore_wait on its receiver semaphore) before it pushes", cb, n,
                                      s.wr_ptr + i));
        }
    }
    if (t.role == Role::Compute && s.packed > 0 && s.packed < n) {
        kernel_error(line, format("cb_push_back(%u, %u) but only %u tiles were packed", cb, n, s.packed));
    }
    s.received += n;
    s.wr_ptr = (s.wr_ptr + n) % s.num_pages;
    s.reserved -= n;
    s.packed = 0;
    s.high_water = std::max(s.high_water, s.received - s.acked);
    sim().progress++;
}

void cb_wait_front(uint32_t cb, uint32_t n, uint32_t line) {
    CBState& s = cb_of(cb, line);
    if (n > s.num_pages) {
        kernel_error(line, format("cb_wait_front(%u, %u): the CB holds only %u pages", cb, n, s.num_pages));
    }
    block_until([&] { return s.received - s.acked >= n; }, line,
                format("cb_wait_front(cb=%u, n=%u) [%u pages pushed, %u popped]", cb, n, s.received, s.acked));
    s.waited = std::max(s.waited, n);
}

void cb_pop_front(uint32_t cb, uint32_t n, uint32_t line) {
    CBState& s = cb_of(cb, line);
    if (n > s.waited) {
        kernel_error(line, format("cb_pop_front(%u, %u) pops more pages than were waited for (%u)", cb, n, s.waited));
    }
    check_ring(s, cb, n, s.rd_ptr, line, "cb_pop_front");
    const uint32_t lo = s.base + s.rd_ptr * s.page_size;
    if (const PendingTransfer* p = noc_pending_overlap(*cur().core, true, lo, lo + n * s.page_size)) {
        kernel_error(line, format("cb_pop_front(%u, %u) frees pages that a NoC write (issued at %s) is still "
                                  "reading: call noc_async_write_barrier() first", cb, n, line_text(p->line).c_str()));
    }
    s.acked += n;
    s.rd_ptr = (s.rd_ptr + n) % s.num_pages;
    s.waited -= n;
    sim().progress++;
}

uint32_t cb_write_ptr(uint32_t cb, uint32_t line) {
    CBState& s = cb_of(cb, line);
    if (s.reserved == 0) kernel_error(line, format("get_write_ptr(%u) without a pending cb_reserve_back", cb));
    return s.base + s.wr_ptr * s.page_size;
}

uint32_t cb_read_ptr(uint32_t cb, uint32_t line) {
    CBState& s = cb_of(cb, line);
    if (s.waited == 0) kernel_error(line, format("get_read_ptr(%u) without a preceding cb_wait_front", cb));
    return s.base + s.rd_ptr * s.page_size;
}

uint32_t cb_tile_size(uint32_t cb, uint32_t line) { return tile_bytes(cb_of(cb, line).fmt); }

uint32_t cb_tile_value(uint32_t cb, uint32_t tile_index, uint32_t element_offset, uint32_t line) {
    // api/compute/cb_api.h read_tile_value: the UNPACK thread loads a 32-bit word of a tile at the CB's read pointer
    // (and hands it to MATH and PACK by mailbox); only meaningful for a CB of 32-bit words (Int32, or Float32 read as
    // its bits) or of 16-bit floats (a word is two elements, the kernel takes one half), on waited pages. A word of
    // block-float or 8-bit data is no value.
    CBState& s = cb_of(cb, line);
    if (s.fmt != kInt32 && s.fmt != kFloat32 && s.fmt != kFloat16 && s.fmt != kFloat16_b) {
        kernel_error(line, format("read_tile_value(%u): CB %u holds %s data, not the 32-bit words (or pairs of "
                                  "16-bit floats) the value is read as", cb, cb, fmt_name(s.fmt)));
    }
    if (tile_index >= s.waited) {
        kernel_error(line, format("read_tile_value(%u, %u, ...): only %u page(s) waited for with cb_wait_front", cb,
                                  tile_index, s.waited));
    }
    if (element_offset * 4 >= s.page_size) {
        kernel_error(line, format("read_tile_value(%u, %u, %u): offset past the %u-byte page", cb, tile_index,
                                  element_offset, s.page_size));
    }
    const uint32_t page = (s.rd_ptr + tile_index) % s.num_pages;
    return l1_read_u32(s.base + page * s.page_size + element_offset * 4, line);
}

uint32_t cb_pages_reservable(uint32_t cb, uint32_t n) {
    CBState& s = cb_of(cb, 0);
    return s.num_pages - (s.received - s.acked) >= n ? 1u : 0u;
}

uint32_t cb_pages_available(uint32_t cb, uint32_t n) {
    CBState& s = cb_of(cb, 0);
    return s.received - s.acked >= n ? 1u : 0u;
}

// Place one CircularBufferConfig's CBs in `core`'s L1 at `next` (advanced past them).
void configure_cb(const Device& dev, Core& core, const host::CBSpec& spec, uint32_t& next) {
    if (next + spec.total_size > dev.arch.l1_bytes) {
        die(format("circular buffers on core (x=%u, y=%u) need %u bytes of L1 above the %u-byte firmware area, "
                   "more than the %u bytes of %s", core.x, core.y, next - dev.arch.l1_unreserved_base + spec.total_size,
                   dev.arch.l1_unreserved_base,
                   dev.arch.l1_bytes, dev.arch.name));
    }
    for (const auto& [index, fmt] : spec.formats) {
        if (index >= dev.arch.num_cbs) {
            die(format("CircularBufferConfig: CB index %u exceeds the %u CBs of %s", index, dev.arch.num_cbs,
                       dev.arch.name));
        }
        if (tile_bytes(fmt) == 0) die(format("CB %u: data format %u is not emulated", index, fmt));
        CBState& s = core.cbs[index];
        if (s.configured) die(format("CB %u is configured twice on core (x=%u, y=%u)", index, core.x, core.y));
        uint32_t page = 0;
        for (const auto& [pi, ps] : spec.page_sizes) {
            if (pi == index) page = ps;
        }
        if (page == 0 || spec.total_size % page != 0) {
            die(format("CB %u: total size %u is not a multiple of its page size %u (set_page_size)", index,
                       spec.total_size, page));
        }
        s.configured = true;
        s.fmt = fmt;
        s.base = next;
        s.page_size = page;
        s.num_pages = spec.total_size / page;
        s.written.assign(s.num_pages, 0);
    }
    next += (spec.total_size + dev.arch.l1_alignment - 1) / dev.arch.l1_alignment * dev.arch.l1_alignment;
}

}  // namespace tt_sim
