// tt-sim: TT-Metalium 0.81 distributed (mesh) host API: a unit mesh (MeshDevice::create_unit_mesh) or a mesh of
// chips (MeshDevice::create(MeshDeviceConfig(MeshShape(rows, cols)))), replicated and sharded MeshBuffers, a
// MeshWorkload of programs per MeshCoordinateRange.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tt-metalium/host_api.hpp"
#include "tt_sim/host_internal.hpp"

namespace tt::tt_metal {

// [S] Shape2D(unsigned long, unsigned long), height(), width()
class Shape2D {
public:
    Shape2D(std::size_t height, std::size_t width) : height_(height), width_(width) {}
    std::size_t height() const { return height_; }
    std::size_t width() const { return width_; }

private:
    std::size_t height_;
    std::size_t width_;
};

enum class ShardOrientation { ROW_MAJOR = 0, COL_MAJOR };   // [W api/tt-metalium/buffer_types.hpp]

namespace distributed {

class MeshShape {
public:
    MeshShape(uint32_t rows, uint32_t cols) : rows_(rows), cols_(cols) {}
    uint32_t num_rows() const { return rows_; }
    uint32_t num_cols() const { return cols_; }
    std::size_t mesh_size() const { return static_cast<std::size_t>(rows_) * cols_; }

private:
    uint32_t rows_;
    uint32_t cols_;
};

class MeshCoordinate {
public:
    MeshCoordinate(uint32_t row, uint32_t col) : row_(row), col_(col) {}
    uint32_t row() const { return row_; }
    uint32_t col() const { return col_; }

private:
    uint32_t row_;
    uint32_t col_;
};

class MeshCoordinateRange {
public:
    explicit MeshCoordinateRange(const MeshShape& shape)
        : start_(0, 0), end_(shape.num_rows() - 1, shape.num_cols() - 1) {}
    MeshCoordinateRange(const MeshCoordinate& start, const MeshCoordinate& end) : start_(start), end_(end) {}
    const MeshCoordinate& start_coord() const { return start_; }
    const MeshCoordinate& end_coord() const { return end_; }
    bool contains(uint32_t row, uint32_t col) const {
        return row >= start_.row() && row <= end_.row() && col >= start_.col() && col <= end_.col();
    }

private:
    MeshCoordinate start_;
    MeshCoordinate end_;
};

// [R mesh_config.hpp] inline in the SDK: MeshDeviceConfig(shape, offset = nullopt, physical_device_ids = {})
class MeshDeviceConfig {
public:
    MeshDeviceConfig(const MeshShape& mesh_shape, const std::optional<MeshCoordinate>& offset = std::nullopt,
                     const std::vector<int>& physical_device_ids = {})
        : shape_(mesh_shape) {
        (void)offset;
        (void)physical_device_ids;
    }
    const MeshShape& mesh_shape() const { return shape_; }

private:
    MeshShape shape_;
};

class MeshDevice;

class MeshCommandQueue {
public:
    explicit MeshCommandQueue(MeshDevice* mesh) : mesh_(mesh) {}
    MeshDevice& mesh() const { return *mesh_; }

private:
    MeshDevice* mesh_;
};

class MeshDevice {
public:
    MeshDevice(std::vector<int> devices, MeshShape shape) : devices_(std::move(devices)), shape_(shape), cq_(this) {}
    MeshDevice(const MeshDevice&) = delete;
    MeshDevice& operator=(const MeshDevice&) = delete;
    static std::shared_ptr<MeshDevice> create_unit_mesh(int device_id, std::size_t l1_small_size = 0,
                                                        std::size_t trace_region_size = 0,
                                                        std::size_t num_command_queues = 1) {
        (void)l1_small_size;
        (void)trace_region_size;
        (void)num_command_queues;
        return std::make_shared<MeshDevice>(std::vector<int>{tt_sim::host::device_open(device_id)}, MeshShape(1, 1));
    }
    static std::shared_ptr<MeshDevice> create(const MeshDeviceConfig& config, std::size_t l1_small_size = 0,
                                              std::size_t trace_region_size = 0, std::size_t num_command_queues = 1) {
        (void)l1_small_size;
        (void)trace_region_size;
        (void)num_command_queues;
        const MeshShape& shape = config.mesh_shape();
        auto mesh = std::make_shared<MeshDevice>(tt_sim::host::mesh_open(shape.num_rows(), shape.num_cols()), shape);
        mesh->is_mesh_ = true;
        return mesh;
    }
    MeshCommandQueue& mesh_command_queue(std::optional<uint8_t> cq_id = std::nullopt) {
        (void)cq_id;
        return cq_;
    }
    const MeshShape& shape() const { return shape_; }
    std::size_t num_devices() const { return devices_.size(); }
    std::size_t num_rows() const { return shape_.num_rows(); }
    std::size_t num_cols() const { return shape_.num_cols(); }
    CoreCoord compute_with_storage_grid_size() const {
        return CoreCoord{tt_sim::host::device_grid_x(devices_[0]), tt_sim::host::device_grid_y(devices_[0])};
    }
    CoreCoord worker_core_from_logical_core(const CoreCoord& logical) const { return logical; }
    uint32_t l1_size_per_core() const { return tt_sim::host::device_l1_size(devices_[0]); }
    uint32_t num_dram_channels() const { return tt_sim::host::device_dram_banks(devices_[0]); }
    bool close() {
        if (closed_) return true;
        closed_ = true;
        if (is_mesh_) {
            tt_sim::host::mesh_close(devices_);
        } else {
            tt_sim::host::device_close(devices_[0]);
        }
        return true;
    }
    int sim_device() const { return devices_[0]; }
    const std::vector<int>& sim_devices() const { return devices_; }   // row-major over the mesh

private:
    std::vector<int> devices_;
    MeshShape shape_;
    MeshCommandQueue cq_;
    bool is_mesh_ = false;
    bool closed_ = false;
};

struct DeviceLocalBufferConfig {
    uint64_t page_size = 0;
    BufferType buffer_type = BufferType::DRAM;
    bool bottom_up = false;
};

struct ReplicatedBufferConfig {
    uint64_t size = 0;
};

struct ShardedBufferConfig {
    uint64_t global_size = 0;
    Shape2D global_buffer_shape = {0, 0};
    Shape2D shard_shape = {0, 0};
    ShardOrientation shard_orientation = ShardOrientation::ROW_MAJOR;
};

class MeshBuffer {
public:
    MeshBuffer(std::vector<int> buffers, MeshDevice* device, std::optional<tt_sim::host::ShardSpec> shards)
        : buffers_(std::move(buffers)), device_(device), shards_(shards) {}
    static std::shared_ptr<MeshBuffer> create(const std::variant<ReplicatedBufferConfig, ShardedBufferConfig>& config,
                                              const DeviceLocalBufferConfig& device_config, MeshDevice* mesh_device) {
        if (device_config.buffer_type != BufferType::DRAM && device_config.buffer_type != BufferType::L1) {
            throw std::invalid_argument("tt-sim: only DRAM and L1 interleaved buffers are emulated");
        }
        std::optional<tt_sim::host::ShardSpec> shards;
        uint64_t size = 0;
        if (const auto* sharded = std::get_if<ShardedBufferConfig>(&config)) {
            shards = tt_sim::host::ShardSpec{sharded->global_size, sharded->global_buffer_shape.height(),
                                             sharded->global_buffer_shape.width(), sharded->shard_shape.height(),
                                             sharded->shard_shape.width(),
                                             sharded->shard_orientation == ShardOrientation::ROW_MAJOR};
            size = tt_sim::host::shard_bytes(*shards);
        } else {
            size = std::get<ReplicatedBufferConfig>(config).size;
        }
        std::vector<int> buffers;
        for (int device : mesh_device->sim_devices()) {
            buffers.push_back(tt_sim::host::buffer_create(device, size, static_cast<uint32_t>(device_config.page_size),
                                                          device_config.buffer_type == BufferType::DRAM));
            if (tt_sim::host::buffer_address(buffers.back()) != tt_sim::host::buffer_address(buffers.front())) {
                tt_sim::host::fail("MeshBuffer::create: the chips' allocators disagree on the buffer's address");
            }
        }
        return std::make_shared<MeshBuffer>(std::move(buffers), mesh_device, shards);
    }
    uint32_t address() const { return tt_sim::host::buffer_address(buffers_[0]); }
    uint64_t size() const { return tt_sim::host::buffer_size(buffers_[0]); }   // one chip's
    uint32_t page_size() const { return tt_sim::host::buffer_page_size(buffers_[0]); }
    uint32_t num_pages() const { return static_cast<uint32_t>(size() / page_size()); }
    bool is_dram() const { return tt_sim::host::buffer_is_dram(buffers_[0]); }
    MeshDevice* device() const { return device_; }
    const std::optional<tt_sim::host::ShardSpec>& shards() const { return shards_; }
    const std::vector<int>& sim_buffers() const { return buffers_; }   // one per chip, row-major over the mesh
    int sim_buffer() const { return buffers_[0]; }

private:
    std::vector<int> buffers_;
    MeshDevice* device_;
    std::optional<tt_sim::host::ShardSpec> shards_;
};

class MeshWorkload {
public:
    void add_program(const MeshCoordinateRange& range, Program&& program) {
        programs_.emplace_back(range, std::move(program));
    }
    const std::vector<std::pair<MeshCoordinateRange, Program>>& programs() const { return programs_; }

private:
    std::vector<std::pair<MeshCoordinateRange, Program>> programs_;
};

template <typename T>
void EnqueueWriteMeshBuffer(MeshCommandQueue& cq, std::shared_ptr<MeshBuffer>& buffer, const std::vector<T>& src,
                            bool blocking = false) {
    (void)cq;
    (void)blocking;
    if (buffer->shards()) {   // shard k of the global tensor to chip k (row-major over the mesh)
        tt_sim::host::sharded_write(buffer->sim_buffers(), *buffer->shards(), src.data(), src.size() * sizeof(T));
        return;
    }
    for (int b : buffer->sim_buffers()) tt_sim::host::buffer_write(b, src.data(), src.size() * sizeof(T));
}

template <typename T>
void EnqueueReadMeshBuffer(MeshCommandQueue& cq, std::vector<T>& dst, std::shared_ptr<MeshBuffer>& buffer,
                           bool blocking = true) {
    (void)cq;
    if (!blocking) tt_sim::host::fail("EnqueueReadMeshBuffer: non-blocking reads are not supported");
    if (buffer->shards()) {   // the shards reassembled into the global tensor
        dst.resize(buffer->shards()->global_size / sizeof(T));
        tt_sim::host::sharded_read(buffer->sim_buffers(), *buffer->shards(), dst.data(), dst.size() * sizeof(T));
        return;
    }
    if (buffer->sim_buffers().size() != 1) {
        tt_sim::host::fail("EnqueueReadMeshBuffer: can only read a sharded MeshBuffer from a MeshDevice or a "
                           "replicated MeshBuffer from a unit mesh (as TT-Metalium 0.81)");
    }
    dst.resize(buffer->size() / sizeof(T));
    tt_sim::host::buffer_read(buffer->sim_buffer(), dst.data(), dst.size() * sizeof(T));
}

// Each program runs on every chip of its range; the chips run concurrently (tt-sim schedules all their kernels
// together).
inline void EnqueueMeshWorkload(MeshCommandQueue& cq, MeshWorkload& workload, bool blocking) {
    (void)blocking;
    const MeshDevice& mesh = cq.mesh();
    const std::vector<int>& devices = mesh.sim_devices();
    const uint32_t cols = mesh.shape().num_cols();
    std::vector<std::pair<int, int>> runs;
    for (const auto& [range, program] : workload.programs()) {
        for (size_t k = 0; k < devices.size(); ++k) {
            if (range.contains(static_cast<uint32_t>(k / cols), static_cast<uint32_t>(k % cols))) {
                runs.emplace_back(devices[k], program.sim_id());
            }
        }
    }
    tt_sim::host::program_run_all(runs);
}

inline void Finish(MeshCommandQueue& cq) { tt_sim::host::finish(cq.mesh().sim_device()); }

}  // namespace distributed
}  // namespace tt::tt_metal
