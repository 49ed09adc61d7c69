// tt-sim: the C++17 interface between the host-side SDK headers (tt-metalium/*.hpp, header-only wrappers
// compiled with the generated host program) and the emulator library (libtt_sim).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tt_sim::host {

struct Range {
    uint32_t x0, y0, x1, y1;   // inclusive logical core rectangle
};

struct KernelSpec {
    std::string path;
    std::vector<Range> cores;
    bool compute = false;
    int processor = 0;          // DataMovementProcessor (RISCV_0 = 0, RISCV_1 = 1)
    int noc = 0;
    std::vector<uint32_t> compile_args;
    std::vector<std::pair<std::string, std::string>> defines;
    int math_fidelity = 4;
    bool fp32_dest_acc_en = false;
    bool dst_full_sync_en = false;
    bool math_approx_mode = false;
    std::vector<uint8_t> unpack_to_dest;   // per CB index: 1 = UnpackToDestMode::UnpackToDestFp32
};

struct CBSpec {
    std::vector<Range> cores;
    uint32_t total_size = 0;
    std::vector<std::pair<uint8_t, uint8_t>> formats;      // (cb index, DataFormat value)
    std::vector<std::pair<uint8_t, uint32_t>> page_sizes;  // (cb index, page size)
};

// A ShardedBufferConfig as the emulator splits it (mesh.cpp): the host tensor is a global_height x global_width
// matrix of data (a datum: global_size / (height * width) bytes); shard k (row-major over the shard grid) is the
// shard_height x shard_width block that goes to chip k (row-major over the mesh, ROW_MAJOR orientation).
struct ShardSpec {
    uint64_t global_size = 0;
    uint64_t global_height = 0, global_width = 0, shard_height = 0, shard_width = 0;
    bool row_major = true;
};

int device_open(int device_id);
std::vector<int> mesh_open(uint32_t rows, uint32_t cols);        // the devices of a mesh, row-major
void mesh_close(const std::vector<int>& devices);                 // one report for the whole mesh
uint64_t shard_bytes(const ShardSpec& spec);                      // the bytes each chip holds
void sharded_write(const std::vector<int>& buffers, const ShardSpec& spec, const void* data, size_t bytes);
void sharded_read(const std::vector<int>& buffers, const ShardSpec& spec, void* data, size_t bytes);
[[noreturn]] void fail(const std::string& message);              // a host API misuse: the error, exit code 3
void device_close(int device);
uint32_t device_grid_x(int device);
uint32_t device_grid_y(int device);
uint32_t device_l1_size(int device);
uint32_t device_dram_banks(int device);
int device_arch(int device);

int buffer_create(int device, uint64_t size, uint32_t page_size, bool dram);
uint32_t buffer_address(int buffer);
uint64_t buffer_size(int buffer);
uint32_t buffer_page_size(int buffer);
bool buffer_is_dram(int buffer);
void buffer_write(int buffer, const void* data, size_t bytes);
void buffer_read(int buffer, void* data, size_t bytes);

int program_create();
uint32_t program_add_kernel(int program, const KernelSpec& spec);
uint32_t program_add_cb(int program, const CBSpec& spec);
uint32_t program_add_semaphore(int program, const std::vector<Range>& cores, uint32_t initial_value);
void program_set_runtime_args(int program, uint32_t kernel, const std::vector<Range>& cores, const uint32_t* args,
                              size_t count);
void program_set_common_runtime_args(int program, uint32_t kernel, const uint32_t* args, size_t count);
void program_run(int device, int program);
// Programs on several chips (device, program), run concurrently: their kernels are scheduled together, so a chip
// waiting on another's progress would deadlock here as on a mesh. A chip listed twice runs its programs in order.
void program_run_all(const std::vector<std::pair<int, int>>& runs);
void finish(int device);

}  // namespace tt_sim::host
