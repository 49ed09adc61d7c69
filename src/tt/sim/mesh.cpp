// tt-sim: a mesh of devices (distributed::MeshDevice::create): one device per chip, each with its own DRAM banks,
// L1 and cores; sharded MeshBuffers split over the chips' DRAM as TT-Metalium's write_sharded_buffer does (a
// global_height x global_width matrix of data, shard k row-major to chip k row-major); the mesh's report: every core
// (with its chip), per-chip totals and host transfer bytes, mesh totals.

#include <cstring>
#include <fstream>

#include "sim_internal.hpp"

namespace tt_sim {

namespace {

struct ShardGrid {
    uint64_t datum = 0, shards_x = 0, shards_y = 0, row_bytes = 0, stride = 0;
};

ShardGrid grid_of(const host::ShardSpec& spec, size_t num_buffers, const char* op) {
    if (spec.global_height == 0 || spec.global_width == 0 || spec.shard_height == 0 || spec.shard_width == 0) {
        host::fail(format("%s: a ShardedBufferConfig with a zero shape (replicated dimensions are not emulated)", op));
    }
    if (!spec.row_major) host::fail(format("%s: only ShardOrientation::ROW_MAJOR is emulated", op));
    ShardGrid g;
    g.datum = spec.global_size / (spec.global_height * spec.global_width);
    if (g.datum * spec.global_height * spec.global_width != spec.global_size || g.datum == 0) {
        host::fail(format("%s: global_size %llu is not a whole number of data of the %llux%llu global buffer shape", op,
                          static_cast<unsigned long long>(spec.global_size),
                          static_cast<unsigned long long>(spec.global_height),
                          static_cast<unsigned long long>(spec.global_width)));
    }
    if (spec.global_height % spec.shard_height || spec.global_width % spec.shard_width) {
        host::fail(format("%s: the %llux%llu shard shape does not tile the %llux%llu global buffer shape", op,
                          static_cast<unsigned long long>(spec.shard_height),
                          static_cast<unsigned long long>(spec.shard_width),
                          static_cast<unsigned long long>(spec.global_height),
                          static_cast<unsigned long long>(spec.global_width)));
    }
    g.shards_x = spec.global_width / spec.shard_width;
    g.shards_y = spec.global_height / spec.shard_height;
    if (g.shards_x * g.shards_y > num_buffers) {
        host::fail(format("%s: %llu shards for a mesh of %zu chips", op,
                          static_cast<unsigned long long>(g.shards_x * g.shards_y), num_buffers));
    }
    g.row_bytes = g.datum * spec.shard_width;
    g.stride = g.datum * spec.global_width;
    return g;
}

// Every shard in order: (chip, offset of the shard's first row in the host tensor); rows are row_bytes apart by stride.
template <typename Fn>
void each_shard(const host::ShardSpec& spec, const ShardGrid& g, Fn fn) {
    size_t chip = 0;
    for (uint64_t sy = 0; sy < g.shards_y; ++sy) {
        for (uint64_t sx = 0; sx < g.shards_x; ++sx) {
            fn(chip++, sx * g.row_bytes + sy * g.stride * spec.shard_height);
        }
    }
}

void check_size(const host::ShardSpec& spec, size_t bytes, const char* op) {
    if (bytes != spec.global_size) {
        host::fail(format("%s: %zu bytes for a sharded buffer of global_size %llu", op, bytes,
                          static_cast<unsigned long long>(spec.global_size)));
    }
}

}  // namespace

namespace host {

void fail(const std::string& message) { die(message); }

std::vector<int> mesh_open(uint32_t rows, uint32_t cols) {
    if (rows == 0 || cols == 0) fail(format("MeshDevice::create: a %ux%u mesh has no chips", rows, cols));
    std::vector<int> devices;
    for (uint32_t r = 0; r < rows; ++r) {
        for (uint32_t c = 0; c < cols; ++c) devices.push_back(open_device(r, c, rows, cols));
    }
    return devices;
}

uint64_t shard_bytes(const ShardSpec& spec) {
    const ShardGrid g = grid_of(spec, ~size_t{0}, "MeshBuffer::create");
    return g.row_bytes * spec.shard_height;
}

void sharded_write(const std::vector<int>& buffers, const ShardSpec& spec, const void* data, size_t bytes) {
    check_size(spec, bytes, "EnqueueWriteMeshBuffer");
    const ShardGrid g = grid_of(spec, buffers.size(), "EnqueueWriteMeshBuffer");
    std::vector<uint8_t> shard(g.row_bytes * spec.shard_height);
    each_shard(spec, g, [&](size_t chip, uint64_t at) {
        for (uint64_t row = 0; row < spec.shard_height; ++row) {
            std::memcpy(shard.data() + row * g.row_bytes, static_cast<const uint8_t*>(data) + at + row * g.stride,
                        g.row_bytes);
        }
        buffer_write(buffers[chip], shard.data(), shard.size());
    });
}

void sharded_read(const std::vector<int>& buffers, const ShardSpec& spec, void* data, size_t bytes) {
    check_size(spec, bytes, "EnqueueReadMeshBuffer");
    const ShardGrid g = grid_of(spec, buffers.size(), "EnqueueReadMeshBuffer");
    std::vector<uint8_t> shard(g.row_bytes * spec.shard_height);
    each_shard(spec, g, [&](size_t chip, uint64_t at) {
        buffer_read(buffers[chip], shard.data(), shard.size());
        for (uint64_t row = 0; row < spec.shard_height; ++row) {
            std::memcpy(static_cast<uint8_t*>(data) + at + row * g.stride, shard.data() + row * g.row_bytes,
                        g.row_bytes);
        }
    });
}

void mesh_close(const std::vector<int>& devices) {
    std::vector<Device*> chips;
    for (int id : devices) chips.push_back(sim().devices.at(static_cast<size_t>(id)).get());
    for (Device* dev : chips) dev->open = false;
    const Device& first = *chips.at(0);
    if (first.report_path.empty()) return;
    std::ofstream f(first.report_path);
    double run = 0, compile = 0;
    uint64_t switches = 0, to_device = 0, to_host = 0;
    for (const Device* dev : chips) {
        run += dev->last_run_seconds;
        compile += dev->compile_seconds;
        switches += dev->scheduler_switches;
        to_device += dev->host_write_bytes;
        to_host += dev->host_read_bytes;
    }
    f << "{\n  \"arch\": \"" << first.arch.name << "\",\n  \"protocol_only\": " << (sim().protocol_only ? "true" : "false")
      << ",\n  \"run_seconds\": " << run << ",\n  \"compile_seconds\": " << compile << ",\n  \"scheduler_switches\": "
      << switches << ",\n  \"mesh\": [" << first.mesh_rows << ", " << first.mesh_cols << "],\n  \"cores\": [";
    Counters total;
    std::vector<Counters> per_chip(chips.size());
    for (size_t i = 0; i < chips.size(); ++i) {
        std::vector<const Core*> cores;
        for (const auto& core : chips[i]->run_cores) cores.push_back(core.get());
        if (i > 0 && !cores.empty()) f << ",";
        write_cores(f, cores, "    ", per_chip[i], true, chips[i]);
    }
    f << "\n  ],\n  \"chips\": [";
    for (size_t i = 0; i < chips.size(); ++i) {
        const Device& dev = *chips[i];
        const Counters& c = per_chip[i];
        add_counters(total, c);
        f << (i ? ",\n" : "\n") << "    {\"chip\": [" << dev.mesh_row << ", " << dev.mesh_col << "], \"run_seconds\": "
          << dev.last_run_seconds << ", \"host_to_device_bytes\": " << dev.host_write_bytes
          << ", \"device_to_host_bytes\": " << dev.host_read_bytes << ", \"cores\": " << dev.run_cores.size()
          << ", \"total\": ";
        write_totals(f, c);
        f << "}";
    }
    f << "\n  ],\n  \"host_to_device_bytes\": " << to_device << ",\n  \"device_to_host_bytes\": " << to_host
      << ",\n  \"total\": ";
    write_totals(f, total);
    f << "\n}\n";
}

}  // namespace host
}  // namespace tt_sim
