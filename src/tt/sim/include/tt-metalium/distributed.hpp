// tt-sim: TT-Metalium 0.81 distributed (mesh) host API, for the unit mesh the generator uses.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "tt-metalium/host_api.hpp"
#include "tt_sim/host_internal.hpp"

namespace tt::tt_metal::distributed {

struct MeshShape {
    uint32_t rows = 1;
    uint32_t cols = 1;
};

class MeshCoordinateRange {
public:
    explicit MeshCoordinateRange(const MeshShape& shape) : shape_(shape) {}
    const MeshShape& shape() const { return shape_; }

private:
    MeshShape shape_;
};

class MeshDevice;

class MeshCommandQueue {
public:
    explicit MeshCommandQueue(int device) : device_(device) {}
    int sim_device() const { return device_; }

private:
    int device_;
};

class MeshDevice {
public:
    explicit MeshDevice(int device) : device_(device), cq_(device) {}
    static std::shared_ptr<MeshDevice> create_unit_mesh(int device_id, std::size_t l1_small_size = 0,
                                                        std::size_t trace_region_size = 0,
                                                        std::size_t num_command_queues = 1) {
        (void)l1_small_size;
        (void)trace_region_size;
        (void)num_command_queues;
        return std::make_shared<MeshDevice>(tt_sim::host::device_open(device_id));
    }
    MeshCommandQueue& mesh_command_queue(std::optional<uint8_t> cq_id = std::nullopt) {
        (void)cq_id;
        return cq_;
    }
    MeshShape shape() const { return MeshShape{1, 1}; }
    CoreCoord compute_with_storage_grid_size() const {
        return CoreCoord{tt_sim::host::device_grid_x(device_), tt_sim::host::device_grid_y(device_)};
    }
    CoreCoord worker_core_from_logical_core(const CoreCoord& logical) const { return logical; }
    uint32_t l1_size_per_core() const { return tt_sim::host::device_l1_size(device_); }
    uint32_t num_dram_channels() const { return tt_sim::host::device_dram_banks(device_); }
    bool close() {
        if (device_ >= 0) {
            tt_sim::host::device_close(device_);
            device_ = -1;
        }
        return true;
    }
    int sim_device() const { return device_; }

private:
    int device_;
    MeshCommandQueue cq_;
};

struct DeviceLocalBufferConfig {
    uint64_t page_size = 0;
    BufferType buffer_type = BufferType::DRAM;
    bool bottom_up = false;
};

struct ReplicatedBufferConfig {
    uint64_t size = 0;
};

class MeshBuffer {
public:
    MeshBuffer(int buffer, MeshDevice* device) : buffer_(buffer), device_(device) {}
    static std::shared_ptr<MeshBuffer> create(const ReplicatedBufferConfig& mesh_config,
                                              const DeviceLocalBufferConfig& device_config, MeshDevice* mesh_device) {
        if (device_config.buffer_type != BufferType::DRAM && device_config.buffer_type != BufferType::L1) {
            throw std::invalid_argument("tt-sim: only DRAM and L1 interleaved buffers are emulated");
        }
        const int id = tt_sim::host::buffer_create(mesh_device->sim_device(), mesh_config.size,
                                                   static_cast<uint32_t>(device_config.page_size),
                                                   device_config.buffer_type == BufferType::DRAM);
        return std::make_shared<MeshBuffer>(id, mesh_device);
    }
    uint32_t address() const { return tt_sim::host::buffer_address(buffer_); }
    uint64_t size() const { return tt_sim::host::buffer_size(buffer_); }
    uint32_t page_size() const { return tt_sim::host::buffer_page_size(buffer_); }
    uint32_t num_pages() const { return static_cast<uint32_t>(size() / page_size()); }
    bool is_dram() const { return tt_sim::host::buffer_is_dram(buffer_); }
    int sim_buffer() const { return buffer_; }

private:
    int buffer_;
    MeshDevice* device_;
};

class MeshWorkload {
public:
    void add_program(const MeshCoordinateRange& range, Program&& program) {
        (void)range;
        programs_.push_back(std::move(program));
    }
    const std::vector<Program>& programs() const { return programs_; }

private:
    std::vector<Program> programs_;
};

template <typename T>
void EnqueueWriteMeshBuffer(MeshCommandQueue& cq, std::shared_ptr<MeshBuffer>& buffer, const std::vector<T>& src,
                            bool blocking = false) {
    (void)cq;
    (void)blocking;
    tt_sim::host::buffer_write(buffer->sim_buffer(), src.data(), src.size() * sizeof(T));
}

template <typename T>
void EnqueueReadMeshBuffer(MeshCommandQueue& cq, std::vector<T>& dst, std::shared_ptr<MeshBuffer>& buffer,
                           bool blocking = true) {
    (void)cq;
    (void)blocking;
    dst.resize(buffer->size() / sizeof(T));
    tt_sim::host::buffer_read(buffer->sim_buffer(), dst.data(), dst.size() * sizeof(T));
}

inline void EnqueueMeshWorkload(MeshCommandQueue& cq, MeshWorkload& workload, bool blocking) {
    (void)blocking;
    for (const Program& program : workload.programs()) {
        tt_sim::host::program_run(cq.sim_device(), program.sim_id());
    }
}

inline void Finish(MeshCommandQueue& cq) { tt_sim::host::finish(cq.sim_device()); }

}  // namespace tt::tt_metal::distributed
