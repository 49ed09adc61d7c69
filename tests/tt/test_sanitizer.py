"""A corpus of deliberately broken kernels: tt-sim must stop each one with the right diagnosis.

Each case starts from a correct generated artifact, breaks one thing in one file (the edit is spelled out
below, so the corpus is reviewable), runs it on the emulator and checks the error names the core, the
kernel, the source line and the cause. Nothing may hang: every run is time-bounded.
"""

import re
import shutil

import pytest
import tilelang
import torch

from examples import kernels as K
from tilelang_tt import emulator
from tilelang_tt.emulator import TTSimError


@pytest.fixture(scope="module")
def add_kernel():
    return tilelang.compile(K.elementwise_add(64, 64, "bfloat16"), target={"kind": "tt", "max_cores": 2})


@pytest.fixture(scope="module")
def block_gemm_kernel():
    # B not transposed: the 2x4-tile subblocks of the fused 64x128 accumulator run matmul_block
    return tilelang.compile(K.design_gemm(128, 128, 64), target={"kind": "tt", "max_cores": 2})


@pytest.fixture(scope="module")
def mixed_gemm_kernel():
    # a 4x4-tile fp32 accumulator exceeds DST (4 tiles with fp32): it lives in an fp32 CB beside fp16 CBs (one
    # matmul per step: allow_fp16_reduced keeps in1 unsplit, so SrcA is configured for Float16 where the cases say)
    return tilelang.compile(K.tilelang_example_gemm(128, 256, 64, 128, 128, 32, num_stages=2),
                            target={"kind": "tt", "max_cores": 2, "allow_fp16_reduced": True})


@pytest.fixture(scope="module")
def argmax_kernel():
    # an int32 output: the candidates compute in Float32, typecast_tile<Float32, Int32> before the Int32 pack
    return tilelang.compile(K.argmax_rows(64, 256), target={"kind": "tt", "max_cores": 2})


def tensors_for(kernel):
    out = {}
    for buf in kernel.plan["buffers"]:
        dtype = {"Float16_b": torch.bfloat16, "Float16": torch.float16, "Float32": torch.float32,
                 "Int32": torch.int32}[buf["format"]]
        out[buf["param_index"]] = torch.randn(*buf["shape"]).to(dtype)
    return out


# (id, base kernel, file, text to replace, replacement, count, expected message regex)
CORPUS = [
    # packer L1 accumulation from the start: T.clear's zero packs would add to L1 nothing has written yet
    ("l1_acc_onto_unwritten_pages", "gemm", "kernels/compute.cpp",
     "cb_B_shared, cb_C_local);\n", "cb_B_shared, cb_C_local);\n    pack_reconfig_l1_acc(1);\n", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: pack_tile with L1 accumulation \(pack_reconfig_l1_acc\(1\)\) onto "
     r"page 0 of CB 24, which nothing has written since the CB was created"),
    # matmul_block must run the block shape (and transpose) its init configured
    ("matmul_block_unlike_its_init", "block", "kernels/compute.cpp",
     "matmul_block_init(cb_A_blk, cb_B_blk, 0, 4, 2, 2);", "matmul_block_init(cb_A_blk, cb_B_blk, 0, 4, 1, 2);", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: matmul_block\(transpose=0, ct_dim=4, rt_dim=2, kt_dim=2\) after a "
     r"matmul init configured for transpose=0, ct_dim=4, rt_dim=1, kt_dim=2"),
    ("l1_acc_flag_not_0_or_1", "gemm", "kernels/compute.cpp",
     "pack_reconfig_l1_acc(1);", "pack_reconfig_l1_acc(2);", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: pack_reconfig_l1_acc\(2\): the flag must be 0 or 1"),
    ("deadlock_wait_never_pushed", "add", "kernels/writer.cpp",
     "cb_wait_front(cb_C_out, 1);", "cb_wait_front(cb_C_out, 2);", 1,
     r"(?s)deadlock: every unfinished kernel is blocked.*writer \(RISCV_0\) kernel \S*kernels/writer.cpp:\d+: blocked in "
     r"cb_wait_front\(cb=16, n=2\) \[\d+ pages? pushed, \d+ popped\]"),
    ("pop_more_than_waited", "add", "kernels/compute.cpp",
     "cb_pop_front(cb_A_tile, 1);", "cb_pop_front(cb_A_tile, 2);", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: cb_pop_front\(0, 2\) pops more pages than were waited for \(1\)"),
    ("push_more_than_reserved", "add", "kernels/reader.cpp",
     "cb_push_back(cb_A_tile, 1);", "cb_push_back(cb_A_tile, 2);", 1,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+: cb_push_back\(\d+, 2\) pushes more pages than were reserved \(1\)"),
    ("missing_read_barrier", "add", "kernels/reader.cpp",
     "        noc_async_read_barrier();\n", "", None,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+: cb_push_back\(0, 1\) publishes pages whose NoC reads were not "
     r"completed: call noc_async_read_barrier\(\) first"),
    ("noc_read_outside_buffer", "add", "kernels/dataflow_helpers.h",
     "noc_async_read_page(page, tensor,", "noc_async_read_page(page + 1000, tensor,", 1,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+ \(dataflow_helpers.h:\d+\): noc_async_read_page: page 100\d is outside the buffer at 0x[0-9a-f]+ \(4 pages\)"),
    ("noc_read_into_unreserved_l1", "add", "kernels/reader.cpp",
     "        cb_reserve_back(cb_A_tile, 1);\n", "", 1,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+ \(dataflow_helpers.h:\d+\): get_write_ptr\(0\) without a pending cb_reserve_back"),
    ("missing_write_barrier_before_pop", "add", "kernels/writer.cpp",
     "        noc_async_write_barrier();\n        cb_pop_front(cb_C_out, 1);", "        cb_pop_front(cb_C_out, 1);", 1,
     r"writer \(RISCV_0\) kernel \S*kernels/writer.cpp:\d+: cb_pop_front\(16, 1\) frees pages that a NoC write "
     r"\(issued at dataflow_helpers.h:\d+\) is still reading: call noc_async_write_barrier\(\) first"),
    ("unaligned_noc_read", "add", "kernels/dataflow_helpers.h",
     "noc_async_read_page(page, tensor, l1_write_addr);", "noc_async_read_page(page, tensor, l1_write_addr, 2);", 1,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+ \(dataflow_helpers.h:\d+\): noc_async_read_page: source 0x[0-9a-f]+ \(DRAM\) and "
     r"destination 0x[0-9a-f]+ \(L1\) are not congruent modulo 32 B"),
    ("write_without_wait", "add", "kernels/writer.cpp",
     "        cb_wait_front(cb_C_out, 1);\n", "", 1,
     r"writer \(RISCV_0\) kernel \S*kernels/writer.cpp:\d+ \(dataflow_helpers.h:\d+\): get_read_ptr\(16\) without a preceding cb_wait_front"),
    ("dst_over_capacity", "add", "kernels/compute.cpp",
     "pack_tile(0, cb_C_out);", "pack_tile(8, cb_C_out);", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: pack_tile: DST index 8 exceeds the 8 tiles DST holds"),
    ("pack_without_wait", "add", "kernels/compute.cpp",
     "        tile_regs_wait();\n", "", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: pack_tile\(\) outside tile_regs_wait\(\)/tile_regs_release\(\)"),
    ("unbalanced_at_exit", "add", "kernels/compute.cpp",
     "        cb_pop_front(cb_B_tile, 1);\n", "", 1,
     r"(?s)(deadlock.*cb_reserve_back\(cb=1|CB 1 ends unbalanced: \d+ pages pushed, \d+ popped)"),
    ("missing_unpack_reconfig", "gemm", "kernels/compute.cpp",
     "reconfig_data_format_srca(cb_C_local);", "", None,
     r"compute kernel \S*kernels/compute.cpp:\d+: copy_init for CB 24 \(Float32\) while SrcA is configured for "
     r"Float16: reconfig_data_format\(_srca\) must come before the init it affects"),
    ("reconfig_after_init", "gemm", "kernels/compute.cpp",
     "reconfig_data_format_srca(cb_C_local);\n        copy_init(cb_C_local);",
     "copy_init(cb_C_local);\n        reconfig_data_format_srca(cb_C_local);", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: copy_init for CB 24 \(Float32\) while SrcA is configured for "
     r"Float16: reconfig_data_format\(_srca\) must come before the init it affects \(the LLK's init asserts"),
    ("fpu_reads_unpack_to_dest_cb", "gemm", "host.cpp",
     "compute_unpack_to_dest[24] = UnpackToDestMode::UnpackToDestFp32;",
     "compute_unpack_to_dest[1] = UnpackToDestMode::UnpackToDestFp32;", 1,
     r"compute kernel \S*kernels/compute.cpp:\d+: matmul_tiles reads CB 1 through SrcA \(matmul in1\), but the "
     r"ComputeConfig's unpack_to_dest_mode\[1\] is UnpackToDestFp32: .* FPU ops cannot read it"),
    ("unpack_to_dest_without_fp32_acc", "gemm", "host.cpp",
     ".fp32_dest_acc_en = true,", ".fp32_dest_acc_en = false,", 1,
     r"ComputeConfig of \S*kernels/compute.cpp: unpack_to_dest_mode\[24\] is UnpackToDestFp32 without "
     r"fp32_dest_acc_en"),
    ("missing_pack_reconfig", "int", "kernels/compute.cpp",
     "pack_reconfig_data_format(cb_Idx_out);", "", None,
     r"compute kernel \S*kernels/compute.cpp:\d+: pack_tile into CB 16 \(Int32\) but the packer is configured for Float32; "
     r"call pack_reconfig_data_format first"),
    ("cbs_over_l1_budget", "add", "host.cpp",
     "CircularBufferConfig(4096, {{16,", "CircularBufferConfig(1600000, {{16,", 1,
     r"circular buffers on core \(x=0, y=0\) need \d+ bytes of L1 above the \d+-byte firmware area, more than the "
     r"1499136 bytes of wormhole_b0"),
    ("warning_is_an_error", "add", "kernels/compute.cpp",
     "    for (uint32_t n = 0; n < count; ++n) {", "    for (int n = 0; n < count; ++n) {", 1,
     r"(?s)kernel .*kernels/compute.cpp does not compile \(-Wall -Werror\):.*comparison of integer expressions of "
     r"different signedness"),
    # a NoC read longer than the page it comes from (it would run into the next page of the bank)
    ("noc_read_longer_than_its_page", "add", "kernels/dataflow_helpers.h",
     "noc_async_read_page(page, tensor, l1_write_addr);",
     "noc_async_read(get_noc_addr(page, tensor), l1_write_addr, 4096);", 1,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+ \(dataflow_helpers.h:\d+\): noc_async_read: 4096 bytes at offset 0 overrun the "
     r"2048-byte page"),
    # a CB the NoC fills holds the format of the pages it receives: bf16 pages read into a CB declared Float32
    # would be unpacked as fp32 words (two bf16 values each) -- the widening-copy miscompile of issue 22
    ("cb_filled_with_pages_of_another_format", "add", "host.cpp",
     "CircularBufferConfig(4096, {{0, tt::DataFormat::Float16_b}})\n                             .set_page_size(0, 2048)",
     "CircularBufferConfig(8192, {{0, tt::DataFormat::Float32}})\n                             .set_page_size(0, 4096)", 1,
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+ \(dataflow_helpers.h:\d+\): noc_async_read_page reads page \d+ of the DRAM buffer at "
     r"0x[0-9a-f]+, which holds Float16_b data \(2048-byte pages\), into CB 0 configured as Float32 \(4096-byte "
     r"pages\): the CB would hold bytes of another format"),
    # and a tensor keeps its format: a Float32 output CB drained into a bf16 tensor's pages
    ("tensor_written_from_a_cb_of_another_format", "add", "host.cpp",
     "CircularBufferConfig(4096, {{16, tt::DataFormat::Float16_b}})\n                             .set_page_size(16, 2048)",
     "CircularBufferConfig(8192, {{16, tt::DataFormat::Float32}})\n                             .set_page_size(16, 4096)", 1,
     r"writer \(RISCV_0\) kernel \S*kernels/writer.cpp:\d+ \(dataflow_helpers.h:\d+\): noc_async_write_page writes pages of CB 16 \(Float32\) "
     r"into page \d+ of the DRAM buffer at 0x[0-9a-f]+, which holds Float16_b data \(2048-byte pages\): the tensor "
     r"would hold bytes of another format"),
    # float DST packed into an Int32 CB: the packer would store the floats' bits as the integers
    ("float_dst_packed_into_an_int32_cb", "int", "kernels/compute.cpp",
     "typecast_tile<static_cast<uint32_t>(DataFormat::Float32), static_cast<uint32_t>(DataFormat::Int32)>(0);", "",
     1, r"compute kernel \S*kernels/compute.cpp:\d+: pack_tile of DST\[0\], which holds floats, into CB \d+ \(Int32\): "
     r"the packer reads DST as 32-bit integers for an integer CB"),
    ("compile_time_arg_out_of_range", "add", "kernels/writer.cpp",
     "TensorAccessorArgs<0>()", "TensorAccessorArgs<5>()", 1,
     r"(?s)does not compile.*compile-time arg index out of range"),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_sanitizer_catches(case, tmp_path, add_kernel, mixed_gemm_kernel, block_gemm_kernel, argmax_kernel):
    name, base, rel, old, new, count, message = case
    kernel = {"add": add_kernel, "gemm": mixed_gemm_kernel, "block": block_gemm_kernel, "int": argmax_kernel}[base]
    broken = tmp_path / "artifact"
    shutil.copytree(kernel.artifact_dir, broken)
    path = broken / rel
    text = path.read_text()
    assert old in text, f"corpus case {name}: {old!r} not found in {rel}"
    if count is not None:
        assert text.count(old) == count
    path.write_text(text.replace(old, new))
    with pytest.raises(TTSimError, match=message):
        emulator.run(broken, kernel.plan, tensors_for(kernel), timeout_s=120)


def test_unbroken_corpus_bases_run_clean(add_kernel, mixed_gemm_kernel, block_gemm_kernel, argmax_kernel):
    for kernel in (add_kernel, mixed_gemm_kernel, block_gemm_kernel, argmax_kernel):
        emulator.run(kernel.artifact_dir, kernel.plan, tensors_for(kernel))


def test_errors_name_the_tilelang_statement(tmp_path, add_kernel):
    """Besides core, kernel and generated line, an error names the TileLang statement whose code failed (the
    generator's `// T....` comment above the line) and the kernel's source location."""
    broken = tmp_path / "artifact"
    shutil.copytree(add_kernel.artifact_dir, broken)
    reader = broken / "kernels" / "reader.cpp"
    reader.write_text(reader.read_text().replace("        noc_async_read_barrier();\n", ""))
    with pytest.raises(TTSimError) as err:
        emulator.run(broken, add_kernel.plan, tensors_for(add_kernel), timeout_s=120)
    assert re.search(r"reader\.cpp:\d+: cb_push_back\(0, 1\) publishes pages .*\n  TileLang: T\.Parallel: "
                     r"C\[by \* 32 \+ i, bx \* 32 \+ j\] = A\[.*\] \+ B\[.*\] \(.*kernels\.py:\d+ \(kernel 'add'\)\)",
                     str(err.value)), str(err.value)


def test_an_error_in_a_helper_names_the_helper_line_and_the_tilelang_statement(tmp_path, add_kernel):
    """A NoC read the reader's helper issues wrongly is reported at the kernel's line with the helper's line beside
    it; the TileLang statement comes from the kernel line. The kernel ran clean first: tt-sim's kernel cache keys
    each build on the headers a kernel includes from its own directory too, so the broken helper is rebuilt."""
    emulator.run(add_kernel.artifact_dir, add_kernel.plan, tensors_for(add_kernel))
    broken = tmp_path / "artifact"
    shutil.copytree(add_kernel.artifact_dir, broken)
    helpers = broken / "kernels" / "dataflow_helpers.h"
    text = helpers.read_text()
    line = text[:text.index("noc_async_read_page(page, tensor, l1_write_addr);")].count("\n") + 1
    helpers.write_text(text.replace("noc_async_read_page(page, tensor, l1_write_addr);",
                                    "noc_async_read_page(page + 1000, tensor, l1_write_addr);"))
    with pytest.raises(TTSimError) as err:
        emulator.run(broken, add_kernel.plan, tensors_for(add_kernel), timeout_s=120)
    assert re.search(rf"reader\.cpp:\d+ \(dataflow_helpers\.h:{line}\): noc_async_read_page: page 100\d is outside "
                     r"the buffer .*\n  TileLang: T\.Parallel: C\[by \* 32 \+ i, bx \* 32 \+ j\] = A\[",
                     str(err.value)), str(err.value)


@pytest.fixture(scope="module")
def mesh_add_kernel():
    return tilelang.compile(K.elementwise_add(128, 64, "bfloat16"),
                            target={"kind": "tt", "max_cores": 2, "mesh": "1x2"})


def test_mesh_errors_name_the_chip(tmp_path, mesh_add_kernel):
    """On a mesh the chips run concurrently: a writer that waits for a page nobody pushes blocks on both chips at
    once, and the deadlock report names both, each with its chip; an error inside a kernel names its chip."""
    kernel = mesh_add_kernel
    emulator.run(kernel.artifact_dir, kernel.plan, tensors_for(kernel))
    broken = tmp_path / "deadlock"
    shutil.copytree(kernel.artifact_dir, broken)
    writer = broken / "kernels" / "writer.cpp"
    writer.write_text(writer.read_text().replace("cb_wait_front(cb_C_out, 1);", "cb_wait_front(cb_C_out, 2);"))
    with pytest.raises(TTSimError) as err:
        emulator.run(broken, kernel.plan, tensors_for(kernel), timeout_s=120)
    blocked = re.findall(r"chip \((\d), (\d)\) core \(x=\d+, y=\d+\) writer \(RISCV_0\) kernel \S*writer.cpp:\d+: "
                         r"blocked in cb_wait_front\(cb=16, n=2\)", str(err.value))
    assert {chip for chip in blocked} == {("0", "0"), ("0", "1")}, str(err.value)

    broken = tmp_path / "pop"
    shutil.copytree(kernel.artifact_dir, broken)
    compute = broken / "kernels" / "compute.cpp"
    compute.write_text(compute.read_text().replace("cb_pop_front(cb_A_tile, 1);", "cb_pop_front(cb_A_tile, 2);"))
    with pytest.raises(TTSimError, match=r"chip \(0, 0\) core \(x=\d+, y=\d+\) compute kernel \S*compute.cpp:\d+: "
                                         r"cb_pop_front\(0, 2\) pops more pages than were waited for \(1\)"):
        emulator.run(broken, kernel.plan, tensors_for(kernel), timeout_s=120)
