// tt-sim: the TT-Metalium 0.81 host API subset the generator emits (host_api.hpp), over the emulator.
// Types and signatures follow the SDK so that the same generated host program compiles against either.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tt_sim/host_internal.hpp"
#include "tt_sim/hw_constants.hpp"

namespace tt {

enum class DataFormat : uint8_t { TT_SIM_DATA_FORMAT_ENUMERATORS };

enum CBIndex : uint8_t {
    c_0 = 0, c_1, c_2, c_3, c_4, c_5, c_6, c_7, c_8, c_9, c_10, c_11, c_12, c_13, c_14, c_15,
    c_16, c_17, c_18, c_19, c_20, c_21, c_22, c_23, c_24, c_25, c_26, c_27, c_28, c_29, c_30, c_31
};

struct xy_pair {
    std::size_t x = 0;
    std::size_t y = 0;
    bool operator==(const xy_pair& o) const { return x == o.x && y == o.y; }
};

namespace tt_metal {

using CoreCoord = tt::xy_pair;

struct CoreRange {
    CoreCoord start_coord;
    CoreCoord end_coord;
    CoreRange(CoreCoord core) : start_coord(core), end_coord(core) {}
    CoreRange(CoreCoord start, CoreCoord end) : start_coord(start), end_coord(end) {}
};

class CoreRangeSet {
public:
    CoreRangeSet() = default;
    CoreRangeSet(const CoreRange& range) : ranges_{range} {}
    CoreRangeSet(const std::vector<CoreRange>& ranges) : ranges_(ranges) {}
    const std::vector<CoreRange>& ranges() const { return ranges_; }

private:
    std::vector<CoreRange> ranges_;
};

enum class BufferType { DRAM, L1, SYSTEM_MEMORY, L1_SMALL, TRACE };
enum class MathFidelity : uint8_t { TT_SIM_MATH_FIDELITY_ENUMERATORS, Invalid = 0xff };
enum class DataMovementProcessor { RISCV_0 = 0, RISCV_1 = 1 };
enum NOC : uint8_t { RISCV_0_default = 0, RISCV_1_default = 1, NOC_0 = 0, NOC_1 = 1 };
enum NOC_MODE : uint8_t { DM_DEDICATED_NOC = 0, DM_DYNAMIC_NOC = 1 };
enum class KernelBuildOptLevel : uint8_t { O1, O2, O3, O0, Os, Ofast, Oz };
enum class UnpackToDestMode : uint8_t { UnpackToDestFp32, Default };   // the SDK's order

struct DataMovementConfig {
    DataMovementProcessor processor = DataMovementProcessor::RISCV_0;
    NOC noc = NOC::RISCV_0_default;
    NOC_MODE noc_mode = NOC_MODE::DM_DEDICATED_NOC;
    std::vector<uint32_t> compile_args;
    std::map<std::string, std::string> defines;
    std::unordered_map<std::string, uint32_t> named_compile_args;
    KernelBuildOptLevel opt_level = KernelBuildOptLevel::O2;
};

struct ComputeConfig {
    MathFidelity math_fidelity = MathFidelity::HiFi4;
    bool fp32_dest_acc_en = false;
    bool dst_full_sync_en = false;
    std::vector<UnpackToDestMode> unpack_to_dest_mode;
    bool bfp8_pack_precise = false;
    bool math_approx_mode = false;
    std::vector<uint32_t> compile_args;
    std::map<std::string, std::string> defines;
    std::unordered_map<std::string, uint32_t> named_compile_args;
    KernelBuildOptLevel opt_level = KernelBuildOptLevel::O3;
};

using KernelHandle = uint32_t;
using CBHandle = uint32_t;

class Program {
public:
    Program() : id_(tt_sim::host::program_create()) {}
    int sim_id() const { return id_; }

private:
    int id_;
};

inline Program CreateProgram() { return Program(); }

namespace sim_detail {
inline std::vector<tt_sim::host::Range> ranges_of(const std::variant<CoreCoord, CoreRange, CoreRangeSet>& cores) {
    std::vector<tt_sim::host::Range> out;
    auto add = [&](const CoreRange& r) {
        out.push_back({static_cast<uint32_t>(r.start_coord.x), static_cast<uint32_t>(r.start_coord.y),
                       static_cast<uint32_t>(r.end_coord.x), static_cast<uint32_t>(r.end_coord.y)});
    };
    if (const auto* c = std::get_if<CoreCoord>(&cores)) {
        add(CoreRange(*c));
    } else if (const auto* r = std::get_if<CoreRange>(&cores)) {
        add(*r);
    } else {
        for (const auto& r : std::get<CoreRangeSet>(cores).ranges()) {
            add(r);
        }
    }
    return out;
}
}  // namespace sim_detail

class CircularBufferConfig {
public:
    CircularBufferConfig(uint32_t total_size, const std::map<uint8_t, tt::DataFormat>& data_format_spec)
        : total_size_(total_size), formats_(data_format_spec) {}
    CircularBufferConfig& set_page_size(uint8_t buffer_index, uint32_t page_size) {
        page_sizes_[buffer_index] = page_size;
        return *this;
    }
    uint32_t total_size() const { return total_size_; }
    const std::map<uint8_t, tt::DataFormat>& data_formats() const { return formats_; }
    const std::map<uint8_t, uint32_t>& page_sizes() const { return page_sizes_; }

private:
    uint32_t total_size_;
    std::map<uint8_t, tt::DataFormat> formats_;
    std::map<uint8_t, uint32_t> page_sizes_;
};

inline CBHandle CreateCircularBuffer(Program& program, const std::variant<CoreCoord, CoreRange, CoreRangeSet>& cores,
                                     const CircularBufferConfig& config) {
    tt_sim::host::CBSpec spec;
    spec.cores = sim_detail::ranges_of(cores);
    spec.total_size = config.total_size();
    for (const auto& [index, format] : config.data_formats()) {
        spec.formats.emplace_back(index, static_cast<uint8_t>(format));
    }
    for (const auto& [index, size] : config.page_sizes()) {
        spec.page_sizes.emplace_back(index, size);
    }
    return tt_sim::host::program_add_cb(program.sim_id(), spec);
}

inline KernelHandle CreateKernel(Program& program, const std::string& file_name,
                                 const std::variant<CoreCoord, CoreRange, CoreRangeSet>& core_spec,
                                 const std::variant<DataMovementConfig, ComputeConfig>& config) {
    tt_sim::host::KernelSpec spec;
    spec.path = file_name;
    spec.cores = sim_detail::ranges_of(core_spec);
    if (const auto* dm = std::get_if<DataMovementConfig>(&config)) {
        spec.processor = static_cast<int>(dm->processor);
        spec.noc = static_cast<int>(dm->noc);
        spec.compile_args = dm->compile_args;
        spec.defines.assign(dm->defines.begin(), dm->defines.end());
    } else {
        const auto& c = std::get<ComputeConfig>(config);
        spec.compute = true;
        spec.math_fidelity = static_cast<int>(c.math_fidelity);
        spec.fp32_dest_acc_en = c.fp32_dest_acc_en;
        spec.dst_full_sync_en = c.dst_full_sync_en;
        spec.math_approx_mode = c.math_approx_mode;
        for (const UnpackToDestMode m : c.unpack_to_dest_mode) {
            spec.unpack_to_dest.push_back(m == UnpackToDestMode::UnpackToDestFp32 ? 1 : 0);
        }
        spec.compile_args = c.compile_args;
        spec.defines.assign(c.defines.begin(), c.defines.end());
    }
    return tt_sim::host::program_add_kernel(program.sim_id(), spec);
}

inline void SetRuntimeArgs(const Program& program, KernelHandle kernel,
                           const std::variant<CoreCoord, CoreRange, CoreRangeSet>& core_spec,
                           std::span<const uint32_t> runtime_args) {
    tt_sim::host::program_set_runtime_args(program.sim_id(), kernel, sim_detail::ranges_of(core_spec),
                                           runtime_args.data(), runtime_args.size());
}

inline void SetRuntimeArgs(const Program& program, KernelHandle kernel,
                           const std::variant<CoreCoord, CoreRange, CoreRangeSet>& core_spec,
                           std::initializer_list<uint32_t> runtime_args) {
    SetRuntimeArgs(program, kernel, core_spec, std::span<const uint32_t>(runtime_args.begin(), runtime_args.size()));
}

inline void SetCommonRuntimeArgs(const Program& program, KernelHandle kernel, std::span<const uint32_t> args) {
    tt_sim::host::program_set_common_runtime_args(program.sim_id(), kernel, args.data(), args.size());
}

inline uint32_t CreateSemaphore(Program& program, const std::variant<CoreRange, CoreRangeSet>& core_spec,
                                uint32_t initial_value) {
    std::variant<CoreCoord, CoreRange, CoreRangeSet> cores = CoreRangeSet();
    if (const auto* r = std::get_if<CoreRange>(&core_spec)) {
        cores = *r;
    } else {
        cores = std::get<CoreRangeSet>(core_spec);
    }
    return tt_sim::host::program_add_semaphore(program.sim_id(), sim_detail::ranges_of(cores), initial_value);
}

}  // namespace tt_metal
}  // namespace tt

using tt::tt_metal::CoreCoord;
