// tt-sim: a CPU emulator of the TT-Metalium 0.81 API subset that tilelang-tt generates.
//
// Execution model
// * A program places up to three kernels on each core: two data-movement kernels and one compute kernel.
//   Each (core, kernel) pair is a cooperative task with its own stack (ucontext). One scheduler thread runs
//   the tasks round-robin in a fixed order; a task runs until it blocks on a circular buffer (or finishes),
//   so every run is deterministic and bit-identical.
// * Kernels are compiled at run time with the host C++ compiler into shared objects (one per kernel and
//   compile-time configuration), cached on disk by content hash, and loaded with dlopen.
// * DRAM is a set of banks; a buffer's pages are interleaved round-robin over them (page p in bank p % N at
//   base + (p / N) * aligned_page). Each core has an L1 of the device's size holding its circular buffers.
// * Tiles keep TT's layout (32x32 = four 16x16 faces, faces row-major) in every buffer and CB.
//
// Numeric model (see docs/emulator.md): unpack is exact; DST holds fp32 values, rounded after every math
// op to the 16-bit unpack format unless fp32_dest_acc_en; matmul products and sums are fp32 (math fidelity
// is not modelled: every fidelity behaves like HiFi4); SFPU functions use libm in fp32; pack rounds to the
// output CB's format with round-to-nearest-even.

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tt_sim/device_api.hpp"
#include "tt_sim/host_internal.hpp"

#ifndef TT_SIM_INCLUDE_DIR
#define TT_SIM_INCLUDE_DIR ""
#endif
#ifndef TT_SIM_HEADERS_HASH
#define TT_SIM_HEADERS_HASH "dev"
#endif

namespace tt_sim {
namespace {

constexpr uint32_t kTileElems = 1024;
constexpr uint32_t kMaxCBs = 64;
constexpr uint32_t kL1Base = 0x20000;     // bottom of L1 reserved for firmware, as on hardware
constexpr uint32_t kDramBase = 0x1000;

// ---------------------------------------------------------------------------------------------------------
// errors
[[noreturn]] void die(const std::string& message);

std::string format(const char* fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

// ---------------------------------------------------------------------------------------------------------
// data formats
enum Fmt : uint8_t { kFloat32 = 0, kFloat16 = 1, kFloat16_b = 5 };

uint32_t tile_bytes(uint8_t fmt) {
    switch (fmt) {
        case kFloat32: return 4096;
        case kFloat16:
        case kFloat16_b: return 2048;
        default: return 0;
    }
}

const char* fmt_name(uint8_t fmt) {
    switch (fmt) {
        case kFloat32: return "Float32";
        case kFloat16: return "Float16";
        case kFloat16_b: return "Float16_b";
        default: return "unsupported";
    }
}

inline uint32_t f2u(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float u2f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline uint16_t float_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) {
        return static_cast<uint16_t>((u >> 16) | 0x40);   // quiet NaN
    }
    u += 0x7fffu + ((u >> 16) & 1u);                      // round to nearest even
    return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) { return u2f(static_cast<uint32_t>(h) << 16); }

inline float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        if (mant == 0) return u2f(sign);
        while (!(mant & 0x400)) {
            mant <<= 1;
            exp--;
        }
        exp++;
        mant &= 0x3ff;
    } else if (exp == 31) {
        return u2f(sign | 0x7f800000u | (mant << 13));
    }
    return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
    const uint32_t u = f2u(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000;
        const uint32_t shift = static_cast<uint32_t>(14 - exp);
        uint32_t half = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1);
        const uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return static_cast<uint16_t>(half);
}

inline float round_to(float v, uint8_t fmt) {
    switch (fmt) {
        case kFloat16_b: return bf16_to_float(float_to_bf16(v));
        case kFloat16: return half_to_float(float_to_half(v));
        default: return v;
    }
}

void unpack_tile(const uint8_t* src, uint8_t fmt, float* out) {
    if (fmt == kFloat32) {
        std::memcpy(out, src, 4096);
    } else if (fmt == kFloat16_b) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = bf16_to_float(h[i]);
    } else {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (uint32_t i = 0; i < kTileElems; ++i) out[i] = half_to_float(h[i]);
    }
}

void pack_tile_bytes(const float* in, uint8_t fmt, uint8_t* dst) {
    if (fmt == kFloat32) {
        std::memcpy(dst, in, 4096);
    } else if (fmt == kFloat16_b) {
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_bf16(in[i]);
    } else {
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (uint32_t i = 0; i < kTileElems; ++i) h[i] = float_to_half(in[i]);
    }
}

// Element (r, c) of a tile sits at face (r/16, c/16), row r%16, column c%16.
inline uint32_t face_index(uint32_t r, uint32_t c) { return ((r >> 4) * 2 + (c >> 4)) * 256 + (r & 15) * 16 + (c & 15); }

// ---------------------------------------------------------------------------------------------------------
// device model
struct ArchInfo {
    const char* name;
    uint32_t grid_x, grid_y, l1_bytes, dram_banks, num_cbs, dram_alignment;
};
const ArchInfo kWormhole{"wormhole_b0", 8, 8, 1464 * 1024, 12, 32, 32};
const ArchInfo kBlackhole{"blackhole", 11, 10, 1536 * 1024, 8, 64, 64};

struct Buffer {
    uint32_t base = 0;
    uint64_t size = 0;
    uint32_t page_size = 0;
    uint32_t aligned_page = 0;
    uint32_t num_pages = 0;
    bool dram = true;
};

struct CBState {
    bool configured = false;
    uint8_t fmt = 0;
    uint32_t base = 0, page_size = 0, num_pages = 0;
    uint32_t received = 0, acked = 0;      // pages pushed / popped since the program started
    uint32_t wr_ptr = 0, rd_ptr = 0;       // page indices in the ring
    uint32_t reserved = 0, waited = 0, packed = 0;
    uint32_t high_water = 0;
    bool pending_reads = false;            // a NoC read into reserved pages has not been barriered yet
};

struct Counters {
    uint64_t dram_read_bytes = 0, dram_write_bytes = 0, noc_read_bytes = 0, noc_write_bytes = 0;
    uint64_t pages_read = 0, pages_written = 0, matmul_tiles = 0, tile_ops = 0, packs = 0;
};

struct Core {
    uint32_t x = 0, y = 0;
    std::vector<uint8_t> l1;
    std::array<CBState, kMaxCBs> cbs;
    Counters counters;
    std::vector<uint32_t> semaphores;
};

enum class Role { Reader, Writer, Compute };
const char* role_name(Role r) {
    switch (r) {
        case Role::Reader: return "reader (RISCV_1)";
        case Role::Writer: return "writer (RISCV_0)";
        default: return "compute";
    }
}

struct KernelImage {
    host::KernelSpec spec;
    std::string source_path;
    void (*entry)() = nullptr;
    void* handle = nullptr;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> runtime_args;
    std::vector<uint32_t> common_args;
};

struct ComputeState {
    bool fp32_acc = false;
    uint32_t capacity = 8;
    std::vector<float> dst = std::vector<float>(16 * kTileElems, 0.0f);
    enum class Phase { Idle, Math, Committed, Packing } phase = Phase::Idle;
    bool started = false;
    int srca = -1, srcb = -1, pack = -1;   // CB whose format the unpacker / packer is configured for
    uint8_t dst_fmt = kFloat32;           // rounding format of DST in 16-bit mode
    uint32_t matmul_transpose = 0;
};

struct Task {
    Core* core = nullptr;
    KernelImage* kernel = nullptr;
    Role role = Role::Reader;
    ucontext_t ctx{};
    std::vector<char> stack;
    bool done = false;
    std::string blocked_on;              // description of the blocking call, empty when runnable
    uint32_t blocked_line = 0;
    uint32_t cur_line = 0;
    bool outstanding_reads = false, outstanding_writes = false;
    ComputeState compute;
};

struct Program {
    std::vector<std::unique_ptr<KernelImage>> kernels;
    std::vector<host::CBSpec> cbs;
    std::vector<std::pair<std::vector<host::Range>, uint32_t>> semaphores;
};

struct Device {
    ArchInfo arch = kWormhole;
    std::vector<std::vector<uint8_t>> dram_banks, l1_banks;
    uint32_t dram_next = kDramBase, l1_next = 0x100000;
    bool open = false;
    std::vector<std::unique_ptr<Core>> run_cores;   // cores of the last run, for the report
    double last_run_seconds = 0.0, compile_seconds = 0.0;
    uint64_t scheduler_switches = 0;
    std::string report_path;
};

struct Sim {
    std::vector<std::unique_ptr<Device>> devices;
    std::vector<Buffer> buffers;
    std::vector<std::unique_ptr<Program>> programs;
    Task* current = nullptr;
    ucontext_t scheduler_ctx{};
    uint64_t progress = 0;
    bool protocol_only = false;
};

Sim& sim() {
    static Sim instance;
    return instance;
}

Task& cur() {
    Task* t = sim().current;
    if (t == nullptr) die("a kernel API function was called outside a running kernel");
    return *t;
}

std::string where(const Task& t, uint32_t line) {
    return format("core (x=%u, y=%u) %s kernel %s:%u", t.core->x, t.core->y, role_name(t.role),
                  t.kernel->spec.path.c_str(), line);
}

[[noreturn]] void die(const std::string& message) {
    std::fprintf(stderr, "tt-sim error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(3);
}

[[noreturn]] void kernel_error(uint32_t line, const std::string& message) {
    die(where(cur(), line) + ": " + message);
}

// Cooperative blocking: yield to the scheduler until `ready()` holds.
template <typename Pred>
void block_until(Pred ready, uint32_t line, const std::string& what) {
    Task& t = cur();
    if (ready()) return;
    t.blocked_on = what;
    t.blocked_line = line;
    while (!ready()) {
        swapcontext(&t.ctx, &sim().scheduler_ctx);
    }
    t.blocked_on.clear();
    sim().progress++;
}

CBState& cb_of(uint32_t cb, uint32_t line) {
    Task& t = cur();
    if (cb >= kMaxCBs || !t.core->cbs[cb].configured) {
        kernel_error(line, format("circular buffer %u is not configured on this core (CreateCircularBuffer)", cb));
    }
    return t.core->cbs[cb];
}

uint8_t* l1_ptr(Core& core, uint32_t addr, uint32_t size, uint32_t line) {
    if (static_cast<uint64_t>(addr) + size > core.l1.size()) {
        kernel_error(line, format("L1 access [0x%x, 0x%x) is outside the core's %zu-byte L1", addr, addr + size,
                                  core.l1.size()));
    }
    return core.l1.data() + addr;
}

}  // namespace

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

void cb_reserve_back(uint32_t cb, uint32_t n, uint32_t line) {
    CBState& s = cb_of(cb, line);
    if (n > s.num_pages) {
        kernel_error(line, format("cb_reserve_back(%u, %u): the CB holds only %u pages", cb, n, s.num_pages));
    }
    if (s.wr_ptr + n > s.num_pages) {
        kernel_error(line, format("cb_reserve_back(%u, %u): the reservation would wrap around the end of the %u-page "
                                  "ring (write pointer at page %u); pushes must add up to the CB size",
                                  cb, n, s.num_pages, s.wr_ptr));
    }
    block_until([&] { return s.num_pages - (s.received - s.acked) >= n; }, line,
                format("cb_reserve_back(cb=%u, n=%u) [%u of %u pages in use]", cb, n, s.received - s.acked,
                       s.num_pages));
    s.reserved = n;
    s.packed = 0;
}

void cb_push_back(uint32_t cb, uint32_t n, uint32_t line) {
    CBState& s = cb_of(cb, line);
    Task& t = cur();
    if (n > s.reserved) {
        kernel_error(line, format("cb_push_back(%u, %u) pushes more pages than were reserved (%u)", cb, n, s.reserved));
    }
    if (t.outstanding_reads && s.pending_reads) {
        kernel_error(line, format("cb_push_back(%u, %u) publishes pages whose NoC reads were not completed: call "
                                  "noc_async_read_barrier() first", cb, n));
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
    if (s.rd_ptr + n > s.num_pages) {
        kernel_error(line, format("cb_pop_front(%u, %u) would wrap around the end of the %u-page ring (read pointer "
                                  "at page %u)", cb, n, s.num_pages, s.rd_ptr));
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

uint32_t cb_pages_reservable(uint32_t cb, uint32_t n) {
    CBState& s = cb_of(cb, 0);
    return s.num_pages - (s.received - s.acked) >= n ? 1u : 0u;
}

uint32_t cb_pages_available(uint32_t cb, uint32_t n) {
    CBState& s = cb_of(cb, 0);
    return s.received - s.acked >= n ? 1u : 0u;
}

// =========================================================================================================
// kernel API: NoC
namespace {

Buffer& buffer_at(uint32_t base, bool dram, uint32_t line) {
    for (Buffer& b : sim().buffers) {
        if (b.base == base && b.dram == dram) return b;
    }
    kernel_error(line, format("no %s buffer starts at address 0x%x", dram ? "DRAM" : "L1", base));
}

uint8_t* page_ptr(Buffer& b, uint32_t page, uint32_t offset, uint32_t size, uint32_t line, const char* op) {
    if (page >= b.num_pages) {
        kernel_error(line, format("%s: page %u is outside the buffer at 0x%x (%u pages)", op, page, b.base, b.num_pages));
    }
    if (offset + size > b.page_size) {
        kernel_error(line, format("%s: %u bytes at offset %u overrun the %u-byte page", op, size, offset, b.page_size));
    }
    Device& dev = *sim().devices.back();
    auto& banks = b.dram ? dev.dram_banks : dev.l1_banks;
    const uint32_t nbanks = static_cast<uint32_t>(banks.size());
    auto& bank = banks[page % nbanks];
    const uint64_t at = b.base + static_cast<uint64_t>(page / nbanks) * b.aligned_page + offset;
    if (at + size > bank.size()) bank.resize(at + size, 0);
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

bool front_cb_covers(Core& core, uint32_t addr, uint32_t size) {
    for (CBState& s : core.cbs) {
        if (!s.configured || s.waited == 0) continue;
        const uint32_t lo = s.base + s.rd_ptr * s.page_size;
        const uint32_t hi = lo + s.waited * s.page_size;
        if (addr >= lo && addr + size <= hi) return true;
    }
    return false;
}

}  // namespace

void noc_read_page(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t l1_addr, uint32_t offset,
                   uint32_t line) {
    Task& t = cur();
    Buffer& b = buffer_at(base, is_dram, line);
    const uint32_t size = page_size - offset;
    CBState* cb = reserved_cb_covering(*t.core, l1_addr, size);
    if (cb == nullptr) {
        kernel_error(line, format("noc_async_read_page(%u) writes L1 [0x%x, 0x%x), which is not inside pages reserved "
                                  "with cb_reserve_back", page, l1_addr, l1_addr + size));
    }
    uint8_t* src = page_ptr(b, page, offset, size, line, "noc_async_read_page");
    if (!sim().protocol_only) std::memcpy(l1_ptr(*t.core, l1_addr, size, line), src, size);
    cb->pending_reads = true;
    t.outstanding_reads = true;
    auto& c = t.core->counters;
    (b.dram ? c.dram_read_bytes : c.noc_read_bytes) += size;
    if (b.dram) c.noc_read_bytes += size;
    c.pages_read++;
}

void noc_write_page(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t l1_addr, uint32_t size,
                    uint32_t offset, uint32_t line) {
    Task& t = cur();
    Buffer& b = buffer_at(base, is_dram, line);
    if (size == 0) size = page_size;
    if (!front_cb_covers(*t.core, l1_addr, size)) {
        kernel_error(line, format("noc_async_write_page(%u) reads L1 [0x%x, 0x%x), which is not inside pages obtained "
                                  "with cb_wait_front", page, l1_addr, l1_addr + size));
    }
    uint8_t* dst = page_ptr(b, page, offset, size, line, "noc_async_write_page");
    if (!sim().protocol_only) std::memcpy(dst, l1_ptr(*t.core, l1_addr, size, line), size);
    t.outstanding_writes = true;
    auto& c = t.core->counters;
    if (b.dram) c.dram_write_bytes += size;
    c.noc_write_bytes += size;
    c.pages_written++;
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
        CBState* cb = reserved_cb_covering(*t.core, l1_addr, size);
        if (cb == nullptr) {
            kernel_error(line, format("noc_async_read writes L1 [0x%x, 0x%x), which is not inside pages reserved with "
                                      "cb_reserve_back", l1_addr, l1_addr + size));
        }
        const uint8_t* s = l1_ptr(*t.core, from, size, line);
        if (!sim().protocol_only) std::memmove(l1_ptr(*t.core, l1_addr, size, line), s, size);
        cb->pending_reads = true;
        t.outstanding_reads = true;
        t.core->counters.noc_read_bytes += size;
        return;
    }
    const bool dram = (src >> 63) != 0;
    const uint32_t base = static_cast<uint32_t>((src >> 32) & 0x7fffffffu);
    const uint32_t page = static_cast<uint32_t>((src >> 12) & 0xfffffu);
    const uint32_t offset = static_cast<uint32_t>(src & 0xfffu);
    Buffer& b = buffer_at(base, dram, line);
    if (size != b.page_size - offset) {
        kernel_error(line, format("noc_async_read of %u bytes: tt-sim emulates page-sized reads only", size));
    }
    noc_read_page(base, dram, b.page_size, page, l1_addr, offset, line);
}

void noc_write(uint32_t l1_addr, uint64_t dst, uint32_t size, uint32_t line) {
    const bool dram = (dst >> 63) != 0;
    const uint32_t base = static_cast<uint32_t>((dst >> 32) & 0x7fffffffu);
    const uint32_t page = static_cast<uint32_t>((dst >> 12) & 0xfffffu);
    const uint32_t offset = static_cast<uint32_t>(dst & 0xfffu);
    Buffer& b = buffer_at(base, dram, line);
    noc_write_page(base, dram, b.page_size, page, l1_addr, size, offset, line);
}

void noc_read_barrier(uint32_t line) {
    (void)line;
    Task& t = cur();
    t.outstanding_reads = false;
    for (CBState& s : t.core->cbs) s.pending_reads = false;
}

void noc_write_barrier(uint32_t line) {
    (void)line;
    cur().outstanding_writes = false;
}

uint32_t my_core_x() { return cur().core->x; }
uint32_t my_core_y() { return cur().core->y; }

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
    if (!c.fp32_acc) {
        for (uint32_t i = 0; i < kTileElems; ++i) tile[i] = round_to(tile[i], c.dst_fmt);
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

void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "matmul_tiles");
    check_src_format(c, c.srcb, in0, "SrcB (matmul in0)", line, "matmul_tiles");
    check_src_format(c, c.srca, in1, "SrcA (matmul in1)", line, "matmul_tiles");
    const uint8_t* a_bytes = front_tile(in0, t0, line, "matmul_tiles");
    const uint8_t* b_bytes = front_tile(in1, t1, line, "matmul_tiles");
    float* out = dst_tile(c, dst, line, "matmul_tiles");
    if (!sim().protocol_only) {
        float a[kTileElems], b[kTileElems], ar[32][32], br[32][32];
        unpack_tile(a_bytes, cur().core->cbs[in0].fmt, a);
        unpack_tile(b_bytes, cur().core->cbs[in1].fmt, b);
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
    require_math(c, line, "eltwise binary tile op");
    check_src_format(c, c.srca, cb_a, "SrcA", line, "eltwise binary tile op");
    check_src_format(c, c.srcb, cb_b, "SrcB", line, "eltwise binary tile op");
    const uint8_t* a_bytes = front_tile(cb_a, ta, line, "eltwise binary tile op");
    const uint8_t* b_bytes = front_tile(cb_b, tb, line, "eltwise binary tile op");
    float* out = dst_tile(c, dst, line, "eltwise binary tile op");
    if (!sim().protocol_only) {
        float a[kTileElems], b[kTileElems];
        unpack_tile(a_bytes, cur().core->cbs[cb_a].fmt, a);
        unpack_tile(b_bytes, cur().core->cbs[cb_b].fmt, b);
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

void binary_scalar(Binary op, uint32_t dst, uint32_t param_bits, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "SFPU scalar op");
    float* t = dst_tile(c, dst, line, "SFPU scalar op");
    const float s = u2f(param_bits);
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) t[i] = apply(op, t[i], s);
        after_math(c, t);
    }
    cur().core->counters.tile_ops++;
}

void unary(Unary op, uint32_t dst, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "SFPU unary op");
    float* t = dst_tile(c, dst, line, "SFPU unary op");
    if (!sim().protocol_only) {
        for (uint32_t i = 0; i < kTileElems; ++i) {
            const float x = t[i];
            float y = x;
            switch (op) {
                case Unary::Exp: y = std::exp(x); break;
                case Unary::Log: y = std::log(x); break;
                case Unary::Sqrt: y = std::sqrt(x); break;
                case Unary::Rsqrt: y = 1.0f / std::sqrt(x); break;
                case Unary::Recip: y = 1.0f / x; break;
                case Unary::Relu: y = x > 0.0f ? x : 0.0f; break;
                case Unary::Gelu: y = 0.5f * x * (1.0f + std::erf(x * 0.70710678f)); break;
                case Unary::GeluTanh:
                    y = 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
                    break;
                case Unary::Negative: y = -x; break;
                case Unary::Tanh: y = std::tanh(x); break;
                case Unary::Sigmoid: y = 1.0f / (1.0f + std::exp(-x)); break;
                case Unary::Erf: y = std::erf(x); break;
            }
            t[i] = y;
        }
        after_math(c, t);
    }
    cur().core->counters.tile_ops++;
}

void fill_tile(uint32_t dst, float value, uint32_t line) {
    ComputeState& c = cs(line);
    require_math(c, line, "fill_tile");
    float* t = dst_tile(c, dst, line, "fill_tile");
    if (!sim().protocol_only) {
        std::fill(t, t + kTileElems, value);
        after_math(c, t);
    }
    cur().core->counters.tile_ops++;
}

// =========================================================================================================
// kernel JIT: compile each kernel once per configuration, cache the shared object by content hash
namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die("cannot read kernel source " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
    for (unsigned char ch : s) {
        h ^= ch;
        h *= 1099511628211ull;
    }
    return h;
}

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string cache_dir() {
    const std::string home = env_or("HOME", "/tmp");
    return env_or("TT_SIM_CACHE_DIR", home + "/.cache/tilelang_tt/sim-kernels");
}

void mkdirs(const std::string& path) {
    std::string partial;
    std::stringstream ss(path);
    std::string part;
    if (!path.empty() && path[0] == '/') partial = "/";
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        partial += part + "/";
        ::mkdir(partial.c_str(), 0755);
    }
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char ch : s) {
        if (ch == '\'') out += "'\\''";
        else out += ch;
    }
    return out + "'";
}

struct Build {
    std::string command, so_path, tmp_path, log_path, source_path;
    bool needed = false;
};

Build plan_build(const KernelImage& k) {
    const std::string include = env_or("TT_SIM_INCLUDE_DIR", TT_SIM_INCLUDE_DIR);
    const std::string cxx = env_or("TT_SIM_CXX", "c++");
    std::string defines = "-DKERNEL_COMPILE_TIME_ARGS=";
    for (size_t i = 0; i < k.spec.compile_args.size(); ++i) {
        defines += (i ? "," : "") + std::to_string(k.spec.compile_args[i]);
    }
    defines = shell_quote(defines);
    defines += " -DNOC_INDEX=" + std::to_string(k.spec.noc);
    for (const auto& [name, value] : k.spec.defines) defines += " " + shell_quote("-D" + name + "=" + value);
    const std::string flags = "-std=c++17 -O2 -fPIC -shared -Wall -Werror";
    const std::string source = read_file(k.source_path);
    const uint64_t h = fnv1a(source, fnv1a(defines + flags + cxx + TT_SIM_HEADERS_HASH + include));
    char name[64];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(h));
    Build b;
    const std::string dir = cache_dir();
    b.so_path = dir + "/" + name + ".so";
    b.source_path = k.source_path;
    struct stat st {};
    if (::stat(b.so_path.c_str(), &st) == 0) return b;
    mkdirs(dir);
    b.needed = true;
    b.tmp_path = b.so_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::rand());
    b.log_path = b.tmp_path + ".log";
    b.command = cxx + " " + flags + " -I" + shell_quote(include) + " " + defines + " -x c++ " +
                shell_quote(k.source_path) + " -o " + shell_quote(b.tmp_path) + " > " + shell_quote(b.log_path) +
                " 2>&1";
    return b;
}

void load_kernels(Program& program, Device& dev) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Build> builds;
    for (auto& k : program.kernels) builds.push_back(plan_build(*k));
    std::vector<std::thread> workers;
    std::vector<int> status(builds.size(), 0);
    for (size_t i = 0; i < builds.size(); ++i) {
        if (!builds[i].needed) continue;
        workers.emplace_back([&, i] { status[i] = std::system(builds[i].command.c_str()); });
    }
    for (auto& w : workers) w.join();
    for (size_t i = 0; i < builds.size(); ++i) {
        Build& b = builds[i];
        if (b.needed) {
            if (status[i] != 0) {
                const std::string log = read_file(b.log_path);
                ::unlink(b.log_path.c_str());
                die("kernel " + b.source_path + " does not compile (-Wall -Werror):\n" + log);
            }
            ::unlink(b.log_path.c_str());
            // rename is atomic: a concurrent build of the same kernel leaves one complete file either way
            if (std::rename(b.tmp_path.c_str(), b.so_path.c_str()) != 0) die("cannot store " + b.so_path);
        }
        KernelImage& k = *program.kernels[i];
        k.handle = ::dlopen(b.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (k.handle == nullptr) die(std::string("cannot load kernel ") + b.so_path + ": " + ::dlerror());
        k.entry = reinterpret_cast<void (*)()>(::dlsym(k.handle, "_Z11kernel_mainv"));
        if (k.entry == nullptr) die("kernel " + k.spec.path + " has no `void kernel_main()`");
    }
    dev.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------------------
// scheduler
void task_trampoline(unsigned lo, unsigned hi) {
    Task* t = reinterpret_cast<Task*>((static_cast<uintptr_t>(hi) << 32) | lo);
    t->kernel->entry();
    t->done = true;
    sim().progress++;
    swapcontext(&t->ctx, &sim().scheduler_ctx);
}

bool in_ranges(const std::vector<host::Range>& ranges, uint32_t x, uint32_t y) {
    for (const auto& r : ranges) {
        if (x >= r.x0 && x <= r.x1 && y >= r.y0 && y <= r.y1) return true;
    }
    return false;
}

std::string deadlock_report(const std::vector<std::unique_ptr<Task>>& tasks) {
    std::string out = "deadlock: every unfinished kernel is blocked\n";
    for (const auto& t : tasks) {
        if (t->done) continue;
        out += "  " + where(*t, t->blocked_line) + ": blocked in " + t->blocked_on;
        out += "\n";
    }
    out += "  (a cb_wait_front with no matching cb_push_back, or a cb_reserve_back on a full CB that nobody pops)";
    return out;
}

void write_report(Device& dev) {
    if (dev.report_path.empty()) return;
    std::ofstream f(dev.report_path);
    Counters total;
    f << "{\n  \"arch\": \"" << dev.arch.name << "\",\n  \"protocol_only\": " << (sim().protocol_only ? "true" : "false")
      << ",\n  \"run_seconds\": " << dev.last_run_seconds << ",\n  \"compile_seconds\": " << dev.compile_seconds
      << ",\n  \"scheduler_switches\": " << dev.scheduler_switches << ",\n  \"cores\": [";
    bool first = true;
    for (const auto& core : dev.run_cores) {
        const Counters& c = core->counters;
        total.dram_read_bytes += c.dram_read_bytes;
        total.dram_write_bytes += c.dram_write_bytes;
        total.noc_read_bytes += c.noc_read_bytes;
        total.noc_write_bytes += c.noc_write_bytes;
        total.pages_read += c.pages_read;
        total.pages_written += c.pages_written;
        total.matmul_tiles += c.matmul_tiles;
        total.tile_ops += c.tile_ops;
        total.packs += c.packs;
        f << (first ? "\n" : ",\n") << "    {\"core\": [" << core->y << ", " << core->x << "], \"dram_read_bytes\": "
          << c.dram_read_bytes << ", \"dram_write_bytes\": " << c.dram_write_bytes << ", \"noc_read_bytes\": "
          << c.noc_read_bytes << ", \"noc_write_bytes\": " << c.noc_write_bytes << ", \"tiles_read\": " << c.pages_read
          << ", \"tiles_written\": " << c.pages_written << ", \"matmul_tiles\": " << c.matmul_tiles
          << ", \"tile_ops\": " << c.tile_ops << ", \"packs\": " << c.packs << ", \"cb_high_water\": {";
        bool first_cb = true;
        for (uint32_t i = 0; i < kMaxCBs; ++i) {
            if (!core->cbs[i].configured) continue;
            f << (first_cb ? "" : ", ") << "\"" << i << "\": " << core->cbs[i].high_water;
            first_cb = false;
        }
        f << "}}";
        first = false;
    }
    f << "\n  ],\n  \"total\": {\"dram_read_bytes\": " << total.dram_read_bytes << ", \"dram_write_bytes\": "
      << total.dram_write_bytes << ", \"noc_read_bytes\": " << total.noc_read_bytes << ", \"noc_write_bytes\": "
      << total.noc_write_bytes << ", \"tiles_read\": " << total.pages_read << ", \"tiles_written\": "
      << total.pages_written << ", \"matmul_tiles\": " << total.matmul_tiles << ", \"tile_ops\": " << total.tile_ops
      << ", \"packs\": " << total.packs << "}\n}\n";
}

}  // namespace

// =========================================================================================================
// host API
namespace host {

int device_open(int device_id) {
    if (device_id != 0) die(format("MeshDevice::create_unit_mesh(%d): the emulator has one device, id 0", device_id));
    auto dev = std::make_unique<Device>();
    const std::string arch = env_or("TT_SIM_ARCH", "wormhole_b0");
    if (arch == "blackhole") dev->arch = kBlackhole;
    else if (arch != "wormhole_b0") die("TT_SIM_ARCH=" + arch + ": expected wormhole_b0 or blackhole");
    dev->dram_banks.assign(dev->arch.dram_banks, {});
    dev->l1_banks.assign(dev->arch.grid_x * dev->arch.grid_y, {});
    dev->open = true;
    dev->report_path = env_or("TT_SIM_REPORT", "");
    sim().protocol_only = env_or("TT_SIM_PROTOCOL_ONLY", "0") == "1";
    sim().devices.push_back(std::move(dev));
    return static_cast<int>(sim().devices.size() - 1);
}

void device_close(int device) {
    Device& dev = *sim().devices.at(static_cast<size_t>(device));
    write_report(dev);
    dev.open = false;
}

uint32_t device_grid_x(int device) { return sim().devices.at(static_cast<size_t>(device))->arch.grid_x; }
uint32_t device_grid_y(int device) { return sim().devices.at(static_cast<size_t>(device))->arch.grid_y; }
uint32_t device_l1_size(int device) { return sim().devices.at(static_cast<size_t>(device))->arch.l1_bytes; }
uint32_t device_dram_banks(int device) { return sim().devices.at(static_cast<size_t>(device))->arch.dram_banks; }
int device_arch(int device) { return sim().devices.at(static_cast<size_t>(device))->arch.num_cbs == 64 ? 1 : 0; }

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
    const uint32_t align = dram ? dev.arch.dram_alignment : 16;
    b.aligned_page = (page_size + align - 1) / align * align;
    const uint32_t nbanks = static_cast<uint32_t>(dram ? dev.dram_banks.size() : dev.l1_banks.size());
    const uint64_t per_bank = static_cast<uint64_t>((b.num_pages + nbanks - 1) / nbanks) * b.aligned_page;
    uint32_t& next = dram ? dev.dram_next : dev.l1_next;
    b.base = next;
    next = static_cast<uint32_t>(next + per_bank + align);
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
    for (uint32_t p = 0; p < b.num_pages; ++p) {
        std::memcpy(page_ptr(b, p, 0, b.page_size, 0, "EnqueueWriteMeshBuffer"), src + static_cast<size_t>(p) * b.page_size,
                    b.page_size);
    }
}

void buffer_read(int buffer, void* data, size_t bytes) {
    Buffer& b = sim().buffers.at(static_cast<size_t>(buffer));
    if (bytes != b.size) die("EnqueueReadMeshBuffer: size mismatch");
    uint8_t* dst = static_cast<uint8_t*>(data);
    for (uint32_t p = 0; p < b.num_pages; ++p) {
        std::memcpy(dst + static_cast<size_t>(p) * b.page_size, page_ptr(b, p, 0, b.page_size, 0, "EnqueueReadMeshBuffer"),
                    b.page_size);
    }
}

int program_create() {
    sim().programs.push_back(std::make_unique<Program>());
    return static_cast<int>(sim().programs.size() - 1);
}

uint32_t program_add_kernel(int program, const KernelSpec& spec) {
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    auto k = std::make_unique<KernelImage>();
    k->spec = spec;
    k->source_path = spec.path;
    if (!spec.path.empty() && spec.path[0] != '/') {
        struct stat st {};
        if (::stat(spec.path.c_str(), &st) != 0) {
            const std::string home = env_or("TT_METAL_KERNEL_PATH", env_or("TT_METAL_HOME", "."));
            k->source_path = home + "/" + spec.path;
        }
    }
    p.kernels.push_back(std::move(k));
    return static_cast<uint32_t>(p.kernels.size() - 1);
}

uint32_t program_add_cb(int program, const CBSpec& spec) {
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    p.cbs.push_back(spec);
    return static_cast<uint32_t>(p.cbs.size() - 1);
}

uint32_t program_add_semaphore(int program, const std::vector<Range>& cores, uint32_t initial_value) {
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    p.semaphores.emplace_back(cores, initial_value);
    return static_cast<uint32_t>(p.semaphores.size() - 1);
}

void program_set_runtime_args(int program, uint32_t kernel, const std::vector<Range>& cores, const uint32_t* args,
                              size_t count) {
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    if (kernel >= p.kernels.size()) die(format("SetRuntimeArgs: no kernel %u", kernel));
    if (count > 341) die(format("SetRuntimeArgs: %zu runtime args (at most 341)", count));
    KernelImage& k = *p.kernels[kernel];
    for (const auto& r : cores) {
        for (uint32_t y = r.y0; y <= r.y1; ++y) {
            for (uint32_t x = r.x0; x <= r.x1; ++x) {
                if (!in_ranges(k.spec.cores, x, y)) {
                    die(format("SetRuntimeArgs: kernel %s is not placed on core (x=%u, y=%u)", k.spec.path.c_str(), x, y));
                }
                k.runtime_args[{x, y}] = std::vector<uint32_t>(args, args + count);
            }
        }
    }
}

void program_set_common_runtime_args(int program, uint32_t kernel, const uint32_t* args, size_t count) {
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    p.kernels.at(kernel)->common_args.assign(args, args + count);
}

void program_run(int device, int program) {
    Device& dev = *sim().devices.at(static_cast<size_t>(device));
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    load_kernels(p, dev);
    const auto t0 = std::chrono::steady_clock::now();

    // Cores used by any kernel, each with its L1 and CBs.
    std::map<std::pair<uint32_t, uint32_t>, Core*> cores;
    dev.run_cores.clear();
    auto core_at = [&](uint32_t x, uint32_t y) -> Core& {
        if (x >= dev.arch.grid_x || y >= dev.arch.grid_y) {
            die(format("core (x=%u, y=%u) is outside the %ux%u compute grid of %s", x, y, dev.arch.grid_x,
                       dev.arch.grid_y, dev.arch.name));
        }
        auto it = cores.find({y, x});
        if (it != cores.end()) return *it->second;
        auto core = std::make_unique<Core>();
        core->x = x;
        core->y = y;
        core->l1.assign(dev.arch.l1_bytes, 0);
        Core* raw = core.get();
        dev.run_cores.push_back(std::move(core));
        cores[{y, x}] = raw;
        return *raw;
    };
    auto each_core = [&](const std::vector<Range>& ranges, const std::function<void(Core&)>& fn) {
        for (const auto& r : ranges)
            for (uint32_t y = r.y0; y <= r.y1; ++y)
                for (uint32_t x = r.x0; x <= r.x1; ++x) fn(core_at(x, y));
    };
    std::map<Core*, uint32_t> l1_next;
    for (const CBSpec& spec : p.cbs) {
        each_core(spec.cores, [&](Core& core) {
            uint32_t& next = l1_next.emplace(&core, kL1Base).first->second;
            if (next + spec.total_size > dev.arch.l1_bytes) {
                die(format("circular buffers on core (x=%u, y=%u) need %u bytes of L1 above the %u-byte firmware area, "
                           "more than the %u bytes of %s", core.x, core.y, next - kL1Base + spec.total_size, kL1Base,
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
            }
            next += (spec.total_size + 15) / 16 * 16;
        });
    }

    // One task per (kernel, core); two data-movement kernels on one core must use different processors.
    std::vector<std::unique_ptr<Task>> tasks;
    std::map<std::tuple<uint32_t, uint32_t, int>, std::string> slots;
    for (auto& k : p.kernels) {
        const int slot = k->spec.compute ? 2 : k->spec.processor;
        each_core(k->spec.cores, [&](Core& core) {
            auto key = std::make_tuple(core.x, core.y, slot);
            if (slots.count(key)) {
                die(format("kernels %s and %s both run on %s of core (x=%u, y=%u)", slots[key].c_str(),
                           k->spec.path.c_str(), k->spec.compute ? "the compute TRISCs" : "the same RISC-V", core.x,
                           core.y));
            }
            slots[key] = k->spec.path;
            auto t = std::make_unique<Task>();
            t->core = &core;
            t->kernel = k.get();
            t->role = k->spec.compute ? Role::Compute : (k->spec.processor == 1 ? Role::Reader : Role::Writer);
            t->compute.fp32_acc = k->spec.fp32_dest_acc_en;
            t->compute.capacity = (k->spec.dst_full_sync_en ? 16u : 8u) / (k->spec.fp32_dest_acc_en ? 2u : 1u);
            t->stack.resize(512 * 1024);
            getcontext(&t->ctx);
            t->ctx.uc_stack.ss_sp = t->stack.data();
            t->ctx.uc_stack.ss_size = t->stack.size();
            t->ctx.uc_link = nullptr;
            const uintptr_t ptr = reinterpret_cast<uintptr_t>(t.get());
            makecontext(&t->ctx, reinterpret_cast<void (*)()>(task_trampoline), 2, static_cast<unsigned>(ptr & 0xffffffffu),
                        static_cast<unsigned>(ptr >> 32));
            tasks.push_back(std::move(t));
        });
    }

    const double timeout = std::stod(env_or("TT_SIM_TIMEOUT", "300"));
    size_t remaining = tasks.size();
    while (remaining > 0) {
        const uint64_t before = sim().progress;
        for (auto& t : tasks) {
            if (t->done) continue;
            sim().current = t.get();
            swapcontext(&sim().scheduler_ctx, &t->ctx);
            sim().current = nullptr;
            dev.scheduler_switches++;
            if (t->done) remaining--;
        }
        if (remaining > 0 && sim().progress == before) die(deadlock_report(tasks));
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout) {
            die(format("the run exceeded TT_SIM_TIMEOUT=%.0f s; ", timeout) + deadlock_report(tasks));
        }
    }

    // Every CB must end balanced: what was pushed was popped, nothing is left reserved.
    for (const auto& core : dev.run_cores) {
        for (uint32_t i = 0; i < kMaxCBs; ++i) {
            const CBState& s = core->cbs[i];
            if (!s.configured) continue;
            if (s.received != s.acked || s.reserved != 0) {
                die(format("core (x=%u, y=%u) CB %u ends unbalanced: %u pages pushed, %u popped, %u still reserved",
                           core->x, core->y, i, s.received, s.acked, s.reserved));
            }
        }
    }
    for (const auto& t : tasks) {
        if (t->outstanding_writes) {
            die(where(*t, 0) + ": kernel ended with NoC writes not completed (missing noc_async_write_barrier)");
        }
        if (t->role == Role::Compute && t->compute.phase != ComputeState::Phase::Idle) {
            die(where(*t, 0) + ": kernel ended with DST still acquired (missing tile_regs_release)");
        }
    }
    dev.last_run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void finish(int device) { (void)device; }

}  // namespace host
}  // namespace tt_sim
