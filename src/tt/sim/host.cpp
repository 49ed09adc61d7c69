// tt-sim: host API objects: device, buffers' host side, programs, kernels, CB and semaphore specs, runtime args.

#include <sys/stat.h>
#include <cstring>

#include "sim_internal.hpp"

namespace tt_sim {

const ArchInfo* find_arch(const std::string& name) {
    for (const ArchInfo& a : hw::kArchs) {
        if (name == a.name) return &a;
    }
    return nullptr;
}

bool in_ranges(const std::vector<host::Range>& ranges, uint32_t x, uint32_t y) {
    for (const auto& r : ranges) {
        if (x >= r.x0 && x <= r.x1 && y >= r.y0 && y <= r.y1) return true;
    }
    return false;
}

int open_device(uint32_t mesh_row, uint32_t mesh_col, uint32_t mesh_rows, uint32_t mesh_cols) {
    auto dev = std::make_unique<Device>();
    dev->mesh_row = mesh_row;
    dev->mesh_col = mesh_col;
    dev->mesh_rows = mesh_rows;
    dev->mesh_cols = mesh_cols;
    const std::string arch = env_or("TT_SIM_ARCH", hw::kDefaultArch);
    const ArchInfo* info = find_arch(arch);
    if (info == nullptr) die("TT_SIM_ARCH=" + arch + ": not an arch of the hardware table (device.py)");
    dev->arch = *info;
    dev->arch_index = static_cast<int>(info - hw::kArchs);
    dev->dram_banks.assign(dev->arch.dram_banks, {});
    dev->l1_banks.assign(dev->arch.grid_x * dev->arch.grid_y, {});
    dev->open = true;
    dev->report_path = env_or("TT_SIM_REPORT", "");
    sim().protocol_only = env_or("TT_SIM_PROTOCOL_ONLY", "0") == "1";
    sim().devices.push_back(std::move(dev));
    return static_cast<int>(sim().devices.size() - 1);
}

namespace host {

int device_open(int device_id) {
    if (device_id != 0) die(format("MeshDevice::create_unit_mesh(%d): the emulator has one device, id 0", device_id));
    return open_device(0, 0, 1, 1);
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
int device_arch(int device) { return sim().devices.at(static_cast<size_t>(device))->arch_index; }

int program_create() {
    sim().programs.push_back(std::make_unique<Program>());
    return static_cast<int>(sim().programs.size() - 1);
}

uint32_t program_add_kernel(int program, const KernelSpec& spec) {
    Program& p = *sim().programs.at(static_cast<size_t>(program));
    for (size_t cb = 0; cb < spec.unpack_to_dest.size(); ++cb) {
        if (!spec.unpack_to_dest[cb]) continue;
        if (cb >= kMaxCBs) die(format("ComputeConfig of %s: unpack_to_dest_mode has %zu entries, more than the %u CBs",
                                      spec.path.c_str(), spec.unpack_to_dest.size(), kMaxCBs));
        if (!spec.fp32_dest_acc_en) {
            die(format("ComputeConfig of %s: unpack_to_dest_mode[%zu] is UnpackToDestFp32 without fp32_dest_acc_en: "
                       "unpacking fp32 data to DST needs 32-bit DST (set fp32_dest_acc_en = true)", spec.path.c_str(),
                       cb));
        }
    }
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
    const uint32_t max_args = sim().devices.empty() ? hw::kArchs[0].max_runtime_args
                                                    : sim().devices.back()->arch.max_runtime_args;
    if (count > max_args) die(format("SetRuntimeArgs: %zu runtime args (at most %u)", count, max_args));
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
}  // namespace host

}  // namespace tt_sim
