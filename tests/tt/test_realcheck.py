"""Generated kernels against the REAL TT-Metalium 0.81 headers (ttnn 0.81.1 wheel) and libtt_metal.so symbols.

Every kernel family on both archs passes; negative controls prove the check can fail, each with the
compiler's (or the symbol check's) first error. (The suite also checks every artifact it generates, at the
end of the session: see tests/conftest.py.)
"""

import re
import shutil

import pytest
import tilelang

from examples import kernels as K
from tilelang_tt.realcheck import check_artifact

FAMILIES = {
    "design_gemm": lambda: K.design_gemm(128, 128, 128),
    "example_gemm_fp32_acc": lambda: K.tilelang_example_gemm(256, 256, 64),
    "add_fp32": lambda: K.elementwise_add(64, 64, "float32"),
    "add_bf16": lambda: K.elementwise_add(64, 64, "bfloat16"),
    "fused_chain": lambda: K.fused_chain(64, 128),
}


@pytest.fixture(scope="module")
def base_artifact():
    return tilelang.compile(K.design_gemm(64, 64, 64), target="tt").artifact_dir


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_kernel_families_pass(family, arch):
    artifact = tilelang.compile(FAMILIES[family](), target=f"tt -arch={arch}").artifact_dir
    result = check_artifact(artifact)
    assert result.ok, result.summary()
    assert [u.unit for u in result.units] == ["ncrisc", "brisc", "trisc0 (unpack)", "trisc1 (math)", "trisc2 (pack)"]
    assert result.host.checked["CreateKernel"].startswith("tt::tt_metal::CreateKernel(tt::tt_metal::Program&")


# (id, file, text to replace, replacement, expected first error)
NEGATIVE = [
    ("removed_mm_init", "kernels/compute.cpp", "matmul_init(cb_A_blk, cb_B_blk, 0);",
     "mm_init(cb_A_blk, cb_B_blk, cb_C_acc_out);", r"'mm_init' was not declared in this scope"),
    ("matmul_tiles_6_args", "kernels/compute.cpp", "m * 1u + k, k * 1u + n, m * 1u + n);",
     "m * 1u + k, k * 1u + n, m * 1u + n, 0);", r"too many arguments to function"),
    ("old_dataflow_include", "kernels/dataflow_helpers.h", '#include "api/dataflow/dataflow_api.h"',
     '#include "dataflow_api.h"', r"dataflow_api.h: No such file or directory"),
    ("old_compute_entry", "kernels/compute.cpp", "void kernel_main() {", "namespace NAMESPACE {\nvoid MAIN {", None),
    ("signed_unsigned_compare", "kernels/dataflow_helpers.h", "for (uint32_t r = 0; r < rows; ++r) {",
     "for (int r = 0; r < rows; ++r) {", r"comparison of integer expressions of different signedness"),
    ("missing_accessor_argument", "kernels/dataflow_helpers.h",
     "noc_async_read_page(page, tensor, l1_write_addr);",
     "noc_async_read_page(page, l1_write_addr);", r"no matching function for call to"),
]


@pytest.mark.parametrize("case", NEGATIVE, ids=[c[0] for c in NEGATIVE])
def test_negative_controls_fail(case, base_artifact, tmp_path):
    name, rel, old, new, message = case
    broken = tmp_path / "artifact"
    shutil.copytree(base_artifact, broken)
    path = broken / rel
    text = path.read_text()
    if name == "matmul_tiles_6_args":      # the generated call, whatever its indices, given a sixth argument
        old = re.search(r"matmul_tiles\([^;]*\);", text).group(0)
        new = old[:-2] + ", 0);"
    if name == "removed_mm_init":
        old = "matmul_init(cb_A_blk, cb_B_blk, 0);"
    if name == "old_compute_entry":
        text = text.replace(old, new, 1) + "}  // namespace NAMESPACE\n"
        path.write_text(text)
        message = r"'kernel_main' was not declared in this scope"
    else:
        assert old in text, f"{old!r} not in {rel}"
        path.write_text(text.replace(old, new, 1))
    result = check_artifact(broken)
    assert not result.ok
    assert re.search(message, result.first_error()), result.first_error()


def test_removed_host_api_is_caught(base_artifact, tmp_path):
    broken = tmp_path / "artifact"
    shutil.copytree(base_artifact, broken)
    host = broken / "host.cpp"
    host.write_text(host.read_text().replace("distributed::EnqueueMeshWorkload(cq, workload, false);",
                                             "EnqueueProgram(cq, program, false);"))
    result = check_artifact(broken)
    assert not result.host.ok
    assert "'EnqueueProgram' was not declared in this scope" in result.first_error().replace("\u2018", "'").replace(
        "\u2019", "'")
    # more host mutations: tests/tt/test_host_mutations.py


def test_host_calls_resolve(base_artifact):
    result = check_artifact(base_artifact)
    for api in ("MeshDevice::create_unit_mesh", "MeshBuffer::create", "CreateCircularBuffer",
                "CircularBufferConfig::CircularBufferConfig", "TensorAccessorArgs::TensorAccessorArgs", "SetRuntimeArgs",
                "EnqueueWriteMeshBuffer", "EnqueueReadMeshBuffer", "MeshWorkload::add_program", "EnqueueMeshWorkload",
                "Finish", "MeshDevice::close", "CreateKernel"):
        assert result.host.checked[api].startswith("tt::tt_metal::"), api
    assert result.host.checked["MeshBuffer::address"].startswith("inline")
