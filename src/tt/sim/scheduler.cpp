// tt-sim: a CPU emulator of the TT-Metalium 0.81 API subset that tilelang-tt generates.
//
// Execution model
// * A program places up to three kernels on each core: two data-movement kernels and one compute kernel.
//   Each (core, kernel) pair is a cooperative task with its own stack (ucontext). One scheduler thread runs
//   the tasks round-robin in a fixed order (the tasks of every chip of a mesh workload together); a task runs
//   until it blocks on a circular buffer (or finishes), so every run is deterministic and bit-identical.
// * Kernels are compiled at run time with the host C++ compiler into shared objects (one per kernel and
//   compile-time configuration), cached on disk by content hash, and loaded with dlopen.
// * DRAM is a set of banks; a buffer's pages are interleaved round-robin over them (page p in bank p % N at
//   base + (p / N) * aligned_page). Each core has an L1 of the device's size holding its circular buffers.
// * Tiles keep TT's layout (32x32 = four 16x16 faces, faces row-major) in every buffer and CB.
//
// Numeric model (see docs/emulator.md): a Float32 CB reaches SrcA/SrcB as TF32 (fp32_dest_acc_en) or BF16, and
// DST exactly only through unpack-to-DEST (fidelity.cpp); multiplying FPU ops use the operand bits of their
// math fidelity phases; DST holds fp32 values, rounded after every math op to 16 bits unless fp32_dest_acc_en;
// SFPU functions use libm in fp32; pack to bf16 rounds to nearest, ties away from zero (numerics.cpp).
//
// This file: tasks and the cooperative scheduler: one ucontext task per (core, kernel), round-robin, deadlock detection.

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "sim_internal.hpp"

namespace tt_sim {

namespace {

void task_trampoline(unsigned lo, unsigned hi) {
    Task* t = reinterpret_cast<Task*>((static_cast<uintptr_t>(hi) << 32) | lo);
    t->kernel->entry();
    t->done = true;
    sim().progress++;
    swapcontext(&t->ctx, &sim().scheduler_ctx);
}

}  // namespace

Sim& sim() {
    static Sim instance;
    return instance;
}

Device& running_device() {
    Sim& s = sim();
    if (s.current != nullptr) return *s.devices.at(static_cast<size_t>(s.current->core->device));
    if (s.running >= 0) return *s.devices.at(static_cast<size_t>(s.running));
    if (s.devices.empty()) die("no device is open (MeshDevice::create_unit_mesh / MeshDevice::create first)");
    return *s.devices.back();
}

Device& device_of(const Buffer& b) { return *sim().devices.at(static_cast<size_t>(b.device)); }

std::string chip_name(const Device& dev) {
    if (dev.mesh_rows * dev.mesh_cols == 1) return "";
    return format("chip (%u, %u) ", dev.mesh_row, dev.mesh_col);
}

Task& cur() {
    Task* t = sim().current;
    if (t == nullptr) die("a kernel API function was called outside a running kernel");
    return *t;
}

namespace host {

namespace {

// One program on one chip, made ready to run: its cores (L1 and CBs configured, semaphores set) and one task per
// (kernel, core).
std::vector<std::unique_ptr<Task>> prepare_run(int device, int program) {
    Device& dev = *sim().devices.at(static_cast<size_t>(device));
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    load_kernels(p, dev);
    sim().running = device;

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
        core->device = device;
        core->l1.resize(dev.arch.l1_bytes);   // zero (ZeroedAllocator: pages are mapped as the run touches them)
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
            configure_cb(dev, core, spec, l1_next.emplace(&core, dev.arch.l1_unreserved_base).first->second);
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
            t->compute.fidelity_phases = fidelity_phases(k->spec.math_fidelity);
            for (size_t cb = 0; cb < k->spec.unpack_to_dest.size() && cb < kMaxCBs; ++cb) {
                if (k->spec.unpack_to_dest[cb]) t->compute.unpack_to_dest |= uint64_t{1} << cb;
            }
            t->compute.capacity = (k->spec.fp32_dest_acc_en ? dev.arch.dst_tiles_fp32 : dev.arch.dst_tiles) *
                                   (k->spec.dst_full_sync_en ? 2u : 1u);
            if (k->spec.compute) t->compute.dst.resize(size_t{t->compute.capacity} * kTileElems);   // zero (calloc)
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

    for (const auto& core : dev.run_cores) init_semaphores(dev, p, *core);

    sim().running = -1;
    return tasks;
}

}  // namespace

void program_run_all(const std::vector<std::pair<int, int>>& runs) {
    // A chip runs one program at a time: a second program for a chip already in `runs` waits for the next wave.
    std::vector<std::pair<int, int>> wave, later;
    for (const auto& run : runs) {
        bool busy = false;
        for (const auto& w : wave) busy = busy || w.first == run.first;
        (busy ? later : wave).push_back(run);
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<std::unique_ptr<Task>>> per_chip;
    std::vector<Task*> tasks;   // every chip's tasks, scheduled together: the chips run concurrently
    for (const auto& [device, program] : wave) {
        per_chip.push_back(prepare_run(device, program));
        for (auto& t : per_chip.back()) tasks.push_back(t.get());
    }
    const double timeout = std::stod(env_or("TT_SIM_TIMEOUT", "300"));
    size_t remaining = tasks.size();
    while (remaining > 0) {
        const uint64_t before = sim().progress;
        for (Task* t : tasks) {
            if (t->done) continue;
            sim().current = t;
            swapcontext(&sim().scheduler_ctx, &t->ctx);
            sim().current = nullptr;
            sim().devices.at(static_cast<size_t>(t->core->device))->scheduler_switches++;
            if (t->done) remaining--;
        }
        if (remaining > 0 && sim().progress == before) die(deadlock_report(tasks));
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout) {
            die(format("the run exceeded TT_SIM_TIMEOUT=%.0f s; ", timeout) + deadlock_report(tasks));
        }
    }

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t k = 0; k < wave.size(); ++k) {
        Device& dev = *sim().devices.at(static_cast<size_t>(wave[k].first));
        check_end_of_run(dev, per_chip[k]);
        dev.last_run_seconds = seconds;
    }
    if (!later.empty()) program_run_all(later);
}

void program_run(int device, int program) { program_run_all({{device, program}}); }

void finish(int device) { (void)device; }
}  // namespace host

}  // namespace tt_sim
