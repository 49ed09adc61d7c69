// tt-sim: NoC and DRAM: interleaved buffers in DRAM banks, NoC reads/writes between DRAM and L1, barriers.

#include <cstring>
#include <string>
#include <vector>

#include "sim_internal.hpp"

namespace tt_sim {

uint8_t* l1_ptr(Core& core, uint32_t addr, uint32_t size, uint32_t line) {
    if (static_cast<uint64_t>(addr) + size > core.l1.size()) {
        kernel_error(line, format("L1 access [0x%x, 0x%x) is outside the core's %zu-byte L1", addr, addr + size,
                                  core.l1.size()));
    }
    return core.l1.data() + addr;
}

// =========================================================================================================
// kernel API: NoC
namespace {

Buffer& buffer_at(uint32_t base, bool dram, uint32_t line) {
    const int device = cur().core->device;   // each chip of a mesh has its own buffers at the same addresses
    for (Buffer& b : sim().buffers) {
        if (b.base == base && b.dram == dram && (device < 0 || b.device == device)) return b;
    }
    kernel_error(line, format("no %s buffer starts at address 0x%x", dram ? "DRAM" : "L1", base));
}

}  // namespace

uint8_t* page_ptr(Buffer& b, uint32_t page, uint32_t offset, uint32_t size, uint32_t line, const char* op) {
    if (page >= b.num_pages) {
        kernel_error(line, format("%s: page %u is outside the buffer at 0x%x (%u pages)", op, page, b.base, b.num_pages));
    }
    if (offset + size > b.page_size) {
        kernel_error(line, format("%s: %u bytes at offset %u overrun the %u-byte page", op, size, offset, b.page_size));
    }
    Device& dev = device_of(b);
    auto& banks = b.dram ? dev.dram_banks : dev.l1_banks;
    const uint32_t nbanks = static_cast<uint32_t>(banks.size());
    auto& bank = banks[page % nbanks];
    const uint64_t at = b.base + static_cast<uint64_t>(page / nbanks) * b.aligned_page + offset;
    if (at + size > bank.size()) bank.resize(at + size);   // zero (ZeroedAllocator: the pages the run touches)
    return bank.data() + at;
}

// The destination of a NoC read must lie in pages this task has reserved in some CB of its core.
CBState* reserved_cb_covering(Core& core, uint32_t addr, uint32_t size) {
    for (CBState& s : core.cbs) {
        if (!s.configured || s.reserved == 0) continue;
        const uint32_t lo = s.base + s.wr_ptr * s.page_size;
        const uint32_t hi = lo + s.reserved * s.page_size;
        if (addr >= lo && addr + size <= hi) return &s;
    }
    return nullptr;
}

namespace {

CBState* front_cb_covering(Core& core, uint32_t addr, uint32_t size) {
    for (CBState& s : core.cbs) {
        if (!s.configured || s.waited == 0) continue;
        const uint32_t lo = s.base + s.rd_ptr * s.page_size;
        const uint32_t hi = lo + s.waited * s.page_size;
        if (addr >= lo && addr + size <= hi) return &s;
    }
    return nullptr;
}

uint32_t cb_index(const Core& core, const CBState* s) { return static_cast<uint32_t>(s - core.cbs.data()); }

// The bytes a NoC transfer moves between a buffer page and a CB keep their format: a CB filled from pages of
// another format would be unpacked as its own (two bf16 values read as one fp32 word), and a tensor drained from a
// CB of another format would hold bytes the host decodes wrongly. The format change belongs to unpack/pack.
void check_page_format(Buffer& b, uint32_t page, const Core& core, const CBState* s, bool write, uint32_t line,
                       const char* op) {
    if (s == nullptr) return;
    if (b.fmt < 0 && write) b.fmt = s->fmt;
    if (b.fmt < 0 || static_cast<uint8_t>(b.fmt) == s->fmt) return;
    const char* what = b.dram ? "DRAM" : "L1";
    if (write) {
        kernel_error(line, format("%s writes pages of CB %u (%s) into page %u of the %s buffer at 0x%x, which holds "
                                  "%s data (%u-byte pages): the tensor would hold bytes of another format (pack into "
                                  "a CB of the tensor's format first)", op, cb_index(core, s), fmt_name(s->fmt), page,
                                  what, b.base, fmt_name(static_cast<uint8_t>(b.fmt)), b.page_size));
    }
    kernel_error(line, format("%s reads page %u of the %s buffer at 0x%x, which holds %s data (%u-byte pages), into "
                              "CB %u configured as %s (%u-byte pages): the CB would hold bytes of another format "
                              "(read into a CB of the tensor's format and convert with copy_tile + pack)", op, page,
                              what, b.base, fmt_name(static_cast<uint8_t>(b.fmt)), b.page_size, cb_index(core, s),
                              fmt_name(s->fmt), s->page_size));
}

}  // namespace

namespace {

// Watcher's NoC sanitizer: a transfer needs a non-zero size and source and destination congruent modulo the
// alignment (DRAM reads: the arch's DRAM alignment; L1 transfers and DRAM writes: the L1 alignment).
void check_transfer(const char* op, uint64_t src, const char* src_kind, uint64_t dst, const char* dst_kind,
                    uint32_t size, uint32_t align, uint32_t line) {
    if (size == 0) kernel_error(line, format("%s of 0 bytes (Watcher: zero-length NoC transaction)", op));
    if (src % align != dst % align) {
        kernel_error(line, format("%s: source 0x%llx (%s) and destination 0x%llx (%s) are not congruent modulo %u B; "
                                  "the NoC's behaviour is undefined and Watcher stops the core (misaligned NoC "
                                  "transfer)", op, static_cast<unsigned long long>(src), src_kind,
                                  static_cast<unsigned long long>(dst), dst_kind, align));
    }
}

const ArchInfo& arch() { return running_device().arch; }

// A read of `size` bytes into L1 [l1_addr, +size): inside reserved CB pages, then issued asynchronously. A
// protocol-only run skips the data, except Int32 pages: the elements the RISC-V cores address and branch with
// (block tables, sequence offsets, trip counts), so it takes the paths a full run takes.
void issue_read(Task& t, const uint8_t* src, uint32_t l1_addr, uint32_t size, uint32_t line, const char* op) {
    const CBState* cb = reserved_cb_covering(*t.core, l1_addr, size);
    if (cb == nullptr) {
        kernel_error(line, format("%s writes L1 [0x%x, 0x%x), which is not inside pages reserved with "
                                  "cb_reserve_back", op, l1_addr, l1_addr + size));
    }
    l1_ptr(*t.core, l1_addr, size, line);
    mark_filled(*t.core, l1_addr, l1_addr + size);
    PendingTransfer p;
    p.l1_lo = l1_addr;
    p.l1_hi = l1_addr + size;
    if (!sim().protocol_only || cb->fmt == kInt32) p.data.assign(src, src + size);
    noc_issue(t, std::move(p), line);
}

void read_from_buffer(Buffer& b, uint32_t page, uint32_t offset, uint32_t size, uint32_t l1_addr, uint32_t line,
                      const char* op) {
    Task& t = cur();
    const uint8_t* src = page_ptr(b, page, offset, size, line, op);
    check_page_format(b, page, *t.core, reserved_cb_covering(*t.core, l1_addr, size), false, line, op);
    check_transfer(op, bank_address(b, page, offset), b.dram ? "DRAM" : "L1 buffer", l1_addr, "L1", size,
                   b.dram ? arch().dram_alignment : arch().l1_alignment, line);
    issue_read(t, src, l1_addr, size, line, op);
    auto& c = t.core->counters;
    (b.dram ? c.dram_read_bytes : c.noc_read_bytes) += size;
    if (b.dram) c.noc_read_bytes += size;
    c.pages_read++;
}

void write_to_buffer(Buffer& b, uint32_t page, uint32_t offset, uint32_t size, uint32_t l1_addr, uint32_t line,
                     const char* op) {
    Task& t = cur();
    const CBState* front = front_cb_covering(*t.core, l1_addr, size);
    if (front == nullptr) {
        kernel_error(line, format("%s(%u) reads L1 [0x%x, 0x%x), which is not inside pages obtained with "
                                  "cb_wait_front", op, page, l1_addr, l1_addr + size));
    }
    page_ptr(b, page, offset, size, line, op);   // bounds
    check_page_format(b, page, *t.core, front, true, line, op);
    check_transfer(op, l1_addr, "L1", bank_address(b, page, offset), b.dram ? "DRAM" : "L1 buffer", size,
                   arch().l1_alignment, line);
    PendingTransfer p;
    p.write = true;
    p.l1_lo = l1_addr;
    p.l1_hi = l1_addr + size;
    p.buffer = static_cast<size_t>(&b - sim().buffers.data());
    p.page = page;
    p.offset = offset;
    if (!sim().protocol_only) {
        const uint8_t* src = l1_ptr(*t.core, l1_addr, size, line);
        p.data.assign(src, src + size);
    }
    noc_issue(t, std::move(p), line);
    auto& c = t.core->counters;
    if (b.dram) c.dram_write_bytes += size;
    c.noc_write_bytes += size;
    c.pages_written++;
}

}  // namespace

void noc_read_page(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t l1_addr, uint32_t offset,
                   uint32_t line) {
    Buffer& b = buffer_at(base, is_dram, line);
    read_from_buffer(b, page, offset, page_size - offset, l1_addr, line, "noc_async_read_page");
}

uint32_t l1_read_u32(uint32_t l1_addr, uint32_t line) {
    Task& t = cur();
    if (l1_addr % 4 != 0) kernel_error(line, format("L1 load of a 32-bit word at unaligned address 0x%x", l1_addr));
    if (reserved_cb_covering(*t.core, l1_addr, 4) == nullptr && front_cb_covering(*t.core, l1_addr, 4) == nullptr) {
        kernel_error(line, format("L1 load at 0x%x, which is not inside CB pages this kernel reserved or waited for",
                                  l1_addr));
    }
    if (noc_has_pending(t, false)) {
        kernel_error(line, format("L1 load at 0x%x while this kernel's NoC reads are in flight: call "
                                  "noc_async_read_barrier() first", l1_addr));
    }
    uint32_t value = 0;   // protocol-only runs hold real data in Int32 pages (issue_read), zeros elsewhere
    std::memcpy(&value, l1_ptr(*t.core, l1_addr, 4, line), 4);
    return value;
}

void noc_write_page(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t l1_addr, uint32_t size,
                    uint32_t offset, uint32_t line) {
    Buffer& b = buffer_at(base, is_dram, line);
    write_to_buffer(b, page, offset, size == 0 ? page_size : size, l1_addr, line, "noc_async_write_page");
}

uint64_t noc_page_addr(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t offset) {
    (void)page_size;
    // (is_dram, buffer base, page, offset) packed so that noc_async_read/write can find the page again.
    return (static_cast<uint64_t>(is_dram) << 63) | (static_cast<uint64_t>(base) << 32) |
           (static_cast<uint64_t>(page) << 12) | offset;
}

uint64_t noc_local_addr(uint32_t l1_addr) {
    const Task& t = cur();
    return (1ull << 62) | (static_cast<uint64_t>(t.core->y) << 48) | (static_cast<uint64_t>(t.core->x) << 40) | l1_addr;
}

void noc_read(uint64_t src, uint32_t l1_addr, uint32_t size, uint32_t line) {
    if ((src >> 62) == 1) {   // L1 of this core (e.g. the MEM_ZEROS_BASE region)
        Task& t = cur();
        const uint32_t y = static_cast<uint32_t>((src >> 48) & 0x3fff), x = static_cast<uint32_t>((src >> 40) & 0xff);
        const uint32_t from = static_cast<uint32_t>(src & 0xffffffffu);
        if (x != t.core->x || y != t.core->y) {
            kernel_error(line, format("noc_async_read from core (x=%u, y=%u): reads from other cores' L1 are not "
                                      "emulated", x, y));
        }
        check_transfer("noc_async_read", from, "L1", l1_addr, "L1", size, arch().l1_alignment, line);
        issue_read(t, l1_ptr(*t.core, from, size, line), l1_addr, size, line, "noc_async_read");
        t.core->counters.noc_read_bytes += size;
        return;
    }
    const bool dram = (src >> 63) != 0;
    const uint32_t base = static_cast<uint32_t>((src >> 32) & 0x7fffffffu);
    const uint32_t page = static_cast<uint32_t>((src >> 12) & 0xfffffu);
    const uint32_t offset = static_cast<uint32_t>(src & 0xfffu);
    read_from_buffer(buffer_at(base, dram, line), page, offset, size, l1_addr, line, "noc_async_read");
}

void noc_write(uint32_t l1_addr, uint64_t dst, uint32_t size, uint32_t line) {
    const bool dram = (dst >> 63) != 0;
    const uint32_t base = static_cast<uint32_t>((dst >> 32) & 0x7fffffffu);
    const uint32_t page = static_cast<uint32_t>((dst >> 12) & 0xfffffu);
    const uint32_t offset = static_cast<uint32_t>(dst & 0xfffu);
    write_to_buffer(buffer_at(base, dram, line), page, offset, size, l1_addr, line, "noc_async_write");
}

void noc_inline_write(uint64_t dst, uint32_t value, uint8_t byte_enable, uint32_t line) {
    Task& t = cur();
    if ((dst >> 62) != 1) {
        kernel_error(line, format("noc_inline_dw_write to NoC address 0x%llx: tt-sim emulates inline writes to this "
                                  "core's L1 only (get_noc_addr(l1_addr)); the SDK does not support DRAM destinations",
                                  static_cast<unsigned long long>(dst)));
    }
    const uint32_t y = static_cast<uint32_t>((dst >> 48) & 0x3fff), x = static_cast<uint32_t>((dst >> 40) & 0xff);
    const uint32_t addr = static_cast<uint32_t>(dst & 0xffffffffu);
    if (x != t.core->x || y != t.core->y) {
        kernel_error(line, format("noc_inline_dw_write to core (x=%u, y=%u): writes to other cores' L1 are not "
                                  "emulated", x, y));
    }
    if (addr % 4 != 0) {
        kernel_error(line, format("noc_inline_dw_write to L1 0x%x: the address must be 4-byte aligned", addr));
    }
    if (byte_enable == 0 || byte_enable > 0xF) {
        kernel_error(line, format("noc_inline_dw_write with byte enable 0x%x: it must be 0x1-0xF", byte_enable));
    }
    if (reserved_cb_covering(*t.core, addr, 4) == nullptr) {
        kernel_error(line, format("noc_inline_dw_write writes L1 [0x%x, 0x%x), which is not inside pages reserved "
                                  "with cb_reserve_back", addr, addr + 4));
    }
    l1_ptr(*t.core, addr, 4, line);
    if (const PendingTransfer* p = noc_pending_overlap(*t.core, false, addr, addr + 4)) {
        kernel_error(line, format("noc_inline_dw_write to L1 0x%x while the NoC read issued at %s into those "
                                  "bytes has not landed: the NoC does not order them; call noc_async_read_barrier() "
                                  "first", addr, line_text(p->line).c_str()));
    }
    mark_filled(*t.core, addr, addr + 4);
    PendingTransfer p;
    p.write = true;
    p.inline_l1 = true;
    p.l1_lo = addr;
    p.l1_hi = addr + 4;
    p.byte_enable = byte_enable;
    if (!sim().protocol_only) {
        p.data.resize(4);
        std::memcpy(p.data.data(), &value, 4);
    }
    noc_issue(t, std::move(p), line);
    t.core->counters.noc_write_bytes += 4;
}

void noc_read_barrier(uint32_t line) {
    (void)line;
    noc_land(cur(), false);
}

void noc_write_barrier(uint32_t line) {
    (void)line;
    noc_land(cur(), true);
}

uint32_t my_core_x() { return cur().core->x; }
uint32_t my_core_y() { return cur().core->y; }
// ---------------------------------------------------------------------------------------------------------
// host API: buffers
namespace host {

namespace {
// TT_SIM_BUFFER_FORMATS: the tt::DataFormat value of each buffer's bytes, comma-separated in creation order (the
// runtime writes the plan's buffers in the order the host program creates them); -1 or absent: unknown.
int host_buffer_format(size_t index) {
    static const std::vector<int> formats = [] {
        std::vector<int> out;
        const std::string list = env_or("TT_SIM_BUFFER_FORMATS", "");
        size_t at = 0;
        while (at < list.size()) {
            const size_t comma = list.find(',', at);
            out.push_back(std::stoi(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
            at = comma == std::string::npos ? list.size() : comma + 1;
        }
        return out;
    }();
    return index < formats.size() ? formats[index] : -1;
}
}  // namespace

int buffer_create(int device, uint64_t size, uint32_t page_size, bool dram) {
    Device& dev = *sim().devices.at(static_cast<size_t>(device));
    if (page_size == 0 || size % page_size != 0) {
        die(format("MeshBuffer::create: size %llu is not a multiple of the page size %u",
                   static_cast<unsigned long long>(size), page_size));
    }
    Buffer b;
    b.size = size;
    b.page_size = page_size;
    b.num_pages = static_cast<uint32_t>(size / page_size);
    b.dram = dram;
    const uint32_t align = dram ? dev.arch.dram_alignment : dev.arch.l1_alignment;
    b.aligned_page = (page_size + align - 1) / align * align;
    const uint32_t nbanks = static_cast<uint32_t>(dram ? dev.dram_banks.size() : dev.l1_banks.size());
    const uint64_t per_bank = static_cast<uint64_t>((b.num_pages + nbanks - 1) / nbanks) * b.aligned_page;
    uint32_t& next = dram ? dev.dram_next : dev.l1_next;
    b.base = next;
    next = static_cast<uint32_t>(next + per_bank + align);
    for (auto& bank : dram ? dev.dram_banks : dev.l1_banks) bank.reserve(b.base + per_bank);
    b.device = device;
    b.fmt = host_buffer_format(static_cast<size_t>(dev.buffers_created++));   // per chip: the mesh buffer's index
    sim().buffers.push_back(b);
    return static_cast<int>(sim().buffers.size() - 1);
}

uint32_t buffer_address(int buffer) { return sim().buffers.at(static_cast<size_t>(buffer)).base; }
uint64_t buffer_size(int buffer) { return sim().buffers.at(static_cast<size_t>(buffer)).size; }
uint32_t buffer_page_size(int buffer) { return sim().buffers.at(static_cast<size_t>(buffer)).page_size; }
bool buffer_is_dram(int buffer) { return sim().buffers.at(static_cast<size_t>(buffer)).dram; }

void buffer_write(int buffer, const void* data, size_t bytes) {
    Buffer& b = sim().buffers.at(static_cast<size_t>(buffer));
    if (bytes != b.size) {
        die(format("EnqueueWriteMeshBuffer: %zu bytes for a %llu-byte buffer", bytes,
                   static_cast<unsigned long long>(b.size)));
    }
    const uint8_t* src = static_cast<const uint8_t*>(data);
    device_of(b).host_write_bytes += bytes;
    for (uint32_t p = 0; p < b.num_pages; ++p) {
        std::memcpy(page_ptr(b, p, 0, b.page_size, 0, "EnqueueWriteMeshBuffer"), src + static_cast<size_t>(p) * b.page_size,
                    b.page_size);
    }
}

void buffer_read(int buffer, void* data, size_t bytes) {
    Buffer& b = sim().buffers.at(static_cast<size_t>(buffer));
    if (bytes != b.size) die("EnqueueReadMeshBuffer: size mismatch");
    uint8_t* dst = static_cast<uint8_t*>(data);
    device_of(b).host_read_bytes += bytes;
    for (uint32_t p = 0; p < b.num_pages; ++p) {
        std::memcpy(dst + static_cast<size_t>(p) * b.page_size, page_ptr(b, p, 0, b.page_size, 0, "EnqueueReadMeshBuffer"),
                    b.page_size);
    }
}

}  // namespace host
}  // namespace tt_sim
