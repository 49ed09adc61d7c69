// tt-sim internal declarations shared by the emulator's source files (not installed).
//
// Layout by concern:
//   host.cpp       host API objects: device, programs, kernels, CB/semaphore specs, runtime args
//   scheduler.cpp  tasks and the cooperative scheduler (program_run), deadlock detection
//   jit.cpp        kernel JIT: compile, cache and load the kernels
//   cb.cpp         circular buffers: runtime args, reserve/push/wait/pop, CB placement in L1
//   noc.cpp        NoC and DRAM: buffers, interleaved pages, NoC reads/writes and barriers
//   numerics.cpp   data formats and rounding: unpack, pack, DST rounding
//   fidelity.cpp   SrcA/SrcB narrowing, unpack-to-DEST, math fidelity phases
//   compute.cpp    the compute kernel API: DST handshake, unpacker/packer configuration, inits, FPU tile ops
//   matmul.cpp     matmul_tiles: the product, and the cache of prepared operand tiles
//   sfpu.cpp       SFPU ops (in place on DST)
//   reduce_bcast.cpp  reduce_tile (with the packer's edge mask) and broadcast tile ops
//   sanitizer.cpp  errors, `where()` reporting, end-of-run checks
//   counters.cpp   the run report
//   mesh.cpp       a mesh of devices (MeshDevice::create): its chips, sharded buffers split over them, the report
#pragma once

#include <ucontext.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt_sim/device_api.hpp"
#include "tt_sim/host_internal.hpp"
#include "tt_sim/hw_constants.hpp"

namespace tt_sim {

// Every device, data-format and geometry constant comes from the hardware table (python/tilelang_tt/device.py),
// through the generated tt_sim/hw_constants.hpp.
using hw::ArchInfo;
using hw::Fmt;
using hw::kFloat16;
using hw::kFloat16_b;
using hw::kFloat32;
using hw::kInt32;
using hw::kUInt8;
using hw::kTypecastInt8;
using hw::kTypecastUInt8;
using hw::kTypecastInt32;
// CB formats whose tiles reach DST as 32-bit integers (copy_tile) and are packed from them: UInt8, Int32
inline bool int_format(uint8_t fmt) { return fmt == kUInt8 || fmt == kInt32; }
using hw::kMaxCBs;
using hw::kTileElems;
constexpr uint32_t kDramBase = 0x1000;    // first DRAM address the emulator's allocator hands out
constexpr uint32_t kL1BufferBase = 0x100000;

// ---- errors (sanitizer.cpp) ----------------------------------------------------------------------------
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void die(const std::string& message);
[[noreturn]] void kernel_error(uint32_t line, const std::string& message);
std::string env_or(const char* name, const std::string& fallback);

// ---- data formats and numerics (numerics.cpp) ----------------------------------------------------------
// A whole-tile loop compiled for AVX-512, AVX2 and baseline x86-64, the CPU's best picked at load time (the same
// element-wise operations in each, and no multiply-add is fused: -ffp-contract=off, so the results are identical).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TT_SIM_TILE_LOOP __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define TT_SIM_TILE_LOOP
#endif
uint32_t tile_bytes(uint8_t fmt);
const char* fmt_name(uint8_t fmt);
inline float u2f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t f2u(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
void unpack_tile(const uint8_t* src, uint8_t fmt, float* out);
void pack_tile_bytes(const float* in, uint8_t fmt, uint8_t* dst, bool fp32_acc = false);
// The value pack_tile_bytes(fmt, fp32_acc) stores, as a float (packer L1 accumulation adds it to the L1 datum)
void round_packed(float* tile, uint8_t fmt, bool fp32_acc);
void round_tile(float* tile, uint8_t fmt);   // round every element to `fmt` (no-op for Float32)
// What the FPU computes with (fidelity.cpp): a Float32 CB's data narrowed into SrcA/SrcB (TF32 with fp32 DST
// accumulation, BF16 without; FP16 when the program has a Float16 CB, `fp16_src`), the phases a MathFidelity value
// runs, and one product as the phases sum it.
void narrow_to_src(float* tile, uint8_t cb_fmt, bool fp32_acc, bool fp16_src = false);
// FP32 -> FP16 as the unpacker writes SrcA/SrcB (numerics.cpp): the FP16 value as a float
float fp32_to_fp16_src(float v);
uint32_t fidelity_phases(int math_fidelity);
float fidelity_mul(float a, float b, uint32_t phases);
// matmul_tiles' operand (a 32x32 tile, face layout, already in SrcA/SrcB) as the phases use it, row-major:
// in1 through SrcA (`srca`, optionally transposed) or in0 through SrcB; `lo`, written at HiFi3 only, is the
// part of the operand its skipped phase would multiply (matmul.cpp sums hi x hi - lo x lo).
void matmul_operand(const float* tile, bool srca, uint32_t phases, bool transpose, float* hi, float* lo);

// Element (r, c) of a tile sits at face (r/16, c/16), row r%16, column c%16 (faces row-major).
inline uint32_t face_index(uint32_t r, uint32_t c) {
    constexpr uint32_t faces_per_row = hw::kTile / hw::kFace;
    return ((r / hw::kFace) * faces_per_row + c / hw::kFace) * hw::kFaceElems + (r % hw::kFace) * hw::kFace +
           c % hw::kFace;
}

// Zero-filled storage from calloc, whose large blocks are fresh pages the OS maps (zeroed) on first touch: a
// core's L1 and a task's stack cost only the pages a run uses. resize() value-initialises through construct(p),
// which leaves calloc's zero alone; every other construct is the usual placement new.
template <typename T>
struct ZeroedAllocator {
    using value_type = T;
    ZeroedAllocator() = default;
    template <typename U>
    ZeroedAllocator(const ZeroedAllocator<U>&) {}
    T* allocate(size_t n) {
        void* p = std::calloc(n, sizeof(T));
        if (p == nullptr) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    template <typename U>
    void construct(U*) {}
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    bool operator==(const ZeroedAllocator&) const { return true; }
    bool operator!=(const ZeroedAllocator&) const { return false; }
};

// ---- device model --------------------------------------------------------------------------------------
const ArchInfo* find_arch(const std::string& name);   // nullptr when the table has no such arch

struct Buffer {
    uint32_t base = 0;
    uint64_t size = 0;
    uint32_t page_size = 0;
    uint32_t aligned_page = 0;
    uint32_t num_pages = 0;
    bool dram = true;
    int device = 0;       // the device (chip) whose DRAM or L1 holds the pages
    // The data format of the bytes in the pages (a tt::DataFormat value), or -1 while unknown: what the host wrote
    // (TT_SIM_BUFFER_FORMATS, in creation order: the runtime tilized the tensor in that format) or what the first
    // kernel wrote. A CB the NoC fills holds the format of the pages it receives.
    int fmt = -1;
};

struct CBState {
    bool configured = false;
    uint8_t fmt = 0;
    uint32_t base = 0, page_size = 0, num_pages = 0;
    uint32_t received = 0, acked = 0;      // pages pushed / popped since the program started
    uint32_t wr_ptr = 0, rd_ptr = 0;       // page indices in the ring
    uint32_t reserved = 0, waited = 0, packed = 0;
    uint32_t high_water = 0;
    // Per ring page, for data-movement kernels: written (by a NoC read, an inline write or a multicast landing)
    // since it was reserved. A data-movement kernel may push only written pages (multicast receivers).
    std::vector<uint8_t> filled;
    // Per ring page: written since the CB was created (by a pack_tile, or pushed by a data-movement kernel). A pack
    // with L1 accumulation adds to the page's bytes, so it must land on a written page.
    std::vector<uint8_t> written;
};

struct Counters {
    uint64_t dram_read_bytes = 0, dram_write_bytes = 0, noc_read_bytes = 0, noc_write_bytes = 0;
    uint64_t pages_read = 0, pages_written = 0, matmul_tiles = 0, tile_ops = 0, packs = 0;
    uint64_t reduce_tiles = 0;   // reduce_tile calls (also counted in tile_ops)
    // noc_async_write_multicast: bytes the sender injects (once per call) and bytes delivered (x num_dests)
    uint64_t mcast_bytes = 0, mcast_dest_bytes = 0;
    uint64_t semaphore_ops = 0;  // noc_semaphore_inc, noc_semaphore_set_multicast calls
};

// A NoC transfer issued but not yet landed (noc_async.cpp). Reads land in L1 [l1_lo, l1_hi); writes read L1
// [l1_lo, l1_hi) and land in DRAM/L1 buffer `buffer` page `page` at `offset`.
struct Task;
struct PendingTransfer {
    const Task* owner = nullptr;
    bool write = false;
    uint32_t l1_lo = 0, l1_hi = 0, line = 0;
    size_t buffer = 0;
    uint32_t page = 0, offset = 0;
    std::vector<uint8_t> data;     // the bytes that will land (empty in protocol-only runs)
    // noc_inline_dw_write: `data` lands in this core's L1 at l1_lo (bytes whose bit in byte_enable is set);
    // l1_lo/l1_hi is then the destination, not a source.
    bool inline_l1 = false;
    uint8_t byte_enable = 0xF;
    // noc_async_write_multicast (multicast.cpp): reads this core's L1 [l1_lo, l1_hi) and lands at `dst_addr` of
    // every core of the rectangle [x0, x1] x [y0, y1] but the sender.
    bool mcast = false;
    uint32_t x0 = 0, y0 = 0, x1 = 0, y1 = 0, dst_addr = 0;
};

struct Core {
    uint32_t x = 0, y = 0;
    int device = -1;   // the chip (index into Sim::devices) the core belongs to
    std::vector<uint8_t, ZeroedAllocator<uint8_t>> l1;   // zero at program start
    std::array<CBState, kMaxCBs> cbs;
    Counters counters;
    std::vector<uint32_t> semaphores;
    std::vector<PendingTransfer> pending;   // NoC transfers in flight, in issue order
};

enum class Role { Reader, Writer, Compute };
const char* role_name(Role r);

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
    std::vector<float, ZeroedAllocator<float>> dst;   // `capacity` tiles, zero; allocated for compute tasks only
    uint32_t dirty = 0;   // bit i: DST tile i was handed out (dst_tile) since tile_regs_acquire() last zeroed it
    enum class Phase { Idle, Math, Committed, Packing } phase = Phase::Idle;
    bool started = false;
    int srca = -1, srcb = -1, pack = -1;   // CB whose format the unpacker / packer is configured for
    uint8_t dst_fmt = kFloat32;           // rounding format of DST in 16-bit mode
    uint32_t fidelity_phases = 4;         // MathFidelity: LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4 phases
    uint64_t unpack_to_dest = 0;          // bit i: unpack_to_dest_mode[i] is UnpackToDestFp32
    uint32_t matmul_transpose = 0;
    // DST tiles written since tile_regs_acquire(): pack release leaves DST undefined on hardware (ZEROACC), which
    // FPU ops read as their identity and the packer as 0, but SFPU loads of it are undefined behaviour.
    std::array<bool, 16> defined{};
    // DST tiles holding 32-bit integers (each float of the tile carries an integer's bits): copy_tile of a UInt8 CB
    // and typecast_tile<..., UInt8> write them, typecast_tile<UInt8, ...> makes them floats again. SFPU float ops on
    // them, and packs of them into float CBs (or of floats into a UInt8 CB), are refused.
    std::array<bool, 16> integer{};
    // Between reduce_init and reduce_uninit: the reduce configured, and the packer's edge mask (only the
    // reduce's result positions are packed, 0 elsewhere).
    bool reduce_active = false;
    ReducePool reduce_pool = ReducePool::Sum;
    ReduceAxis reduce_axis = ReduceAxis::Row;
    uint32_t reduce_line = 0;
    // pack_reconfig_l1_acc(1): pack_tile adds DST to the tile already in L1 (in the CB's format) until (0)
    bool l1_acc = false;
    // matmul_block_init's (ct, rt, kt); all 0 when the last matmul init was matmul_init
    uint32_t mm_ct = 0, mm_rt = 0, mm_kt = 0;
    // sfpu_reduce_init<pool, format> configured the SFPU (its replay buffer and constants) for that pool and format;
    // -1 when no init, or another SFPU init ran since (it reprograms the SFPU)
    int sfpu_reduce_pool = -1;
    uint8_t sfpu_reduce_fmt = 0;
    // The program has a Float16 CB on this core: the 0.81 library then unpacks Float32 CBs to FP16, not TF32
    // (TT_KERNEL_PATTERNS.md 5b; set at compute_kernel_hw_startup)
    bool fp16_src = false;
};

struct Task {
    Core* core = nullptr;
    KernelImage* kernel = nullptr;
    Role role = Role::Reader;
    ucontext_t ctx{};
    std::vector<char, ZeroedAllocator<char>> stack;
    bool done = false;
    std::string blocked_on;              // description of the blocking call, empty when runnable
    uint32_t blocked_line = 0;
    uint32_t cur_line = 0;               // the kernel source's line of its last API call (call_site, sanitizer.cpp)
    ComputeState compute;
};

struct Program {
    std::vector<std::unique_ptr<KernelImage>> kernels;
    std::vector<host::CBSpec> cbs;
    std::vector<std::pair<std::vector<host::Range>, uint32_t>> semaphores;
};

struct Device {
    ArchInfo arch = hw::kArchs[0];
    int arch_index = 0;
    // each bank's bytes, zero until written; buffer_create reserves a bank's whole extent, so writes never move it
    std::vector<std::vector<uint8_t, ZeroedAllocator<uint8_t>>> dram_banks, l1_banks;
    uint32_t dram_next = kDramBase, l1_next = kL1BufferBase;
    bool open = false;
    std::vector<std::unique_ptr<Core>> run_cores;   // cores of the last run, for the report
    double last_run_seconds = 0.0, compile_seconds = 0.0;
    uint64_t scheduler_switches = 0;
    std::string report_path;
    // Its place in a mesh (MeshDevice::create): chip (mesh_row, mesh_col) of mesh_rows x mesh_cols; 1x1 for a unit
    // mesh. Bytes the host wrote to / read from its buffers (EnqueueWrite/ReadMeshBuffer).
    uint32_t mesh_row = 0, mesh_col = 0, mesh_rows = 1, mesh_cols = 1;
    uint64_t host_write_bytes = 0, host_read_bytes = 0;
    int buffers_created = 0;   // its buffers so far: the index of its next one in TT_SIM_BUFFER_FORMATS
};

struct Sim {
    std::vector<std::unique_ptr<Device>> devices;
    std::vector<Buffer> buffers;
    std::vector<std::unique_ptr<Program>> programs;
    int running = -1;          // the device whose program is being set up (program_run_all), -1 otherwise
    Task* current = nullptr;
    ucontext_t scheduler_ctx{};
    uint64_t progress = 0;
    bool protocol_only = false;
};

Sim& sim();
Task& cur();   // the running task; an error outside a kernel
Device& running_device();   // the running task's chip (the device being set up, else the last opened one)
Device& device_of(const Buffer& b);
std::string chip_name(const Device& dev);   // "chip (r, c) " of a multi-chip mesh, "" for a unit mesh
int open_device(uint32_t mesh_row, uint32_t mesh_col, uint32_t mesh_rows, uint32_t mesh_cols);   // host.cpp

// ---- sanitizer (sanitizer.cpp) -------------------------------------------------------------------------
std::string where(const Task& t, uint32_t line);
std::string line_text(uint32_t site);   // a call site: `line N` of the kernel, or `header.h:N` of a header it includes
std::string deadlock_report(const std::vector<Task*>& tasks);
void check_end_of_run(const Device& dev, const std::vector<std::unique_ptr<Task>>& tasks);

// ---- scheduling (scheduler.cpp) ------------------------------------------------------------------------
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
bool in_ranges(const std::vector<host::Range>& ranges, uint32_t x, uint32_t y);

// ---- circular buffers (cb.cpp) -------------------------------------------------------------------------
CBState& cb_of(uint32_t cb, uint32_t line);
void configure_cb(const Device& dev, Core& core, const host::CBSpec& spec, uint32_t& next);

// ---- L1, NoC and DRAM (noc.cpp) ------------------------------------------------------------------------
uint8_t* l1_ptr(Core& core, uint32_t addr, uint32_t size, uint32_t line);
uint8_t* page_ptr(Buffer& b, uint32_t page, uint32_t offset, uint32_t size, uint32_t line, const char* op);

// ---- asynchronous NoC (noc_async.cpp) ------------------------------------------------------------------
// Transfers land at the matching barrier (strict, the default), or earlier at points a seed chooses
// (TT_SIM_NOC_SEED=N): never before issue, always by the barrier. A read poisons its L1 destination at issue.
void noc_issue(Task& t, PendingTransfer&& transfer, uint32_t line);
void noc_land(Task& t, bool writes);       // the barrier: land every read (or write) of `t`
void noc_maybe_land(Task& t);              // seeded mode: land some transfers early
// A read (write = false) landing in, or a write (write = true) reading, L1 [lo, hi); inline writes landing in
// [lo, hi) count as writes.
const PendingTransfer* noc_pending_overlap(const Core& core, bool write, uint32_t lo, uint32_t hi);
const PendingTransfer* noc_pending_inline_overlap(const Core& core, uint32_t lo, uint32_t hi);
bool noc_has_pending(const Task& t, bool write);
uint64_t bank_address(const Buffer& b, uint32_t page, uint32_t offset);

// ---- semaphores and multicast (multicast.cpp) ------------------------------------------------------------
// Semaphore `id` of a core is the L1 word at semaphore_base + id * L1 alignment, set to its initial value when
// the program starts.
void init_semaphores(const Device& dev, const Program& program, Core& core);
void land_multicast(Core& sender, const PendingTransfer& p);
Core* find_core(uint32_t x, uint32_t y);   // a core of the running program, nullptr if none
// CB pages of `core` reserved and overlapping L1 [lo, hi) are marked written (see CBState::filled).
void mark_filled(Core& core, uint32_t lo, uint32_t hi);
CBState* reserved_cb_covering(Core& core, uint32_t addr, uint32_t size);

// ---- kernel JIT (jit.cpp) ------------------------------------------------------------------------------
void load_kernels(Program& program, Device& dev);

// ---- counters (counters.cpp) ---------------------------------------------------------------------------
void write_report(Device& dev);
// The report's per-core list and totals of `cores` (JSON, `indent` before each line), summed into `total`.
void write_cores(std::ostream& f, const std::vector<const Core*>& cores, const char* indent, Counters& total,
                 bool with_chip, const Device* dev);
void write_totals(std::ostream& f, const Counters& total);
void add_counters(Counters& total, const Counters& c);

}  // namespace tt_sim
