// tt-sim: the asynchronous NoC. A read or write is issued, then lands at a deterministic but adversarial point
// no later than its barrier: in strict mode (default) exactly at the barrier; with TT_SIM_NOC_SEED=N at points a
// xorshift generator seeded with N picks (each later NoC/CB call of the issuing kernel may land any transfer).
// A read poisons its L1 destination (0xff bytes: NaN in every float format) at issue, so a kernel that uses the
// data before noc_async_read_barrier() sees poison; a write reaches DRAM only when it lands. cb_push_back of
// pages with reads in flight and cb_pop_front of pages that writes in flight still read are errors.

#include <cstdlib>
#include <cstring>

#include "sim_internal.hpp"

namespace tt_sim {

namespace {

uint64_t& seed_state() {
    static uint64_t state = [] {
        const std::string v = env_or("TT_SIM_NOC_SEED", "0");
        return static_cast<uint64_t>(std::strtoull(v.c_str(), nullptr, 10));
    }();
    return state;
}

uint64_t next_random() {
    uint64_t& x = seed_state();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

void land(Core& core, PendingTransfer& p) {
    if (p.mcast) {   // checked and counted also in protocol-only runs
        land_multicast(core, p);
        return;
    }
    if (p.data.empty()) return;
    if (p.inline_l1) {   // noc_inline_dw_write: the enabled bytes of one word
        for (uint32_t i = 0; i < p.data.size(); ++i) {
            if ((p.byte_enable >> i) & 1u) core.l1[p.l1_lo + i] = p.data[i];
        }
    } else if (p.write) {
        Buffer& b = sim().buffers[p.buffer];
        std::memcpy(page_ptr(b, p.page, p.offset, static_cast<uint32_t>(p.data.size()), p.line, "noc_async_write"),
                    p.data.data(), p.data.size());
    } else {
        std::memcpy(core.l1.data() + p.l1_lo, p.data.data(), p.data.size());
    }
}

}  // namespace

uint64_t bank_address(const Buffer& b, uint32_t page, uint32_t offset) {
    const Device& dev = device_of(b);
    const uint64_t nbanks = b.dram ? dev.dram_banks.size() : dev.l1_banks.size();
    return b.base + (page / nbanks) * b.aligned_page + offset;
}

void noc_issue(Task& t, PendingTransfer&& transfer, uint32_t line) {
    noc_maybe_land(t);
    transfer.owner = &t;
    transfer.line = line;
    if (!transfer.write && !sim().protocol_only) {
        std::memset(t.core->l1.data() + transfer.l1_lo, 0xff, transfer.l1_hi - transfer.l1_lo);
    }
    t.core->pending.push_back(std::move(transfer));
}

void noc_land(Task& t, bool writes) {
    auto& pending = t.core->pending;
    size_t kept = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
        if (pending[i].owner == &t && pending[i].write == writes) {
            land(*t.core, pending[i]);
        } else {
            if (kept != i) pending[kept] = std::move(pending[i]);
            ++kept;
        }
    }
    pending.resize(kept);
}

void noc_maybe_land(Task& t) {
    if (seed_state() == 0) return;
    auto& pending = t.core->pending;
    size_t kept = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
        if (pending[i].owner == &t && next_random() % 4 == 0) {
            land(*t.core, pending[i]);
        } else {
            if (kept != i) pending[kept] = std::move(pending[i]);
            ++kept;
        }
    }
    pending.resize(kept);
}

const PendingTransfer* noc_pending_overlap(const Core& core, bool write, uint32_t lo, uint32_t hi) {
    for (const PendingTransfer& p : core.pending) {
        if (!p.inline_l1 && p.write == write && p.l1_lo < hi && lo < p.l1_hi) return &p;
    }
    return nullptr;
}

const PendingTransfer* noc_pending_inline_overlap(const Core& core, uint32_t lo, uint32_t hi) {
    for (const PendingTransfer& p : core.pending) {
        if (p.inline_l1 && p.l1_lo < hi && lo < p.l1_hi) return &p;
    }
    return nullptr;
}

bool noc_has_pending(const Task& t, bool write) {
    for (const PendingTransfer& p : t.core->pending) {
        if (p.owner == &t && p.write == write) return true;
    }
    return false;
}

}  // namespace tt_sim
