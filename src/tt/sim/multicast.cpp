// tt-sim: semaphores and multicast writes between cores (the handshake of tt-metal's 2-D multicast matmul).
//
// * Semaphores are L1 words: semaphore `id` of a core lives at kSemaphoreBase + id * L1 alignment (the SDK's
//   get_semaphore), set to the CreateSemaphore value when the program starts. noc_semaphore_set/wait act on this
//   core's word (through the pointer the kernel built from get_semaphore), noc_semaphore_inc adds to another
//   core's word at once (atomics complete by noc_async_atomic_barrier; tt-sim applies them at issue).
// * NoC addresses of another core's L1 (get_noc_addr(x, y, addr)) and multicast rectangles
//   (get_noc_multicast_addr) are encoded in the uint64 the kernel passes around (see encode/decode below).
// * noc_async_write_multicast snapshots the source at issue and is in flight until the sender's write barrier
//   (noc_async_write_barrier / noc_async_writes_flushed) or until a later multicast of the same kernel
//   (noc_semaphore_set_multicast: one NoC, one virtual channel, so the flag never overtakes the data) lands it.
//   It lands in every core of the rectangle but the sender (no loopback); `num_dests` must count them.
// * Sanitizer: a multicast that lands in L1 a receiver has not reserved (the sender did not wait for every
//   receiver's "ready"), a multicast of L1 whose NoC read has not landed, a rectangle whose corners are in the
//   wrong order for the NoC (a wrap-around multicast on the torus), a wrong num_dests, semaphore ids beyond those
//   the program created. A receiver that pushes before the sender's VALID is reported by cb_push_back (cb.cpp).

#include <cstring>

#include "sim_internal.hpp"

namespace tt_sim {

namespace {

constexpr uint32_t kMaxSemaphores = 16;   // tt-metal's NUM_SEMAPHORES per core
constexpr uint64_t kCoreL1Tag = 1ull << 62;
constexpr uint64_t kMcastFlag = 1ull << 61;
constexpr uint64_t kNoc1Flag = 1ull << 60;

const Device& device() { return running_device(); }

// Semaphores sit just below the first L1 byte CBs may use (inside the firmware's kernel-config area).
uint32_t semaphore_base() { return device().arch.l1_unreserved_base - kMaxSemaphores * device().arch.l1_alignment; }

uint32_t count_semaphores(const Program& program, uint32_t x, uint32_t y) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < program.semaphores.size(); ++i) {
        if (in_ranges(program.semaphores[i].first, x, y)) n = i + 1;
    }
    return n;
}

// The semaphore word at L1 `addr` of `core`; an error when `addr` is not one of its semaphores.
uint32_t semaphore_index(const Core& core, uint32_t addr, uint32_t line, const char* op) {
    const uint32_t align = device().arch.l1_alignment;
    const uint32_t base = semaphore_base();
    if (addr < base || (addr - base) % align != 0 || (addr - base) / align >= core.semaphores.size()) {
        kernel_error(line, format("%s: L1 0x%x of core (x=%u, y=%u) is not a semaphore the program created there "
                                  "(CreateSemaphore; get_semaphore(id) gives 0x%x + id * %u)", op, addr, core.x,
                                  core.y, base, align));
    }
    return (addr - base) / align;
}

uint32_t& semaphore_word(Core& core, uint32_t addr, uint32_t line, const char* op) {
    semaphore_index(core, addr, line, op);
    return *reinterpret_cast<uint32_t*>(l1_ptr(core, addr, 4, line));
}

struct Rect {
    uint32_t x0, y0, x1, y1;   // inclusive, x0 <= x1, y0 <= y1
};

// The rectangle of a multicast address; the corners must be ordered as the kernel's NoC walks them (NOC0 from
// the low corner, NOC1 from the high one), else the torus wraps around.
Rect decode_rect(uint64_t addr, const char* op, uint32_t line) {
    if ((addr & kCoreL1Tag) == 0 || (addr & kMcastFlag) == 0) {
        kernel_error(line, format("%s: 0x%llx is not a multicast address (get_noc_multicast_addr)", op,
                                  static_cast<unsigned long long>(addr)));
    }
    const uint32_t xs = (addr >> 32) & 0x3f, ys = (addr >> 38) & 0x3f, xe = (addr >> 44) & 0x3f, ye = (addr >> 50) & 0x3f;
    const bool noc1 = (addr & kNoc1Flag) != 0;
    const bool ordered = noc1 ? (xs >= xe && ys >= ye) : (xs <= xe && ys <= ye);
    if (!ordered) {
        kernel_error(line, format("%s: multicast rectangle start (%u, %u) end (%u, %u) on NOC%d: the corners are "
                                  "reversed for this NoC (NOC0 starts at the low corner, NOC1 at the high one), which "
                                  "the torus takes as a wrap-around multicast", op, xs, ys, xe, ye, noc1 ? 1 : 0));
    }
    return noc1 ? Rect{xe, ye, xs, ys} : Rect{xs, ys, xe, ye};
}

// The receivers of a multicast from `sender` (every core of the rectangle but the sender), checked against
// `num_dests`.
std::vector<Core*> receivers(const Core& sender, const Rect& r, uint32_t num_dests, const char* op, uint32_t line) {
    std::vector<Core*> out;
    for (uint32_t y = r.y0; y <= r.y1; ++y) {
        for (uint32_t x = r.x0; x <= r.x1; ++x) {
            if (x == sender.x && y == sender.y) continue;
            Core* c = find_core(x, y);
            if (c == nullptr) {
                kernel_error(line, format("%s to core (x=%u, y=%u), which runs no kernel of this program", op, x, y));
            }
            out.push_back(c);
        }
    }
    if (out.size() != num_dests) {
        kernel_error(line, format("%s with num_dests = %u, but the rectangle (%u, %u)-(%u, %u) holds %zu cores besides "
                                  "the sender (no loopback)", op, num_dests, r.x0, r.y0, r.x1, r.y1, out.size()));
    }
    return out;
}

}  // namespace

Core* find_core(uint32_t x, uint32_t y) {
    for (const auto& c : running_device().run_cores) {
        if (c->x == x && c->y == y) return c.get();
    }
    return nullptr;
}

void init_semaphores(const Device& dev, const Program& program, Core& core) {
    const uint32_t n = count_semaphores(program, core.x, core.y);
    if (n > kMaxSemaphores) die(format("%u semaphores on core (x=%u, y=%u): at most %u", n, core.x, core.y, kMaxSemaphores));
    core.semaphores.assign(n, 0);
    const uint32_t base = dev.arch.l1_unreserved_base - kMaxSemaphores * dev.arch.l1_alignment;
    for (uint32_t i = 0; i < n; ++i) {
        if (!in_ranges(program.semaphores[i].first, core.x, core.y)) continue;
        const uint32_t value = program.semaphores[i].second;
        std::memcpy(core.l1.data() + base + i * dev.arch.l1_alignment, &value, 4);
    }
}

void land_multicast(Core& sender, const PendingTransfer& p) {
    const Rect r{p.x0, p.y0, p.x1, p.y1};
    const uint32_t size = p.l1_hi - p.l1_lo;
    for (uint32_t y = r.y0; y <= r.y1; ++y) {
        for (uint32_t x = r.x0; x <= r.x1; ++x) {
            if (x == sender.x && y == sender.y) continue;
            Core& dst = *find_core(x, y);
            if (reserved_cb_covering(dst, p.dst_addr, size) == nullptr) {
                kernel_error(p.line, format("noc_async_write_multicast from core (x=%u, y=%u) lands in L1 [0x%x, 0x%x) "
                                            "of core (x=%u, y=%u), which that core has not reserved with "
                                            "cb_reserve_back: the sender overwrites it before the receiver is ready "
                                            "(wait on the sender semaphore for every receiver first)", sender.x,
                                            sender.y, p.dst_addr, p.dst_addr + size, x, y));
            }
            if (!p.data.empty()) std::memcpy(l1_ptr(dst, p.dst_addr, size, p.line), p.data.data(), size);
            mark_filled(dst, p.dst_addr, p.dst_addr + size);
        }
    }
}

// =========================================================================================================
// kernel API
uint32_t semaphore_addr(uint32_t id, uint32_t line) {
    const Core& core = *cur().core;
    if (id >= core.semaphores.size()) {
        kernel_error(line, format("get_semaphore(%u): the program created %zu semaphores on core (x=%u, y=%u)", id,
                                  core.semaphores.size(), core.x, core.y));
    }
    return semaphore_base() + id * device().arch.l1_alignment;
}

void semaphore_set(uint32_t addr, uint32_t value, uint32_t line) {
    semaphore_word(*cur().core, addr, line, "noc_semaphore_set") = value;
    sim().progress++;
}

void semaphore_wait(uint32_t addr, uint32_t value, bool at_least, uint32_t line) {
    uint32_t& word = semaphore_word(*cur().core, addr, line, "noc_semaphore_wait");
    block_until([&] { return at_least ? word >= value : word == value; }, line,
                format("noc_semaphore_wait%s(0x%x, %u) [value %u]", at_least ? "_min" : "", addr, value, word));
}

uint64_t noc_core_addr(uint32_t x, uint32_t y, uint32_t addr) {
    return kCoreL1Tag | (static_cast<uint64_t>(y) << 48) | (static_cast<uint64_t>(x) << 40) | addr;
}

uint64_t noc_mcast_addr(uint32_t xs, uint32_t ys, uint32_t xe, uint32_t ye, uint32_t addr, uint8_t noc) {
    return kCoreL1Tag | kMcastFlag | (noc == 1 ? kNoc1Flag : 0) | (static_cast<uint64_t>(xs & 0x3f) << 32) |
           (static_cast<uint64_t>(ys & 0x3f) << 38) | (static_cast<uint64_t>(xe & 0x3f) << 44) |
           (static_cast<uint64_t>(ye & 0x3f) << 50) | addr;
}

void semaphore_inc(uint64_t noc_addr, uint32_t incr, uint32_t line) {
    if ((noc_addr & kCoreL1Tag) == 0 || (noc_addr & kMcastFlag) != 0) {
        kernel_error(line, format("noc_semaphore_inc to 0x%llx: not a core's L1 address (get_noc_addr(x, y, addr))",
                                  static_cast<unsigned long long>(noc_addr)));
    }
    const uint32_t y = static_cast<uint32_t>((noc_addr >> 48) & 0x3fff), x = static_cast<uint32_t>((noc_addr >> 40) & 0xff);
    Core* target = find_core(x, y);
    if (target == nullptr) {
        kernel_error(line, format("noc_semaphore_inc to core (x=%u, y=%u), which runs no kernel of this program", x, y));
    }
    semaphore_word(*target, static_cast<uint32_t>(noc_addr & 0xffffffffu), line, "noc_semaphore_inc") += incr;
    cur().core->counters.semaphore_ops++;
    sim().progress++;
}

void semaphore_set_multicast(uint32_t src_l1, uint64_t dst_mcast, uint32_t num_dests, uint32_t line) {
    Task& t = cur();
    const Rect r = decode_rect(dst_mcast, "noc_semaphore_set_multicast", line);
    std::vector<Core*> dests = receivers(*t.core, r, num_dests, "noc_semaphore_set_multicast", line);
    // Same NoC and virtual channel as the data multicasts before it: those land first.
    auto& pending = t.core->pending;
    size_t kept = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
        if (pending[i].owner == &t && pending[i].mcast) {
            land_multicast(*t.core, pending[i]);
        } else {
            if (kept != i) pending[kept] = std::move(pending[i]);
            ++kept;
        }
    }
    pending.resize(kept);
    uint32_t value;
    std::memcpy(&value, l1_ptr(*t.core, src_l1, 4, line), 4);
    const uint32_t dst_addr = static_cast<uint32_t>(dst_mcast & 0xffffffffu);
    for (Core* c : dests) semaphore_word(*c, dst_addr, line, "noc_semaphore_set_multicast") = value;
    t.core->counters.semaphore_ops++;
    sim().progress++;
}

void write_multicast(uint32_t src_l1, uint64_t dst_mcast, uint32_t size, uint32_t num_dests, uint32_t line) {
    Task& t = cur();
    const Rect r = decode_rect(dst_mcast, "noc_async_write_multicast", line);
    receivers(*t.core, r, num_dests, "noc_async_write_multicast", line);
    if (size == 0) kernel_error(line, "noc_async_write_multicast of 0 bytes (Watcher: zero-length NoC transaction)");
    const uint32_t dst_addr = static_cast<uint32_t>(dst_mcast & 0xffffffffu);
    const uint32_t align = device().arch.l1_alignment;
    if (src_l1 % align != dst_addr % align) {
        kernel_error(line, format("noc_async_write_multicast: source 0x%x and destination 0x%x are not congruent modulo "
                                  "%u B", src_l1, dst_addr, align));
    }
    if (reserved_cb_covering(*t.core, src_l1, size) == nullptr) {
        kernel_error(line, format("noc_async_write_multicast reads L1 [0x%x, 0x%x), which is not inside CB pages this "
                                  "core has reserved", src_l1, src_l1 + size));
    }
    if (const PendingTransfer* p = noc_pending_overlap(*t.core, false, src_l1, src_l1 + size)) {
        kernel_error(line, format("noc_async_write_multicast sends L1 [0x%x, 0x%x) while the NoC read issued at %s "
                                  "into it has not landed: call noc_async_read_barrier() first", src_l1,
                                  src_l1 + size, line_text(p->line).c_str()));
    }
    PendingTransfer p;
    p.write = true;
    p.mcast = true;
    p.l1_lo = src_l1;
    p.l1_hi = src_l1 + size;
    p.x0 = r.x0;
    p.y0 = r.y0;
    p.x1 = r.x1;
    p.y1 = r.y1;
    p.dst_addr = dst_addr;
    if (!sim().protocol_only) {
        const uint8_t* src = l1_ptr(*t.core, src_l1, size, line);
        p.data.assign(src, src + size);
    }
    noc_issue(t, std::move(p), line);
    auto& c = t.core->counters;
    c.noc_write_bytes += size;
    c.mcast_bytes += size;
    c.mcast_dest_bytes += static_cast<uint64_t>(size) * num_dests;
}

}  // namespace tt_sim
