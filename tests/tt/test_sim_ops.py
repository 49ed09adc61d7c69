"""tt-sim's reduce, broadcast and SFPU calls and noc_inline_dw_write, exercised by hand-written kernels.

One hand-written artifact (host.cpp, reader/compute/writer kernels, tt.plan.json) serves every case: the host
program passes the environment's SIMOPS_ARGS (op, p0, p1, scaler bits, reader mode) to all three kernels as runtime
args, and SIMOPS_FMT / SIMOPS_SCALER_FMT / SIMOPS_FP32 pick the CB formats and fp32_dest_acc_en, so the host
and the kernels compile once (per DST mode) and each case is one emulator run. A and B are 32x64 (two tiles each);
the compute kernel fills DST[0] and DST[1] and packs them as the two tiles of C.

The reader builds the reduce scaler tile as real readers do: zero the reserved page with NoC reads from
MEM_ZEROS_BASE, read barrier, noc_inline_dw_write row 0 of every face, write barrier, push.

Numbers are checked against torch (fp32 DST: tight tolerances; the emulator computes in fp32 with libm), and the
seeded bugs must be refused with the sanitizer's message.
"""

from __future__ import annotations

import json
import shutil
import struct

import pytest
import torch

from tilelang_tt import emulator
from tilelang_tt.emulator import TTSimError

CB_A, CB_B, CB_S, CB_C = 0, 1, 2, 16

HOST = r"""
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tt-metalium/host_api.hpp>
#include <tt-metalium/distributed.hpp>
#include <tt-metalium/tensor_accessor_args.hpp>

using namespace tt;
using namespace tt::tt_metal;

namespace {
std::vector<uint32_t> read_tensor(const std::string& path, size_t bytes) {
    std::ifstream file(path, std::ios::binary);
    std::vector<uint32_t> words(bytes / 4);
    file.read(reinterpret_cast<char*>(words.data()), static_cast<std::streamsize>(bytes));
    if (!file) throw std::runtime_error("cannot read " + path);
    return words;
}
void write_tensor(const std::string& path, const std::vector<uint32_t>& words) {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 4));
}
std::string env(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}
tt::DataFormat format_of(const std::string& name) {
    return name == "Float32" ? tt::DataFormat::Float32 : tt::DataFormat::Float16_b;
}
}  // namespace

int main(int argc, char** argv) {
    const std::string data_dir = argv[1];
    const std::string artifact_dir = argv[2];
    (void)argc;
    const tt::DataFormat fmt = format_of(env("SIMOPS_FMT", "Float16_b"));
    const tt::DataFormat scaler_fmt = format_of(env("SIMOPS_SCALER_FMT", "Float16_b"));
    const bool fp32_acc = env("SIMOPS_FP32", "0") == "1";
    const uint32_t tile = fmt == tt::DataFormat::Float32 ? 4096 : 2048;
    const uint32_t scaler_tile = scaler_fmt == tt::DataFormat::Float32 ? 4096 : 2048;
    std::vector<uint32_t> args;
    {
        const std::string s = env("SIMOPS_ARGS", "0");
        size_t at = 0;
        while (at <= s.size()) {
            const size_t comma = s.find(',', at);
            args.push_back(static_cast<uint32_t>(std::stoul(s.substr(at, comma - at))));
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
    }

    std::shared_ptr<distributed::MeshDevice> mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    auto make = [&](uint32_t pages) {
        distributed::DeviceLocalBufferConfig config{.page_size = tile, .buffer_type = BufferType::DRAM};
        return distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = pages * tile}, config,
                                               mesh.get());
    };
    auto A = make(2), B = make(2), C = make(2);

    Program program = CreateProgram();
    const CoreCoord core{0, 0};
    CreateCircularBuffer(program, core, CircularBufferConfig(2 * tile, {{0, fmt}}).set_page_size(0, tile));
    CreateCircularBuffer(program, core, CircularBufferConfig(2 * tile, {{1, fmt}}).set_page_size(1, tile));
    CreateCircularBuffer(program, core, CircularBufferConfig(scaler_tile, {{2, scaler_fmt}}).set_page_size(2, scaler_tile));
    CreateCircularBuffer(program, core, CircularBufferConfig(2 * tile, {{16, fmt}}).set_page_size(16, tile));

    std::vector<uint32_t> reader_ct;
    TensorAccessorArgs(*A).append_to(reader_ct);
    TensorAccessorArgs(*B).append_to(reader_ct);
    const KernelHandle reader = CreateKernel(program, artifact_dir + "/kernels/reader.cpp", core,
        DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = NOC::RISCV_1_default,
                           .compile_args = reader_ct});
    std::vector<uint32_t> writer_ct;
    TensorAccessorArgs(*C).append_to(writer_ct);
    const KernelHandle writer = CreateKernel(program, artifact_dir + "/kernels/writer.cpp", core,
        DataMovementConfig{.processor = DataMovementProcessor::RISCV_0, .noc = NOC::RISCV_0_default,
                           .compile_args = writer_ct});
    const KernelHandle compute = CreateKernel(program, artifact_dir + "/kernels/compute.cpp", core,
        ComputeConfig{.math_fidelity = MathFidelity::HiFi4, .fp32_dest_acc_en = fp32_acc, .compile_args = {}});

    std::vector<uint32_t> reader_args{static_cast<uint32_t>(A->address()), static_cast<uint32_t>(B->address())};
    reader_args.insert(reader_args.end(), args.begin(), args.end());
    SetRuntimeArgs(program, reader, core, reader_args);
    std::vector<uint32_t> writer_args{static_cast<uint32_t>(C->address())};
    SetRuntimeArgs(program, writer, core, writer_args);
    SetRuntimeArgs(program, compute, core, args);

    distributed::EnqueueWriteMeshBuffer(cq, A, read_tensor(data_dir + "/A.bin", 2 * tile), false);
    distributed::EnqueueWriteMeshBuffer(cq, B, read_tensor(data_dir + "/B.bin", 2 * tile), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> result;
    distributed::EnqueueReadMeshBuffer(cq, result, C, true);
    write_tensor(data_dir + "/C.bin", result);
    distributed::Finish(cq);
    mesh->close();
    return 0;
}
"""

READER = r"""
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

// Runtime args: A, B addresses, then op, p0, p1, scaler (fp32 bits), mode.
// Reads both tiles of A and B, then builds the reduce scaler tile: zero the page, then row 0 of every face holds
// the scaler (mode 1: one datum differs; mode 2: pushed without the write barrier; mode 3: an unaligned write).
void kernel_main() {
    const uint32_t a_addr = get_arg_val<uint32_t>(0);
    const uint32_t b_addr = get_arg_val<uint32_t>(1);
    const uint32_t scaler_bits = get_arg_val<uint32_t>(5);
    const uint32_t mode = get_arg_val<uint32_t>(6);
    constexpr auto a_args = TensorAccessorArgs<0>();
    const auto a = TensorAccessor(a_args, a_addr);
    constexpr auto b_args = TensorAccessorArgs<a_args.next_compile_time_args_offset()>();
    const auto b = TensorAccessor(b_args, b_addr);
    constexpr uint32_t cb_a = 0, cb_b = 1, cb_s = 2;

    cb_reserve_back(cb_a, 2);
    const uint32_t tile_bytes = get_tile_size(cb_a);
    for (uint32_t t = 0; t < 2; ++t) noc_async_read_page(t, a, get_write_ptr(cb_a) + t * tile_bytes);
    noc_async_read_barrier();
    cb_push_back(cb_a, 2);
    cb_reserve_back(cb_b, 2);
    for (uint32_t t = 0; t < 2; ++t) noc_async_read_page(t, b, get_write_ptr(cb_b) + t * tile_bytes);
    noc_async_read_barrier();
    cb_push_back(cb_b, 2);

    cb_reserve_back(cb_s, 1);
    const uint32_t s_bytes = get_tile_size(cb_s);
    const uint32_t base = get_write_ptr(cb_s);
    const uint64_t zeros = get_noc_addr(MEM_ZEROS_BASE);
    for (uint32_t done = 0; done < s_bytes; done += MEM_ZEROS_SIZE) {
        noc_async_read(zeros, base + done, s_bytes - done < MEM_ZEROS_SIZE ? s_bytes - done : MEM_ZEROS_SIZE);
    }
    noc_async_read_barrier();
    const bool fp32 = s_bytes == 4096;
    const uint32_t word = fp32 ? scaler_bits : ((scaler_bits >> 16) | (scaler_bits & 0xffff0000u));
    const uint32_t face_bytes = s_bytes / 4;
    for (uint32_t face = 0; face < 4; ++face) {
        for (uint32_t w = 0; w < (fp32 ? 16u : 8u); ++w) {
            const uint32_t value = mode == 1 && face == 3 && w == 5 ? word ^ 0x00400040u : word;
            const uint32_t addr = base + face * face_bytes + w * 4 + (mode == 3 ? 2u : 0u);
            noc_inline_dw_write(get_noc_addr(addr), value);
        }
    }
    if (mode != 2) noc_async_write_barrier();
    cb_push_back(cb_s, 1);
    if (mode == 2) noc_async_write_barrier();
}
"""

WRITER = r"""
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    const uint32_t c_addr = get_arg_val<uint32_t>(0);
    constexpr auto c_args = TensorAccessorArgs<0>();
    const auto c = TensorAccessor(c_args, c_addr);
    constexpr uint32_t cb_c = 16;
    cb_wait_front(cb_c, 2);
    const uint32_t tile_bytes = get_tile_size(cb_c);
    for (uint32_t t = 0; t < 2; ++t) noc_async_write_page(t, c, get_read_ptr(cb_c) + t * tile_bytes);
    noc_async_write_barrier();
    cb_pop_front(cb_c, 2);
}
"""

# op ids of the compute kernel (runtime arg 0)
REDUCE = {("SUM", "ROW"): 1, ("MAX", "ROW"): 2, ("SUM", "COL"): 3, ("MAX", "COL"): 4, ("SUM", "SCALAR"): 5,
          ("MAX", "SCALAR"): 6, ("AVG", "ROW"): 7}
REDUCE_RECIP, REDUCE_MAX_INTO_COPY = 8, 9
BCAST = {(op, dim): 10 + 3 * i + j for i, op in enumerate(("add", "sub", "mul"))
         for j, dim in enumerate(("rows", "cols", "scalar"))}
UNARY = ["exp2", "abs", "square", "silu", "negative", "gtz", "ltz", "gez", "lez", "eqz", "nez", "exp", "recip",
         "sigmoid", "gelu", "sign", "erfc"]
PARAM = ["power", "power_iterative", "unary_max", "unary_min", "unary_gt", "unary_lt", "unary_ge", "unary_le",
         "unary_eq", "unary_ne"]
BINARY = ["binary_max", "binary_min", "lt_binary", "gt_binary", "le_binary", "ge_binary", "eq_binary", "ne_binary"]
OP_UNARY, OP_PARAM, OP_BINARY = 20, 40, 60
OP_WHERE, OP_CLAMP, OP_EXP_C = 70, 71, 72
BUG_NO_UNINIT, BUG_UNDEFINED_SFPU, BUG_NO_RECONFIG, BUG_MISMATCHED_REDUCE = 90, 91, 92, 93
BUG_BCAST_ROW_IDX, BUG_SFPU_AFTER_RELEASE = 94, 95
STARTUP_WITH_SCALER = 96   # compute_kernel_hw_startup(cb_a, cb_s, cb_c): SrcB is the scaler's, no reconfig needed


def _compute_source() -> str:
    reduces = "\n".join(
        f"""        case {op}: {{
            {"reconfig_data_format(cb_s, cb_a);" if dim == "ROW" and pool != "MAX" else "reconfig_data_format(cb_a, cb_s);"}
            reduce_init<PoolType::{pool}, ReduceDim::REDUCE_{dim}>(cb_a, cb_s, cb_c);
            tile_regs_acquire();
            reduce_tile<PoolType::{pool}, ReduceDim::REDUCE_{dim}>(cb_a, cb_s, 0, 0, 0);
            reduce_tile<PoolType::{pool}, ReduceDim::REDUCE_{dim}>(cb_a, cb_s, 1, 0, 0);
            reduce_tile<PoolType::{pool}, ReduceDim::REDUCE_{dim}>(cb_b, cb_s, 0, 0, 1);
            reduce_tile<PoolType::{pool}, ReduceDim::REDUCE_{dim}>(cb_b, cb_s, 1, 0, 1);
            break;
        }}""" for (pool, dim), op in REDUCE.items())
    bcasts = "\n".join(
        f"""        case {op}:
            {name}_bcast_{dim}_init(cb_a, cb_b);
            tile_regs_acquire();
            {name}_tiles_bcast_{dim}(cb_a, cb_b, 0, 0, 0);
            {name}_tiles_bcast_{dim}(cb_a, cb_b, 1, 1, 1);
            break;""" for (name, dim), op in BCAST.items())
    unaries = "\n".join(
        f"""        case {OP_UNARY + i}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_tile(cb_a, 1, 1);
            {name}_tile_init();
            {name}_tile(0);
            {name}_tile(1);
            break;""" for i, name in enumerate(UNARY))
    params = "\n".join(
        f"""        case {OP_PARAM + i}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_tile(cb_a, 1, 1);
            {name}_tile_init();
            {name}_tile(0, p0);
            {name}_tile(1, p0);
            break;""" for i, name in enumerate(PARAM))
    binaries = "\n".join(
        f"""        case {OP_BINARY + i}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_tile(cb_a, 1, 2);
            copy_init(cb_b);
            copy_tile(cb_b, 0, 1);
            copy_tile(cb_b, 1, 3);
            {name}_tile_init();
            {name}_tile(0, 1, 0);
            {name}_tile(2, 3, 1);
            break;""" for i, name in enumerate(BINARY))
    return f"""// Hand-written test kernel for tt-sim's reduce / broadcast / SFPU calls (tests/tt/test_sim_ops.py).
#include <cstdint>

#include "api/compute/bcast.h"
#include "api/compute/binary_max_min.h"
#include "api/compute/common.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/eltwise_binary_sfpu.h"
#include "api/compute/eltwise_unary/clamp.h"
#include "api/compute/eltwise_unary/comp.h"
#include "api/compute/eltwise_unary/eltwise_unary.h"
#include "api/compute/eltwise_unary/erf_erfc.h"
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/gelu.h"
#include "api/compute/eltwise_unary/negative.h"
#include "api/compute/eltwise_unary/recip.h"
#include "api/compute/eltwise_unary/where.h"
#include "api/compute/pack.h"
#include "api/compute/reconfig_data_format.h"
#include "api/compute/reduce.h"
#include "api/compute/tile_move_copy.h"

void kernel_main() {{
    const uint32_t op = get_arg_val<uint32_t>(0);
    const uint32_t p0 = get_arg_val<uint32_t>(1);
    const uint32_t p1 = get_arg_val<uint32_t>(2);
    constexpr uint32_t cb_a = {CB_A}, cb_b = {CB_B}, cb_s = {CB_S}, cb_c = {CB_C};
    compute_kernel_hw_startup(cb_a, op == {STARTUP_WITH_SCALER} ? cb_s : cb_b, cb_c);
    cb_wait_front(cb_a, 2);
    cb_wait_front(cb_b, 2);
    cb_wait_front(cb_s, 1);
    cb_reserve_back(cb_c, 2);
    switch (op) {{
{reduces}
        case {REDUCE_RECIP}:  // a post-op inside the reduce window: still masked by the packer
            reconfig_data_format(cb_s, cb_a);
            reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_a, cb_s, cb_c);
            tile_regs_acquire();
            reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_a, cb_s, 0, 0, 0);
            reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_b, cb_s, 0, 0, 1);
            recip_tile_init();
            recip_tile(0);
            recip_tile(1);
            break;
        case {REDUCE_MAX_INTO_COPY}:  // reduce accumulates into what DST holds
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            reconfig_data_format(cb_b, cb_s);
            reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_b, cb_s, cb_c);
            reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_b, cb_s, 0, 0, 0);
            reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_b, cb_s, 1, 0, 1);
            break;
{bcasts}
{unaries}
{params}
{binaries}
        case {OP_WHERE}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_tile(cb_a, 1, 1);
            copy_init(cb_b);
            copy_tile(cb_b, 0, 2);
            where_tile_init();
            where_tile<DataFormat::Float16_b>(0, 1, 2, 0);
            break;
        case {OP_CLAMP}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_tile(cb_a, 1, 1);
            clamp_tile_init();
            clamp_tile(0, p0, p1);
            clamp_tile(1, p0, p1);
            break;
        case {OP_EXP_C}:  // VectorMode::C: faces 0 and 2 only
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_tile(cb_a, 1, 1);
            exp_tile_init();
            exp_tile(0, VectorMode::C);
            exp_tile<false, true>(1, VectorMode::RC, 0x4000);  // exp(2 x)
            break;
        case {BUG_NO_UNINIT}:
            reconfig_data_format(cb_a, cb_s);
            reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_a, cb_s, cb_c);
            tile_regs_acquire();
            reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_a, cb_s, 0, 0, 0);
            copy_init(cb_a);
            copy_tile(cb_a, 1, 1);
            break;
        case {BUG_UNDEFINED_SFPU}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            exp_tile_init();
            exp_tile(0);
            exp_tile(1);
            break;
        case {BUG_NO_RECONFIG}:
            reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_a, cb_s, cb_c);
            tile_regs_acquire();
            reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_a, cb_s, 0, 0, 0);
            break;
        case {BUG_MISMATCHED_REDUCE}:
            reconfig_data_format(cb_a, cb_s);
            reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_a, cb_s, cb_c);
            tile_regs_acquire();
            reduce_tile<PoolType::MAX, ReduceDim::REDUCE_COL>(cb_a, cb_s, 0, 0, 0);
            break;
        case {BUG_BCAST_ROW_IDX}:
            mul_bcast_rows_init(cb_a, cb_b);
            tile_regs_acquire();
            mul_tiles_bcast_rows(cb_a, cb_b, 0, 0, 0, 3);
            break;
        case {STARTUP_WITH_SCALER}:
            reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_a, cb_s, cb_c);
            tile_regs_acquire();
            reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_a, cb_s, 0, 0, 0);
            reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_a, cb_s, 1, 0, 1);
            break;
        default:
            tile_regs_acquire();
            break;
    }}
    tile_regs_commit();
    tile_regs_wait();
    pack_tile(0, cb_c);
    pack_tile(1, cb_c);
    tile_regs_release();
    if (op < 10 || op == {STARTUP_WITH_SCALER}) reduce_uninit();
    if (op == {BUG_SFPU_AFTER_RELEASE}) {{  // DST of the next acquire is undefined again
        tile_regs_acquire();
        copy_init(cb_a);
        copy_tile(cb_a, 0, 0);
        add_binary_tile_init();
        add_binary_tile(0, 1, 0);
        tile_regs_commit();
        tile_regs_wait();
        tile_regs_release();
    }}
    cb_push_back(cb_c, 2);
    cb_pop_front(cb_a, 2);
    cb_pop_front(cb_b, 2);
    cb_pop_front(cb_s, 1);
}}
"""


def _plan(fmt: str, scaler_fmt: str = "Float16_b", fp32: bool = False) -> dict:
    page = 4096 if fmt == "Float32" else 2048
    buffers = [{"name": name, "param_index": i, "shape": [32, 64], "padded_shape": [32, 64], "dtype": fmt,
                "format": fmt, "layout": "tiled_32x32_interleaved", "placement": "DRAM", "page_size": page,
                "num_pages": 2, "bytes": 2 * page, "io": io}
               for i, (name, io) in enumerate((("A", "input"), ("B", "input"), ("C", "output")))]
    cbs = [{"index": CB_A, "format": fmt}, {"index": CB_B, "format": fmt}, {"index": CB_S, "format": scaler_fmt},
           {"index": CB_C, "format": fmt}]
    kernels = {
        "reader": {"file": "kernels/reader.cpp", "processor": "RISCV_1", "noc": "RISCV_1_default",
                   "compile_args": [{"tensor_accessor": "A"}, {"tensor_accessor": "B"}]},
        "writer": {"file": "kernels/writer.cpp", "processor": "RISCV_0", "noc": "RISCV_0_default",
                   "compile_args": [{"tensor_accessor": "C"}]},
        "compute": {"file": "kernels/compute.cpp", "compile_args": [], "fp32_dest_acc_en": fp32,
                    "math_fidelity": "HiFi4"},
    }
    return {"kernel": "sim_ops", "device": {"arch": "wormhole_b0", "num_cbs": 32}, "buffers": buffers, "cbs": cbs,
            "kernels": kernels}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim_ops")
    (root / "kernels").mkdir()
    (root / "host.cpp").write_text(HOST)
    (root / "kernels" / "reader.cpp").write_text(READER)
    (root / "kernels" / "writer.cpp").write_text(WRITER)
    (root / "kernels" / "compute.cpp").write_text(_compute_source())
    (root / "tt.plan.json").write_text(json.dumps(_plan("Float16_b"), indent=1))
    return root


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def run(artifact, monkeypatch, op, a, b, *, p0=0, p1=0, scaler=1.0, mode=0, fmt="Float32", scaler_fmt="Float16_b",
        fp32=True, artifact_dir=None):
    """One emulator run; returns (C as a float32 tensor, the run report)."""
    monkeypatch.setenv("SIMOPS_ARGS", ",".join(map(str, (op, p0, p1, f32_bits(scaler), mode))))
    monkeypatch.setenv("SIMOPS_FMT", fmt)
    monkeypatch.setenv("SIMOPS_SCALER_FMT", scaler_fmt)
    monkeypatch.setenv("SIMOPS_FP32", "1" if fp32 else "0")
    dtype = torch.float32 if fmt == "Float32" else torch.bfloat16
    c = torch.zeros(32, 64, dtype=dtype)
    result = emulator.run(artifact_dir or artifact, _plan(fmt, scaler_fmt, fp32),
                          {0: a.to(dtype), 1: b.to(dtype), 2: c}, timeout_s=120)
    return c.float(), result.report


def tiles(x):
    """A 32x64 tensor as its two 32x32 tiles."""
    return x[:, :32], x[:, 32:]


def inputs(seed=0, negative_rows=False):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(32, 64, generator=g)
    b = torch.randn(32, 64, generator=g)
    if negative_rows:   # all-negative data: a MAX that started from 0 instead of -inf would be wrong
        a, b = -a.abs() - 0.5, -b.abs() - 0.5
    # bf16-representable values: the unpacker's narrowing of Float32 CBs into SrcA/SrcB (TF32; SrcA's multiplier
    # uses 9 of its 10 mantissa bits) is then lossless, so these tests check the ops' semantics against torch with
    # fp32 tolerances; the narrowing and the fidelity phases themselves are tested in test_numerics.py
    return a.bfloat16().float(), b.bfloat16().float()


def expected_reduce(pool, dim, x, s):
    """DST after folding both 32x32 tiles of x (a 32x64 tensor) into one tile, masked as the packer writes it."""
    out = torch.zeros(32, 32)
    t0, t1 = tiles(x)
    if dim == "ROW":
        both = torch.cat([t0, t1], dim=1)
        out[:, 0] = both.amax(dim=1) if pool == "MAX" else (both * s).sum(dim=1)
    elif dim == "COL":
        out[0, :] = torch.maximum(t0.amax(dim=0), t1.amax(dim=0)) if pool == "MAX" else (t0 * s + t1 * s).sum(dim=0)
    else:
        out[0, 0] = x.max() if pool == "MAX" else (x * s).sum() * s
    return out


# ---- reduce ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pool,dim", sorted(REDUCE), ids=lambda v: v)
def test_reduce(artifact, monkeypatch, pool, dim):
    a, b = inputs(1, negative_rows=pool == "MAX")
    s = {"SUM": 1.0, "AVG": 1.0 / 64, "MAX": 1.0}[pool]
    if dim == "SCALAR" and pool == "SUM":
        s = 0.5   # the scalar reduce applies the scaler in both of its pooling passes
    c, report = run(artifact, monkeypatch, REDUCE[(pool, dim)], a, b, scaler=s)
    c0, c1 = tiles(c)
    ref_pool = "SUM" if pool == "AVG" else pool
    torch.testing.assert_close(c0, expected_reduce(ref_pool, dim, a, s), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c1, expected_reduce(ref_pool, dim, b, s), rtol=1e-5, atol=1e-5)
    total = report["total"]
    assert total["reduce_tiles"] == 4 and total["tile_ops"] == 4 and total["packs"] == 2
    assert total["noc_write_bytes"] == 2 * 4096 + 32 * 4   # C's tiles + the scaler's inline writes (bf16: 8 words/face)


def test_reduce_mixed_formats_and_bf16_dst(artifact, monkeypatch):
    # Float32 data with a Float16_b scaler: REDUCE_ROW SUM reconfigures SrcA to the scaler and SrcB to the data
    a, b = inputs(2)
    c, _ = run(artifact, monkeypatch, REDUCE[("SUM", "ROW")], a, b, scaler_fmt="Float16_b")
    torch.testing.assert_close(tiles(c)[0], expected_reduce("SUM", "ROW", a, 1.0), rtol=1e-5, atol=1e-5)
    # bf16 CBs, 16-bit DST: each reduce_tile's fp32 row sums are added to DST, which is rounded to bf16
    c, _ = run(artifact, monkeypatch, REDUCE[("SUM", "ROW")], a, b, fmt="Float16_b", fp32=False)
    t0, t1 = (t.to(torch.bfloat16).float() for t in tiles(a))
    first = t0.sum(dim=1).to(torch.bfloat16).float()
    ref = torch.zeros(32, 32)
    ref[:, 0] = (first + t1.sum(dim=1)).to(torch.bfloat16).float()
    torch.testing.assert_close(tiles(c)[0], ref, rtol=8e-3, atol=1e-6)


def test_reduce_max_uses_the_scaler_exponent_only(artifact, monkeypatch):
    a, b = inputs(3)
    c, _ = run(artifact, monkeypatch, REDUCE[("MAX", "ROW")], a, b, scaler=3.0)   # 3.0 = 1.5 * 2: GMPOOL scales by 2
    torch.testing.assert_close(tiles(c)[0], expected_reduce("MAX", "ROW", a * 2.0, 1.0))


def test_reduce_post_op_stays_masked(artifact, monkeypatch):
    a, b = inputs(4)
    c, _ = run(artifact, monkeypatch, REDUCE_RECIP, a, b)
    c0, c1 = tiles(c)
    for got, x in ((c0, tiles(a)[0]), (c1, tiles(b)[0])):
        ref = torch.zeros(32, 32)
        ref[:, 0] = 1.0 / x.sum(dim=1)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_reduce_accumulates_into_written_dst(artifact, monkeypatch):
    a, b = inputs(5, negative_rows=True)
    a = a + 1.0   # some rows of A's column 0 exceed B's row max
    c, _ = run(artifact, monkeypatch, REDUCE_MAX_INTO_COPY, a, b)
    c0, c1 = tiles(c)
    b0, b1 = tiles(b)
    ref0 = torch.zeros(32, 32)
    ref0[:, 0] = torch.maximum(tiles(a)[0][:, 0], b0.amax(dim=1))
    ref1 = torch.zeros(32, 32)
    ref1[:, 0] = b1.amax(dim=1)   # DST[1] was undefined: MAX starts from -inf (the rows are all negative)
    torch.testing.assert_close(c0, ref0)
    torch.testing.assert_close(c1, ref1)


def test_hw_startup_configures_srcb_and_the_packer(artifact, monkeypatch):
    # compute_kernel_hw_startup(icb0, icb1, ocb): SrcA <- icb0, SrcB <- icb1 (the Float16_b scaler here, beside
    # Float32 data), packer <- ocb; a reduce MAX needs no reconfig_data_format then
    a, b = inputs(13)
    c, _ = run(artifact, monkeypatch, STARTUP_WITH_SCALER, a, b)
    ref = torch.zeros(32, 64)
    ref[:, 0] = tiles(a)[0].amax(dim=1)
    ref[:, 32] = tiles(a)[1].amax(dim=1)
    torch.testing.assert_close(c, ref)


# ---- broadcast ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,dim", sorted(BCAST), ids=lambda v: v)
def test_bcast(artifact, monkeypatch, op, dim):
    a, b = inputs(6)
    c, report = run(artifact, monkeypatch, BCAST[(op, dim)], a, b)
    fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op]
    for got, x, y in zip(tiles(c), tiles(a), tiles(b)):
        yb = {"rows": y[0:1, :], "cols": y[:, 0:1], "scalar": y[0:1, 0:1]}[dim]
        torch.testing.assert_close(got, fn(x, yb.expand(32, 32)), rtol=1e-6, atol=1e-6)
    assert report["total"]["tile_ops"] == 2 and report["total"]["reduce_tiles"] == 0


# ---- SFPU --------------------------------------------------------------------------------------------------------
UNARY_REF = {
    "exp2": torch.exp2, "abs": torch.abs, "square": torch.square, "silu": torch.nn.functional.silu,
    "negative": torch.neg, "gtz": lambda x: (x > 0).float(), "ltz": lambda x: (x < 0).float(),
    "gez": lambda x: (x >= 0).float(), "lez": lambda x: (x <= 0).float(), "eqz": lambda x: (x == 0).float(),
    "nez": lambda x: (x != 0).float(), "exp": torch.exp, "recip": torch.reciprocal, "sigmoid": torch.sigmoid,
    "gelu": torch.nn.functional.gelu, "sign": torch.sign, "erfc": torch.erfc,
}


@pytest.mark.parametrize("name", UNARY)
def test_sfpu_unary(artifact, monkeypatch, name):
    a, b = inputs(7)
    a[0, :8] = 0.0   # the zero comparisons see exact zeros
    c, report = run(artifact, monkeypatch, OP_UNARY + UNARY.index(name), a, b)
    torch.testing.assert_close(c, UNARY_REF[name](a), rtol=2e-6, atol=2e-6)
    assert report["total"]["tile_ops"] == 4   # two copies, two SFPU ops


@pytest.mark.parametrize("name,param", [
    ("power", 2.5), ("power", -1.0), ("power_iterative", 3), ("unary_max", 0.25), ("unary_min", -0.25),
    ("unary_gt", 0.5), ("unary_lt", 0.5), ("unary_ge", 0.5), ("unary_le", 0.5), ("unary_eq", 0.5),
    ("unary_ne", 0.5)])
def test_sfpu_unary_param(artifact, monkeypatch, name, param):
    a, b = inputs(8)
    if name == "power":
        a = (a.abs() + 0.1).bfloat16().float()   # bf16-representable, as inputs() (TF32 unpack is lossless)
    a[1, :4] = 0.5   # equality with the parameter
    p0 = param if name == "power_iterative" else f32_bits(param)
    c, _ = run(artifact, monkeypatch, OP_PARAM + PARAM.index(name), a, b, p0=p0)
    p = torch.tensor(float(param))
    ref = {"power": lambda x: torch.pow(x, p), "power_iterative": lambda x: x * x * x,
           "unary_max": lambda x: torch.maximum(x, p), "unary_min": lambda x: torch.minimum(x, p),
           "unary_gt": lambda x: (x > p).float(), "unary_lt": lambda x: (x < p).float(),
           "unary_ge": lambda x: (x >= p).float(), "unary_le": lambda x: (x <= p).float(),
           "unary_eq": lambda x: (x == p).float(), "unary_ne": lambda x: (x != p).float()}[name](a)
    torch.testing.assert_close(c, ref, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", BINARY)
def test_sfpu_binary(artifact, monkeypatch, name):
    a, b = inputs(9)
    b[2, :8] = a[2, :8]   # equal pairs
    c, _ = run(artifact, monkeypatch, OP_BINARY + BINARY.index(name), a, b)
    ref = {"binary_max": torch.maximum, "binary_min": torch.minimum, "lt_binary": lambda x, y: (x < y).float(),
           "gt_binary": lambda x, y: (x > y).float(), "le_binary": lambda x, y: (x <= y).float(),
           "ge_binary": lambda x, y: (x >= y).float(), "eq_binary": lambda x, y: (x == y).float(),
           "ne_binary": lambda x, y: (x != y).float()}[name]
    torch.testing.assert_close(c, ref(a, b))


def test_where_clamp_and_vector_mode(artifact, monkeypatch):
    a, b = inputs(10)
    a[:, :16] = (a[:, :16] > 0).float()   # a 0/1 mask in part of the condition
    c, _ = run(artifact, monkeypatch, OP_WHERE, a, b)
    a0, a1 = tiles(a)
    torch.testing.assert_close(tiles(c)[0], torch.where(a0 != 0, a1, tiles(b)[0]))
    torch.testing.assert_close(tiles(c)[1], a1)

    c, _ = run(artifact, monkeypatch, OP_CLAMP, a, b, p0=f32_bits(-0.5), p1=f32_bits(0.75))
    torch.testing.assert_close(c, a.clamp(-0.5, 0.75))

    c, _ = run(artifact, monkeypatch, OP_EXP_C, a, b)
    ref0 = a0.clone()
    ref0[:16, :16] = torch.exp(a0[:16, :16])   # face 0
    ref0[16:, :16] = torch.exp(a0[16:, :16])   # face 2
    torch.testing.assert_close(tiles(c)[0], ref0, rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(tiles(c)[1], torch.exp(2.0 * a1), rtol=2e-6, atol=2e-6)


# ---- seeded bugs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", [
    ("reduce_uninit_missing", BUG_NO_UNINIT, {},
     r"compute kernel \S*compute.cpp:\d+: reduce_uninit\(\) must be called before copy_init\(\): the reduce_init at "
     r"line \d+ is still active"),
    ("sfpu_reads_undefined_dst", BUG_UNDEFINED_SFPU, {},
     r"compute kernel \S*compute.cpp:\d+: exp_tile reads DST\[1\], which nothing wrote since tile_regs_acquire\(\)"),
    ("sfpu_reads_dst_of_a_previous_acquire", BUG_SFPU_AFTER_RELEASE, {},
     r"compute kernel \S*compute.cpp:\d+: add_binary_tile reads DST\[1\], which nothing wrote since "
     r"tile_regs_acquire\(\)"),
    ("non_uniform_scaler", REDUCE[("SUM", "ROW")], {"mode": 1},
     r"compute kernel \S*compute.cpp:\d+: reduce_tile: the scaler tile \(CB 2, tile 0\) must hold one value in row 0 "
     r"of every face .* face 3 column 1[01] holds"),
    ("reduce_scaler_through_unconfigured_srca", BUG_NO_RECONFIG, {},
     # the LLK asserts in reduce_init (the unpacker must be configured for its CBs before the init)
     r"compute kernel \S*compute.cpp:\d+: reduce_init for CB 2 \(Float16_b\) while SrcA is configured for Float32: "
     r"reconfig_data_format\(_srca\) must come before the init it affects"),
    ("reduce_tile_other_than_init", BUG_MISMATCHED_REDUCE, {},
     r"reduce_tile<PoolType::MAX, ReduceDim::REDUCE_COL> but the active reduce_init \(line \d+\) configured "
     r"<PoolType::MAX, ReduceDim::REDUCE_ROW>"),
    ("bcast_row_idx", BUG_BCAST_ROW_IDX, {}, r"mul_tiles_bcast_rows with bcast_row_idx 3: only the default 0"),
    ("scaler_pushed_before_write_barrier", REDUCE[("SUM", "ROW")], {"mode": 2},
     r"reader \(RISCV_1\) kernel \S*reader.cpp:\d+: cb_push_back\(2, 1\) publishes pages whose NoC writes were not "
     r"completed: call noc_async_write_barrier\(\) first \(the noc_inline_dw_write issued at line \d+"),
    ("unaligned_inline_write", REDUCE[("SUM", "ROW")], {"mode": 3},
     r"reader \(RISCV_1\) kernel \S*reader.cpp:\d+: noc_inline_dw_write to L1 0x[0-9a-f]+: the address must be "
     r"4-byte aligned"),
], ids=lambda c: c[0])
def test_seeded_bug_refused(artifact, monkeypatch, case):
    _, op, kwargs, message = case
    a, b = inputs(11)
    with pytest.raises(TTSimError, match=message):
        run(artifact, monkeypatch, op, a, b, **kwargs)


def test_reduce_min_does_not_compile(artifact, monkeypatch, tmp_path):
    # the FPU has no MIN pool: the SDK's static_assert, mirrored
    broken = tmp_path / "artifact"
    shutil.copytree(artifact, broken)
    path = broken / "kernels" / "compute.cpp"
    path.write_text(path.read_text().replace("reduce_init<PoolType::MAX, ReduceDim::REDUCE_COL>",
                                             "reduce_init<PoolType::MIN, ReduceDim::REDUCE_COL>"))
    a, b = inputs(12)
    with pytest.raises(TTSimError, match=r"(?s)does not compile.*The FPU reduce has no MIN"):
        run(artifact, monkeypatch, 0, a, b, artifact_dir=broken)


def test_kernels_compile_against_the_real_sdk(artifact):
    """The same kernels through the real TT-Metalium 0.81 headers (riscv GCC, -fsyntax-only): the emulator's
    signatures are the SDK's."""
    from tilelang_tt.realcheck import kernels as rk

    # the toolchain and the pinned wheel are requirements of the test command (scripts/env.sh installs them, the
    # end-of-session real-header check needs them too): their absence is a failure, not a skip
    units = rk.check_kernels(_plan("Float16_b"), artifact)
    bad = [f"{u.kernel} [{u.unit}]: {u.first_error()}" for u in units if not u.ok]
    assert not bad, "\n".join(bad)
