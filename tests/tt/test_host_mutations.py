"""Seeded mutations of a generated host.cpp, each rejected by `tilelang-tt check` with a message naming the problem.

The host program is compiled (g++ -std=c++20 -fsyntax-only -Wall -Werror) against TT-Metalium 0.81.1 host
declarations generated from the exports of the ttnn 0.81.1 wheel's libtt_metal.so, then matched against
tt.plan.json (realcheck/host.py). One mutation the check cannot see is kept as a documented limit.
"""

import re
import shutil

import pytest
import tilelang

from examples import kernels as K
from tilelang_tt import cli

# (id, kind, text in host.cpp, replacement, expected message (regex) in `tilelang-tt check`'s error)
MUTATIONS = [
    ("create_kernel_without_config", "argument count",
     "cores,\n        DataMovementConfig{.processor = DataMovementProcessor::RISCV_1, .noc = NOC::RISCV_1_default, "
     ".compile_args = reader_compile_args});", "cores);",
     r"no matching function for call to .CreateKernel\("),
    ("set_runtime_args_extra_argument", "argument count",
     "SetRuntimeArgs(program, reader, core, reader_args);", "SetRuntimeArgs(program, reader, core, reader_args, 0);",
     r"no matching function for call to .SetRuntimeArgs\("),
    ("mesh_buffer_create_takes_raw_pointer", "argument type",
     "A_config, mesh.get());", "A_config, mesh);",
     r"cannot convert .std::shared_ptr<tt::tt_metal::distributed::MeshDevice>. to .tt::tt_metal::distributed::MeshDevice\*."),
    ("enqueue_program_instead_of_workload", "argument type",
     "distributed::EnqueueMeshWorkload(cq, workload, false);", "distributed::EnqueueMeshWorkload(cq, program, false);",
     r"invalid initialization of reference of type .tt::tt_metal::distributed::MeshWorkload&"),
    ("cb_config_format_not_a_map", "argument type",
     "CircularBufferConfig(4096, {{0, tt::DataFormat::Float16_b}})",
     "CircularBufferConfig(4096, tt::DataFormat::Float16_b)",
     r"no matching function for call to .tt::tt_metal::CircularBufferConfig::CircularBufferConfig\("),
    ("program_copied_not_moved", "argument type (move-only Program)",
     "std::move(program)", "program",
     r"cannot bind rvalue reference of type .tt::tt_metal::Program&&. to lvalue"),
    ("dm_config_field_renamed", "struct field",
     ".noc = NOC::RISCV_1_default", ".noc_id = NOC::RISCV_1_default",
     r"DataMovementConfig. has no non-static data member named .noc_id"),
    ("compute_config_field_order", "struct field order",
     ".math_fidelity = MathFidelity::HiFi2, .fp32_dest_acc_en = false",
     ".fp32_dest_acc_en = false, .math_fidelity = MathFidelity::HiFi2",
     r"designator order for field .tt::tt_metal::ComputeConfig::math_fidelity. does not match declaration order"),
    ("buffer_config_old_field", "struct field (pre-0.81 API)",
     "A_config{.page_size = 2048, .buffer_type = BufferType::DRAM}",
     "A_config{.page_size = 2048, .buffer_type = BufferType::DRAM, .buffer_layout = TensorMemoryLayout::INTERLEAVED}",
     r"DeviceLocalBufferConfig. has no non-static data member named .buffer_layout"),
    ("math_fidelity_enum", "enum value",
     "MathFidelity::HiFi2", "MathFidelity::HiFi1", r".HiFi1. is not a member of .tt::tt_metal::MathFidelity"),
    ("data_format_enum", "enum value",
     "{{0, tt::DataFormat::Float16_b}}", "{{0, tt::DataFormat::BFloat16}}",
     r".BFloat16. is not a member of .tt::DataFormat"),
    ("buffer_type_enum", "enum value",
     "A_config{.page_size = 2048, .buffer_type = BufferType::DRAM}",
     "A_config{.page_size = 2048, .buffer_type = BufferType::Dram}", r".Dram. is not a member of .tt::tt_metal::BufferType"),
    ("renamed_mesh_command_queue", "renamed method",
     "mesh->mesh_command_queue()", "mesh->command_queue()", r"has no member named .command_queue"),
    ("renamed_append_to", "renamed method",
     "TensorAccessorArgs(*A).append_to(reader_compile_args);", "TensorAccessorArgs(*A).append(reader_compile_args);",
     r".class tt::tt_metal::TensorAccessorArgs. has no member named .append."),
    ("removed_api_enqueue_program", "removed API",
     "distributed::EnqueueMeshWorkload(cq, workload, false);", "EnqueueProgram(cq, program, false);",
     r".EnqueueProgram. was not declared in this scope"),
    ("removed_api_create_device", "removed API",
     "distributed::MeshDevice::create_unit_mesh(0)", "CreateDevice(0)", r".CreateDevice. was not declared in this scope"),
    ("removed_enqueue_workload", "removed call",
     "distributed::EnqueueMeshWorkload(cq, workload, false);", "",
     r"never enqueues the workload: nothing would run \(EnqueueMeshWorkload is never called\)"),
    ("removed_input_write", "removed call",
     "distributed::EnqueueWriteMeshBuffer(cq, B, B_host, false);", "",
     r"never writes input B to the device \(distributed::EnqueueWriteMeshBuffer\)"),
    ("removed_compute_runtime_args", "removed call",
     "SetRuntimeArgs(program, compute, core, compute_args);", "",
     r"never sets the compute kernel's runtime args \(SetRuntimeArgs\)"),
    ("removed_include", "removed include",
     "#include <tt-metalium/tensor_accessor_args.hpp>\n", "",
     r"host.cpp does not #include <tt-metalium/tensor_accessor_args.hpp>"),
    ("read_before_run", "call order",
     "distributed::EnqueueMeshWorkload(cq, workload, false);\n    std::vector<uint32_t> C_result;\n"
     "    distributed::EnqueueReadMeshBuffer(cq, C_result, C, true);",
     "std::vector<uint32_t> C_result;\n    distributed::EnqueueReadMeshBuffer(cq, C_result, C, true);\n"
     "    distributed::EnqueueMeshWorkload(cq, workload, false);",
     r"calls EnqueueReadMeshBuffer before EnqueueMeshWorkload, which must come first"),
    ("cb_format_differs_from_plan", "value against the plan",
     "{{1, tt::DataFormat::Float16_b}}", "{{1, tt::DataFormat::Float32}}",
     r"creates circular buffer c_1 \(B_blk\) with \(total bytes, format, page size\) = \('4096', 'Float32', '2048'\), "
     r"but the plan and the kernels compiled for it use \('4096', 'Float16_b', '2048'\)"),
    ("buffer_size_differs_from_plan", "value against the plan",
     "ReplicatedBufferConfig{.size = 8192}, C_config", "ReplicatedBufferConfig{.size = 4096}, C_config",
     r"creates device buffer C with \(page size, size\) = \(2048, 4096\), but the plan says \(2048, 8192\)"),
]

# What the check cannot see: the runtime-arg *values* (here the reader's two tensor addresses swapped). The
# program is type-correct and complete; the emulator run (not this check) computes B @ A instead.
NOT_CAUGHT = ("reader_addresses_swapped",
              "reader_args.push_back(static_cast<uint32_t>(A->address()));\n"
              "        reader_args.push_back(static_cast<uint32_t>(B->address()));",
              "reader_args.push_back(static_cast<uint32_t>(B->address()));\n"
              "        reader_args.push_back(static_cast<uint32_t>(A->address()));")


@pytest.fixture(scope="module")
def gemm_artifact():
    return tilelang.compile(K.design_gemm(64, 64, 64), target="tt -multicast=false").artifact_dir   # corpus text


def _mutated(artifact, tmp_path, old, new):
    out = tmp_path / "artifact"
    shutil.copytree(artifact, out)
    host = out / "host.cpp"
    text = host.read_text()
    assert old in text, f"{old!r} not in the generated host.cpp: update the mutation"
    host.write_text(text.replace(old, new, 1))
    return out


def _check(directory, capsys):
    rc = cli.main(["check", str(directory)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_unmutated_host_passes(gemm_artifact, capsys):
    rc, out, err = _check(gemm_artifact, capsys)
    assert rc == 0, out + err
    assert re.search(r"PASS host\.cpp +g\+\+ -std=c\+\+20 against the 0\.81\.1 host API", out), out


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_rejected(mutation, gemm_artifact, tmp_path, capsys):
    name, kind, old, new, message = mutation
    broken = _mutated(gemm_artifact, tmp_path, old, new)
    rc, out, err = _check(broken, capsys)
    assert rc == 1, f"{name} ({kind}) was not rejected:\n{out}{err}"
    # the first error is on stderr; the summary on stdout lists every host problem
    assert re.search(message, out + err), f"{name} ({kind}): unexpected message:\n{out}{err}"
    assert "FAIL host.cpp" in out


def test_enough_mutations_of_each_kind():
    kinds = {m[1].split(" (")[0] for m in MUTATIONS}
    assert {"argument count", "argument type", "struct field", "enum value", "renamed method", "removed API",
            "removed call"} <= kinds
    assert len(MUTATIONS) >= 10


def test_runtime_arg_values_are_not_checked(gemm_artifact, tmp_path, capsys):
    """A documented limit (docs/real_sdk.md): if this starts failing, the check got stronger; move it to MUTATIONS."""
    _, old, new = NOT_CAUGHT
    rc, out, err = _check(_mutated(gemm_artifact, tmp_path, old, new), capsys)
    assert rc == 0, out + err


def test_enum_definitions_are_checked_against_the_library(monkeypatch):
    """The hand-written enumerators must match the library's reflection tables (names, order by value)."""
    from tilelang_tt.realcheck import host
    from tilelang_tt.realcheck.sdk import TTCheckError, libtt_metal

    lib = libtt_metal().read_bytes()
    decl, values = host.ENUMS["MathFidelity"]
    assert host._enum_text(decl, values, lib, "MathFidelity").startswith("enum class MathFidelity")
    with pytest.raises(TTCheckError, match=r"MathFidelity: libtt_metal.so 0.81.1 has no enum table listing LoFi, HiFi2, "
                                           r"HiFi5, HiFi4"):
        host._enum_text(decl, [("LoFi", 0), ("HiFi2", 2), ("HiFi5", 3), ("HiFi4", 4)], lib, "MathFidelity")
    with pytest.raises(TTCheckError, match="no enum table listing Default, UnpackToDestFp32"):   # wrong value order
        host._enum_text("enum class UnpackToDestMode", [("Default", 0), ("UnpackToDestFp32", 1)], lib, "UnpackToDestMode")


def test_declared_api_must_be_exported(monkeypatch):
    """A name the declarations rely on that libtt_metal.so does not export stops the check instead of passing."""
    from tilelang_tt.realcheck import host
    from tilelang_tt.realcheck.sdk import TTCheckError, libtt_metal

    monkeypatch.setitem(host.RETURNS, "tt::tt_metal::EnqueueProgram", "void")
    with pytest.raises(TTCheckError, match=r"exports no tt::tt_metal::EnqueueProgram\(\.\.\.\)"):
        host._host_headers(str(libtt_metal()), "seeded-bug")
