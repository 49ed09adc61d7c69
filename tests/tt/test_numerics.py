"""tt-sim computes as the hardware does: SrcA/SrcB narrowing, unpack-to-DEST, math fidelity phases, the packer's
bf16 rounding (../shared/reference/TT_KERNEL_PATTERNS.md 5.1-5.3, docs/emulator.md "Numeric model").

The references here are written from the reference's text in NumPy, independently of the emulator's C++:
* unpack of a Float32 CB into SrcA/SrcB: TF32 = "low 13 mantissa bits dropped" with fp32 DST accumulation, BF16
  (the low 16 bits dropped: the unpacker's FP32->BF16 rounding is unverified in the reference; the emulator
  truncates, as for TF32) without it; an A2D copy of a CB with UnpackToDestFp32 arrives exact;
* a multiply runs the phases of its fidelity, phase products A_hi*B_hi, A_lo*B_hi, A_hi*B_lo, A_lo*B_lo with
  A_hi = 1 + 4 MSBs of SrcA, A_lo the next 5, B_hi = 1 + 6 MSBs of SrcB, B_lo the next 4; LoFi runs 1 phase,
  HiFi2 2, HiFi3 3, HiFi4 4 (summed here in float64: every partial sum is exact in fp32);
* the packer's FP32 -> BF16 rounds to nearest with ties away from zero (here: by arithmetic on the magnitude),
  denormals to 0, -0 to +0, NaN to Inf.

One hand-written artifact (one tile each of A, B and C) runs each op; the environment picks the op, the formats,
fp32_dest_acc_en, the math fidelity and the CBs with UnpackToDestFp32. End-to-end, generated kernels: fp32
elementwise add is exact (copy_tile + SFPU on unpack-to-DEST), the same add on the FPU (fp32 accumulation off)
and an fp32 GEMM (TF32 through the FPU) have the model's error, nonzero and within the bound derived from it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tilelang
import torch

from examples import kernels as K
from tilelang_tt import emulator

CB_A, CB_B, CB_C = 0, 1, 16
OP_COPY, OP_MUL, OP_ADD, OP_MATMUL, OP_SFPU_ADD, OP_MATMUL_BOTH = 0, 1, 2, 3, 4, 5
PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}

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
std::string env(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}
tt::DataFormat format_of(const std::string& name) {
    return name == "Float32" ? tt::DataFormat::Float32 : tt::DataFormat::Float16_b;
}
MathFidelity fidelity_of(const std::string& name) {
    return name == "LoFi" ? MathFidelity::LoFi : name == "HiFi2" ? MathFidelity::HiFi2
         : name == "HiFi3" ? MathFidelity::HiFi3 : MathFidelity::HiFi4;
}
std::vector<uint32_t> read_tensor(const std::string& path, size_t bytes) {
    std::ifstream file(path, std::ios::binary);
    std::vector<uint32_t> words(bytes / 4);
    file.read(reinterpret_cast<char*>(words.data()), static_cast<std::streamsize>(bytes));
    if (!file) throw std::runtime_error("cannot read " + path);
    return words;
}
}  // namespace

int main(int argc, char** argv) {
    (void)argc;
    const std::string data_dir = argv[1];
    const std::string artifact_dir = argv[2];
    const tt::DataFormat in_fmt = format_of(env("NUM_IN_FMT", "Float32"));
    const tt::DataFormat out_fmt = format_of(env("NUM_OUT_FMT", "Float32"));
    const uint32_t in_tile = in_fmt == tt::DataFormat::Float32 ? 4096 : 2048;
    const uint32_t out_tile = out_fmt == tt::DataFormat::Float32 ? 4096 : 2048;
    const uint32_t op = static_cast<uint32_t>(std::stoul(env("NUM_OP", "0")));
    const uint32_t utd = static_cast<uint32_t>(std::stoul(env("NUM_UTD", "0")));   // bit i: CB i unpacks to DST

    std::shared_ptr<distributed::MeshDevice> mesh = distributed::MeshDevice::create_unit_mesh(0);
    distributed::MeshCommandQueue& cq = mesh->mesh_command_queue();
    auto make = [&](uint32_t bytes) {
        distributed::DeviceLocalBufferConfig config{.page_size = bytes, .buffer_type = BufferType::DRAM};
        return distributed::MeshBuffer::create(distributed::ReplicatedBufferConfig{.size = bytes}, config, mesh.get());
    };
    auto A = make(in_tile), B = make(in_tile), C = make(out_tile);

    Program program = CreateProgram();
    const CoreCoord core{0, 0};
    CreateCircularBuffer(program, core, CircularBufferConfig(in_tile, {{0, in_fmt}}).set_page_size(0, in_tile));
    CreateCircularBuffer(program, core, CircularBufferConfig(in_tile, {{1, in_fmt}}).set_page_size(1, in_tile));
    CreateCircularBuffer(program, core, CircularBufferConfig(out_tile, {{16, out_fmt}}).set_page_size(16, out_tile));

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
    std::vector<UnpackToDestMode> unpack_to_dest(32, UnpackToDestMode::Default);
    for (uint32_t cb = 0; cb < 32; ++cb) {
        if (utd >> cb & 1u) unpack_to_dest[cb] = UnpackToDestMode::UnpackToDestFp32;
    }
    const KernelHandle compute = CreateKernel(program, artifact_dir + "/kernels/compute.cpp", core,
        ComputeConfig{.math_fidelity = fidelity_of(env("NUM_FIDELITY", "HiFi4")),
                      .fp32_dest_acc_en = env("NUM_FP32", "1") == "1", .unpack_to_dest_mode = unpack_to_dest,
                      .compile_args = {}});

    SetRuntimeArgs(program, reader, core, {static_cast<uint32_t>(A->address()), static_cast<uint32_t>(B->address())});
    SetRuntimeArgs(program, writer, core, {static_cast<uint32_t>(C->address())});
    SetRuntimeArgs(program, compute, core, {op});

    distributed::EnqueueWriteMeshBuffer(cq, A, read_tensor(data_dir + "/A.bin", in_tile), false);
    distributed::EnqueueWriteMeshBuffer(cq, B, read_tensor(data_dir + "/B.bin", in_tile), false);
    distributed::MeshWorkload workload;
    workload.add_program(distributed::MeshCoordinateRange(mesh->shape()), std::move(program));
    distributed::EnqueueMeshWorkload(cq, workload, false);
    std::vector<uint32_t> result;
    distributed::EnqueueReadMeshBuffer(cq, result, C, true);
    std::ofstream out(data_dir + "/C.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(result.data()), static_cast<std::streamsize>(result.size() * 4));
    out.close();
    distributed::Finish(cq);
    mesh->close();
    return 0;
}
"""

READER = r"""
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    constexpr auto a_args = TensorAccessorArgs<0>();
    const auto a = TensorAccessor(a_args, get_arg_val<uint32_t>(0));
    constexpr auto b_args = TensorAccessorArgs<a_args.next_compile_time_args_offset()>();
    const auto b = TensorAccessor(b_args, get_arg_val<uint32_t>(1));
    constexpr uint32_t cb_a = 0, cb_b = 1;
    cb_reserve_back(cb_a, 1);
    noc_async_read_page(0, a, get_write_ptr(cb_a));
    noc_async_read_barrier();
    cb_push_back(cb_a, 1);
    cb_reserve_back(cb_b, 1);
    noc_async_read_page(0, b, get_write_ptr(cb_b));
    noc_async_read_barrier();
    cb_push_back(cb_b, 1);
}
"""

WRITER = r"""
#include <cstdint>

#include "api/dataflow/dataflow_api.h"

void kernel_main() {
    constexpr auto c_args = TensorAccessorArgs<0>();
    const auto c = TensorAccessor(c_args, get_arg_val<uint32_t>(0));
    constexpr uint32_t cb_c = 16;
    cb_wait_front(cb_c, 1);
    noc_async_write_page(0, c, get_read_ptr(cb_c));
    noc_async_write_barrier();
    cb_pop_front(cb_c, 1);
}
"""

COMPUTE = f"""
// Hand-written numerics probe (tests/tt/test_numerics.py): one op on one tile of A (and B) into C.
#include <cstdint>

#include "api/compute/common.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/eltwise_binary_sfpu.h"
#include "api/compute/matmul.h"
#include "api/compute/pack.h"
#include "api/compute/tile_move_copy.h"

void kernel_main() {{
    const uint32_t op = get_arg_val<uint32_t>(0);
    constexpr uint32_t cb_a = {CB_A}, cb_b = {CB_B}, cb_c = {CB_C};
    if (op == {OP_MATMUL} || op == {OP_MATMUL_BOTH}) {{
        compute_kernel_hw_startup<SrcOrder::Reverse>(cb_a, cb_b, cb_c);   // in0 -> SrcB, in1 -> SrcA
    }} else {{
        compute_kernel_hw_startup(cb_a, cb_b, cb_c);
    }}
    cb_wait_front(cb_a, 1);
    cb_wait_front(cb_b, 1);
    cb_reserve_back(cb_c, 1);
    switch (op) {{
        case {OP_COPY}:
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            break;
        case {OP_MUL}:
            mul_init(cb_a, cb_b);
            tile_regs_acquire();
            mul_tiles(cb_a, cb_b, 0, 0, 0);
            break;
        case {OP_ADD}:
            add_init(cb_a, cb_b);
            tile_regs_acquire();
            add_tiles(cb_a, cb_b, 0, 0, 0);
            break;
        case {OP_MATMUL}:
            matmul_init(cb_a, cb_b);
            tile_regs_acquire();
            matmul_tiles(cb_a, cb_b, 0, 0, 0);
            break;
        case {OP_MATMUL_BOTH}:   // the same two L1 tiles multiplied as they are, then with in1 transposed
            matmul_init(cb_a, cb_b);
            tile_regs_acquire();
            matmul_tiles(cb_a, cb_b, 0, 0, 0);
            matmul_init(cb_a, cb_b, 1);
            matmul_tiles(cb_a, cb_b, 0, 0, 0);
            break;
        default:  // exact fp32 elementwise: both operands copied to DST, added on the SFPU
            copy_init(cb_a);
            tile_regs_acquire();
            copy_tile(cb_a, 0, 0);
            copy_init(cb_b);
            copy_tile(cb_b, 0, 1);
            add_binary_tile_init();
            add_binary_tile(0, 1, 0);
            break;
    }}
    tile_regs_commit();
    tile_regs_wait();
    pack_tile(0, cb_c);
    tile_regs_release();
    cb_push_back(cb_c, 1);
    cb_pop_front(cb_a, 1);
    cb_pop_front(cb_b, 1);
}}
"""


def _plan(in_fmt: str, out_fmt: str, fp32: bool, fidelity: str) -> dict:
    page = {"Float32": 4096, "Float16_b": 2048}
    buffers = [{"name": n, "param_index": i, "shape": [32, 32], "padded_shape": [32, 32], "dtype": f, "format": f,
                "layout": "tiled_32x32_interleaved", "placement": "DRAM", "page_size": page[f], "num_pages": 1,
                "bytes": page[f], "io": io}
               for i, (n, f, io) in enumerate((("A", in_fmt, "input"), ("B", in_fmt, "input"),
                                               ("C", out_fmt, "output")))]
    kernels = {
        "reader": {"file": "kernels/reader.cpp", "processor": "RISCV_1", "noc": "RISCV_1_default",
                   "compile_args": [{"tensor_accessor": "A"}, {"tensor_accessor": "B"}]},
        "writer": {"file": "kernels/writer.cpp", "processor": "RISCV_0", "noc": "RISCV_0_default",
                   "compile_args": [{"tensor_accessor": "C"}]},
        "compute": {"file": "kernels/compute.cpp", "compile_args": [], "fp32_dest_acc_en": fp32,
                    "math_fidelity": fidelity},
    }
    cbs = [{"index": CB_A, "format": in_fmt}, {"index": CB_B, "format": in_fmt}, {"index": CB_C, "format": out_fmt}]
    return {"kernel": "numerics", "device": {"arch": "wormhole_b0", "num_cbs": 32}, "buffers": buffers, "cbs": cbs,
            "kernels": kernels}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    root = tmp_path_factory.mktemp("numerics")
    (root / "kernels").mkdir()
    (root / "host.cpp").write_text(HOST)
    (root / "kernels" / "reader.cpp").write_text(READER)
    (root / "kernels" / "writer.cpp").write_text(WRITER)
    (root / "kernels" / "compute.cpp").write_text(COMPUTE)
    (root / "tt.plan.json").write_text(json.dumps(_plan("Float32", "Float32", True, "HiFi4"), indent=1))
    return root


def run(artifact, monkeypatch, op, a, b, *, in_fmt="Float32", out_fmt="Float32", fp32=True, fidelity="HiFi4",
        unpack_to_dest=()):
    """One emulator run of ``op`` on the 32x32 tiles a and b; returns C as float32 NumPy."""
    monkeypatch.setenv("NUM_OP", str(op))
    monkeypatch.setenv("NUM_IN_FMT", in_fmt)
    monkeypatch.setenv("NUM_OUT_FMT", out_fmt)
    monkeypatch.setenv("NUM_FP32", "1" if fp32 else "0")
    monkeypatch.setenv("NUM_FIDELITY", fidelity)
    monkeypatch.setenv("NUM_UTD", str(sum(1 << cb for cb in unpack_to_dest)))
    tin = torch.float32 if in_fmt == "Float32" else torch.bfloat16
    tout = torch.float32 if out_fmt == "Float32" else torch.bfloat16
    c = torch.zeros(32, 32, dtype=tout)
    emulator.run(artifact, _plan(in_fmt, out_fmt, fp32, fidelity),
                 {0: torch.from_numpy(a).to(tin), 1: torch.from_numpy(b).to(tin), 2: c}, timeout_s=120)
    return c.float().numpy()


# ---- references from the text ----------------------------------------------------------------------------------
def bits(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def from_bits(u) -> np.ndarray:
    return np.ascontiguousarray(u, dtype=np.uint32).view(np.float32)


def tf32(x):
    """FP32 -> TF32 (1 + 8 + 10): the low 13 mantissa bits dropped."""
    return from_bits(bits(x) & np.uint32(0xFFFFE000))


def bf16_truncated(x):
    return from_bits(bits(x) & np.uint32(0xFFFF0000))


def phase_product(a, b, fidelity: str) -> np.ndarray:
    """SrcA value a times SrcB value b as the fidelity phases sum them (float64; the sums are exact)."""
    a_hi = from_bits(bits(a) & np.uint32(0xFFF80000)).astype(np.float64)          # implicit 1 + 4 MSBs
    a_lo = from_bits(bits(a) & np.uint32(0xFFFFC000)).astype(np.float64) - a_hi    # the next 5 bits
    b_hi = from_bits(bits(b) & np.uint32(0xFFFE0000)).astype(np.float64)          # implicit 1 + 6 MSBs
    b_lo = np.asarray(b, np.float64) - b_hi                                         # the next 4 (TF32) bits
    phases = [a_hi * b_hi, a_lo * b_hi, a_hi * b_lo, a_lo * b_lo]
    return sum(phases[:PHASES[fidelity]])


def packer_bf16(x):
    """The packer's FP32 -> BF16: nearest, ties away from zero, on the magnitude; denormal and -0 -> +0; NaN -> Inf
    (the reference does not say which sign: the sign bit is kept, as for every other value)."""
    negative = np.signbit(np.asarray(x, np.float32))
    x = np.asarray(x, np.float32).astype(np.float64)
    out = np.zeros_like(x)
    mag = np.abs(x)
    normal = np.isfinite(x) & (mag >= 2.0**-126)
    e = np.floor(np.log2(np.where(normal, mag, 1.0)))
    ulp = 2.0 ** (e - 7)
    out[normal] = (np.sign(x) * np.floor(mag / ulp + 0.5) * ulp)[normal]
    out[np.isinf(x)] = x[np.isinf(x)]
    out[np.isnan(x)] = np.where(negative, -np.inf, np.inf)[np.isnan(x)]
    with np.errstate(over="ignore"):      # the largest float rounds up to Inf
        return out.astype(np.float32)


def rne_bf16(x):
    return torch.from_numpy(np.asarray(x, np.float32)).bfloat16().float().numpy()


def random_tiles(seed):
    g = np.random.default_rng(seed)
    return g.standard_normal((32, 32)).astype(np.float32), g.standard_normal((32, 32)).astype(np.float32)


# ---- unpack ----------------------------------------------------------------------------------------------------
def test_copy_tile_narrows_fp32_to_tf32_with_fp32_accumulation(artifact, monkeypatch):
    a, b = random_tiles(1)
    got = run(artifact, monkeypatch, OP_COPY, a, b)
    np.testing.assert_array_equal(got, tf32(a))
    assert (got != a).mean() > 0.99      # nearly every random fp32 value loses low mantissa bits


def test_copy_tile_narrows_fp32_to_bf16_without_fp32_accumulation(artifact, monkeypatch):
    a, b = random_tiles(2)
    got = run(artifact, monkeypatch, OP_COPY, a, b, fp32=False)
    np.testing.assert_array_equal(got, bf16_truncated(a))


def test_unpack_to_dest_copy_is_exact(artifact, monkeypatch):
    a, b = random_tiles(3)
    np.testing.assert_array_equal(run(artifact, monkeypatch, OP_COPY, a, b, unpack_to_dest=(CB_A,)), a)


def test_bf16_reaches_src_exactly(artifact, monkeypatch):
    a, b = (rne_bf16(x) for x in random_tiles(4))
    np.testing.assert_array_equal(run(artifact, monkeypatch, OP_ADD, a, b, in_fmt="Float16_b"), a + b)


# ---- FPU add: the TF32 error; the SFPU path on unpack-to-DEST: exact ----------------------------------------------
def test_fpu_add_of_fp32_has_the_tf32_error(artifact, monkeypatch):
    a, b = random_tiles(5)
    got = run(artifact, monkeypatch, OP_ADD, a, b)
    np.testing.assert_array_equal(got, tf32(a) + tf32(b))   # narrowed operands, one fp32 add
    err = np.abs(got.astype(np.float64) - (a.astype(np.float64) + b))
    bound = 2.0**-10 * (np.abs(a) + np.abs(b)) + 2.0**-24 * np.abs(got)   # truncation to 10 bits, one rounding
    assert (err <= bound).all() and err.max() > 0
    print(f"fp32 add on the FPU: max |err| {err.max():.3g}, max err / (|a|+|b|) "
          f"{(err / (np.abs(a) + np.abs(b))).max():.3g} (TF32 bound 2^-10 = {2**-10:.3g})")


def test_sfpu_add_on_unpack_to_dest_is_exact(artifact, monkeypatch):
    a, b = random_tiles(6)
    got = run(artifact, monkeypatch, OP_SFPU_ADD, a, b, unpack_to_dest=(CB_A, CB_B))
    np.testing.assert_array_equal(got, a + b)


# ---- fidelity phases -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fidelity", sorted(PHASES))
def test_elementwise_mul_runs_the_fidelity_phases(artifact, monkeypatch, fidelity):
    a, b = random_tiles(7)
    got = run(artifact, monkeypatch, OP_MUL, a, b, fidelity=fidelity)     # a in SrcA, b in SrcB
    want = phase_product(tf32(a), tf32(b), fidelity).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_fidelities_differ_and_hifi4_is_the_tf32_product(artifact, monkeypatch):
    a, b = (rne_bf16(x) for x in random_tiles(8))
    out = {f: run(artifact, monkeypatch, OP_MUL, a, b, in_fmt="Float16_b", fidelity=f) for f in PHASES}
    exact = (a.astype(np.float64) * b).astype(np.float32)
    np.testing.assert_array_equal(out["HiFi4"], exact)              # bf16 x bf16 fits every phase
    for f in ("LoFi", "HiFi2", "HiFi3"):
        np.testing.assert_array_equal(out[f], phase_product(a, b, f).astype(np.float32))
        assert (out[f] != exact).any(), f
    # LoFi keeps 1 + 4 bits of A and 1 + 6 of B: relative error below 2^-4 + 2^-6
    assert (np.abs(out["LoFi"] - exact) <= (2.0**-4 + 2.0**-6) * np.abs(exact)).all()


@pytest.mark.parametrize("fidelity", sorted(PHASES))
def test_matmul_runs_the_fidelity_phases(artifact, monkeypatch, fidelity):
    a, b = random_tiles(9)
    got = run(artifact, monkeypatch, OP_MATMUL, a, b, fidelity=fidelity)
    # C = A @ B; in0 (A) through SrcB, in1 (B) through SrcA: term (i, k, j) = phases(SrcA = B[k, j], SrcB = A[i, k])
    terms = phase_product(tf32(b)[None, :, :], tf32(a)[:, :, None], fidelity)      # [i, k, j]
    want = terms.sum(axis=1)
    tol = 32 * 2.0**-24 * np.abs(terms).sum(axis=1)     # fp32 accumulation of 32 exact terms, any order
    assert (np.abs(got - want) <= tol).all()
    hifi4 = phase_product(tf32(b)[None, :, :], tf32(a)[:, :, None], "HiFi4").sum(axis=1)
    if fidelity != "HiFi4":                              # the check can tell the fidelities apart
        assert (np.abs(hifi4 - want) > tol).any()


@pytest.mark.parametrize("fidelity", sorted(PHASES))
def test_matmul_product_is_the_same_at_every_vector_width(artifact, monkeypatch, fidelity):
    # matmul.cpp computes the 32x32x32 product 16 columns at a time (AVX-512), 8 (AVX2) or with the baseline
    # build; TT_SIM_PRODUCT picks a narrower one. Each element is the same operations in the same order in all of
    # them (no fused multiply-add), so they agree bit for bit -- also where products underflow (rows 16-31 of A
    # scaled by 2^-70: products near 2^-140 are denormals a fused multiply-add would not round) and in a 16-bit DST.
    a, b = random_tiles(12)
    a[16:] *= np.float32(2.0**-70)
    b *= np.float32(2.0**-70)
    for fp32 in (True, False):
        out = {}
        for width in ("generic", "avx2", ""):
            monkeypatch.setenv("TT_SIM_PRODUCT", width)
            out[width] = run(artifact, monkeypatch, OP_MATMUL, a, b, fidelity=fidelity, fp32=fp32)
        monkeypatch.delenv("TT_SIM_PRODUCT")
        if fp32:       # (a 16-bit DST flushes them)
            assert (out[""][16:] != 0).any() and (np.abs(out[""][16:]) < 2.0**-126).any()
        for width in ("generic", "avx2"):
            np.testing.assert_array_equal(bits(out[width]), bits(out[""]), err_msg=f"{width}, fp32 DST {fp32}")


def test_matmul_prepares_an_unchanged_tile_again_for_a_transposed_init(artifact, monkeypatch):
    # tt-sim caches matmul operands by their L1 bytes (matmul.cpp); the same bytes with in1 transposed are
    # another operand: C = A @ B + A @ B^T, not 2 A @ B
    a, b = random_tiles(11)
    got = run(artifact, monkeypatch, OP_MATMUL_BOTH, a, b)
    terms = [phase_product(tf32(m)[None, :, :], tf32(a)[:, :, None], "HiFi4") for m in (b, b.T)]   # [i, k, j]
    want = terms[0].sum(axis=1) + terms[1].sum(axis=1)
    tol = 64 * 2.0**-24 * (np.abs(terms[0]).sum(axis=1) + np.abs(terms[1]).sum(axis=1))
    assert (np.abs(got - want) <= tol).all()
    assert (np.abs(got - 2 * terms[0].sum(axis=1)) > tol).any()


# ---- pack ------------------------------------------------------------------------------------------------------
def test_packer_rounds_to_bf16_ties_away_from_zero(artifact, monkeypatch):
    g = np.random.default_rng(10)
    u = g.integers(0x3F000000, 0x41000000, size=(32, 32), dtype=np.uint64).astype(np.uint32)
    u[:8] = (u[:8] & 0xFFFF0000) | 0x8000                    # exact ties, even and odd bf16 mantissas
    u[8:12] = (u[8:12] & 0xFFFF0000) | 0x8001                # just above a tie
    u[12:16] = (u[12:16] & 0xFFFF0000) | 0x7FFF              # just below
    u[::2] |= 0x80000000                                     # negative rows
    specials = [0x80000000, 0x00000001, 0x807FFFFF, 0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000, 0x7F7FFFFF]
    u[31, :len(specials)] = specials                         # -0, denormals, NaNs, Infs, the largest float
    a = from_bits(u)
    got = run(artifact, monkeypatch, OP_COPY, a, a, out_fmt="Float16_b", unpack_to_dest=(CB_A,))
    want = packer_bf16(a)
    np.testing.assert_array_equal(bits(got), bits(want))
    ties = np.zeros_like(a, bool)
    ties[:8] = True
    assert (rne_bf16(a)[ties] != want[ties]).any()          # round-to-nearest-even would differ on half the ties


# ---- end to end: generated kernels -------------------------------------------------------------------------------
def test_generated_fp32_add_is_exact_on_unpack_to_dest():
    kernel = tilelang.compile(K.elementwise_add(64, 96, "float32"), target="tt")
    assert kernel.plan["kernels"]["compute"]["unpack_to_dest"] == [0, 1]
    src = (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    assert "add_binary_tile(" in src and "add_tiles(" not in src
    assert "UnpackToDestMode::UnpackToDestFp32" in (kernel.artifact_dir / "host.cpp").read_text()
    torch.manual_seed(11)
    a, b = torch.randn(64, 96), torch.randn(64, 96)
    c = torch.empty(64, 96)
    kernel(a, b, c)
    assert torch.equal(c, a + b)


def test_generated_fp32_add_on_the_fpu_has_the_bf16_unpack_error():
    # fp32 accumulation off: DST is 16-bit, so the add takes the FPU (add_tiles) and the operands reach SrcA/SrcB
    # as BF16; the sum is rounded to bf16 in DST (nearest even) and packed to fp32 exactly
    kernel = tilelang.compile(K.elementwise_add(64, 96, "float32"), target="tt -fp32_dest_acc=false")
    assert "unpack_to_dest" not in kernel.plan["kernels"]["compute"]
    assert "add_tiles(" in (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    torch.manual_seed(12)
    a, b = torch.randn(64, 96), torch.randn(64, 96)
    c = torch.empty(64, 96)
    kernel(a, b, c)
    want = rne_bf16(bf16_truncated(a.numpy()) + bf16_truncated(b.numpy()))
    np.testing.assert_array_equal(c.numpy(), want)
    err = np.abs(c.numpy().astype(np.float64) - (a + b).numpy())
    bound = 2.0**-7 * (np.abs(a.numpy()) + np.abs(b.numpy())) + 2.0**-8 * np.abs(c.numpy())
    assert (err <= bound).all() and err.max() > 0


def test_generated_fp32_gemm_has_the_tf32_error():
    M = N = Kd = 128
    kernel = tilelang.compile(K.design_gemm(M, N, Kd, dtype="float32"), target="tt")
    assert kernel.plan["math_fidelity"] == "HiFi4" and kernel.plan["kernels"]["compute"]["fp32_dest_acc_en"]
    torch.manual_seed(13)
    a, b = torch.randn(M, Kd), torch.randn(Kd, N)
    c = torch.empty(M, N)
    kernel(a, b, c)
    ref = a.double() @ b.double()
    err = (c.double() - ref).abs()
    # in0 (A) through SrcB as TF32 (< 2^-10 relative), in1 (B) through SrcA, whose multiplier uses 9 mantissa bits
    # (< 2^-9); products exact in fp32, sums fp32 (K 2^-24); partials, if any, reload exactly (unpack-to-DEST)
    bound = (2.0**-9 + 2.0**-10 + 2.0**-19 + Kd * 2.0**-24) * (a.double().abs() @ b.double().abs())
    assert (err <= bound).all()
    rel = (err / (a.double().abs() @ b.double().abs())).max().item()
    assert rel > 2.0**-14           # the TF32 error is there: full fp32 products would stay near K 2^-24
    print(f"fp32 GEMM {M}x{N}x{Kd}: max |err| {err.max().item():.3g}, max err / sum|a||b| {rel:.3g} "
          f"(bound {2.0**-9 + 2.0**-10 + 2.0**-19 + Kd * 2.0**-24:.3g})")


def test_kernels_compile_against_the_real_sdk(artifact):
    """The probe kernels through the real TT-Metalium 0.81 headers: the emulator's API is the SDK's."""
    from tilelang_tt.realcheck import kernels as rk

    units = rk.check_kernels(_plan("Float32", "Float32", True, "HiFi4"), artifact)
    bad = [f"{u.kernel} [{u.unit}]: {u.first_error()}" for u in units if not u.ok]
    assert not bad, "\n".join(bad)
