"""Generated sources and plans: golden text for a small case, plan invariants, and 0.81 API only."""

import json
import os
import re
from pathlib import Path

import pytest

from examples import kernels as K
from tilelang_tt import plan as plan_mod
from tilelang_tt.errors import TTPlanError
from tilelang_tt.intrinsics import CALLS

from .helpers import artifact, blocks_of

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TILELANG_TT_UPDATE_GOLDEN") == "1"

KERNELS = {
    "design_gemm_bf16": lambda: K.design_gemm(256, 192, 128),
    "example_gemm_fp16": lambda: K.tilelang_example_gemm(512, 256, 128),
    "add_fp32": lambda: K.elementwise_add(128, 96, "float32"),
    "add_bf16": lambda: K.elementwise_add(128, 96, "bfloat16"),
    "chain_bf16": lambda: K.fused_chain(64, 128),
}

# Spellings that TT-Metalium 0.81 no longer accepts (removed, renamed or moved), from the API reference §7.
FORBIDDEN = [
    (r"\bmm_init\b", "mm_init was removed"),
    (r"\bmm_init_short\b", "mm_init_short was removed"),
    (r"\bbinary_op_init_common\b", "binary_op_init_common was removed"),
    (r"\badd_tiles_init\b", "add_tiles_init was removed"),
    (r"namespace NAMESPACE", "compute entry is kernel_main()"),
    (r"void MAIN", "compute entry is kernel_main()"),
    (r'#include "dataflow_api\.h"', "include api/dataflow/dataflow_api.h"),
    (r'#include "compute_kernel_api', "include api/compute/..."),
    (r"\bnoc_async_read_tile\b", "use noc_async_read_page"),
    (r"\bnoc_async_write_tile\b", "use noc_async_write_page"),
    (r"InterleavedAddrGenFast", "use TensorAccessor"),
    (r"\bacquire_dst\b|\brelease_dst\b", "use tile_regs_*"),
    (r"\bcopy_tile_init\b|\bcopy_tile_to_dst_init_short\b", "use copy_init"),
    (r"\bCreateDevice\b|\bCloseDevice\b|\bCreateBuffer\b", "use the MeshDevice flow"),
    (r"\bEnqueueProgram\b|\bEnqueueWriteBuffer\b|\bEnqueueReadBuffer\b", "use mesh workloads/buffers"),
    (r"tt::CB::", "use tt::CBIndex / CB ids"),
]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernels_use_only_the_081_api(name, arch):
    art = artifact(KERNELS[name](), arch=arch)
    for rel, text in art.files.items():
        if not rel.endswith((".cpp", ".h")):
            continue
        for pattern, why in FORBIDDEN:
            assert not re.search(pattern, text), f"{rel}: {why}"
        for m in re.finditer(r"matmul_tiles\(([^;]*)\);", text):
            assert m.group(1).count(",") == 4, f"{rel}: matmul_tiles takes 5 arguments: {m.group(0)}"
        if rel.startswith("kernels/") and rel.endswith(".cpp"):
            assert "void kernel_main() {" in text
    compute = art.files["kernels/compute.cpp"]
    assert re.search(r"^    compute_kernel_hw_startup(<SrcOrder::Reverse>)?\(", compute, re.M)
    assert compute.count("tile_regs_acquire();") == compute.count("tile_regs_commit();")
    assert compute.count("tile_regs_wait();") == compute.count("tile_regs_release();")
    # the data-movement kernels include the helpers shipped beside them, which include the 0.81 dataflow API
    assert '#include "api/dataflow/dataflow_api.h"' in art.files["kernels/dataflow_helpers.h"]
    for rel in ("kernels/reader.cpp", "kernels/writer.cpp"):
        assert '#include "dataflow_helpers.h"' in art.files[rel]
        assert "TensorAccessorArgs<0>()" in art.files[rel]
    host = art.files["host.cpp"]
    for call in ("MeshDevice::create_unit_mesh(0)", "MeshBuffer::create(", "CreateCircularBuffer(",
                 "SetRuntimeArgs(", "EnqueueMeshWorkload(", "workload.add_program(", "EnqueueReadMeshBuffer("):
        assert call in host


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_plan_valid_and_covers_every_block(name):
    art = artifact(KERNELS[name]())
    plan = json.loads(art.files["tt.plan.json"])
    plan_mod.validate(plan)
    grid_y, grid_x = plan["grid"]
    blocks = [b for b, _ in blocks_of(plan)]
    assert sorted(blocks) == sorted((y, x) for y in range(grid_y) for x in range(grid_x))
    assert sum(cb["bytes"] for cb in plan["cbs"]) <= plan["device"]["l1_bytes"]
    for cb in plan["cbs"]:
        assert cb["bytes"] == cb["num_pages"] * cb["page_size"]
        assert f"CircularBufferConfig({cb['bytes']}, {{{{{cb['index']}, tt::DataFormat::{cb['format']}}}}})" in art.files["host.cpp"]
    # the host program carries the plan's mapping verbatim (and, on a multicast lattice, each core's routes)
    groups = plan.get("multicast", {}).get("groups", [])
    for i, m in enumerate(plan["mapping"]):
        args = ", ".join(str(m[n]) for n in plan["runtime_args"])
        routes = ", ".join("{" + ", ".join([*(f"{{{r[k][1]}, {r[k][0]}}}" for k in ("sender", "first", "last")),
                                            str(r["num_dests"]), str(int(r["is_sender"]))]) + "}"
                           for r in (g["cores"][i] for g in groups))
        row = f"{{{m['core'][1]}, {m['core'][0]}, {{{args}}}" + (f", {{{routes}}}" if groups else "") + "},"
        assert row in art.files["host.cpp"], row


def test_kernel_runtime_args_match_plan_layout():
    art = artifact(KERNELS["design_gemm_bf16"]())
    plan = art.plan
    reader = art.files["kernels/reader.cpp"]
    for i, arg in enumerate(plan["kernels"]["reader"]["runtime_args"]["layout"]):
        assert f"const uint32_t {arg['name']} = get_arg_val<uint32_t>({i});" in reader
    assert [a["tensor_accessor"] for a in plan["kernels"]["reader"]["compile_args"]] == ["A", "B"]
    assert [a["tensor_accessor"] for a in plan["kernels"]["writer"]["compile_args"]] == ["C"]


def test_fp32_accumulation_follows_the_accumulator():
    assert artifact(K.tilelang_example_gemm(256, 256, 64)).plan["kernels"]["compute"]["fp32_dest_acc_en"] is True
    assert artifact(K.design_gemm(64, 64, 64)).plan["kernels"]["compute"]["fp32_dest_acc_en"] is False


def test_plan_schema_rejects_bad_plans():
    plan = artifact(K.design_gemm(64, 64, 64)).plan
    bad = json.loads(json.dumps(plan))
    bad["policy"] = "zigzag"
    with pytest.raises(TTPlanError, match=r"tt.plan.json is invalid at policy"):
        plan_mod.validate(bad)
    bad = json.loads(json.dumps(plan))
    bad["mapping"][0]["count"] += 1
    with pytest.raises(TTPlanError, match=r"mapping assigns 5 blocks, the grid has 2 x 2"):
        plan_mod.validate(bad)


def test_docs_schema_is_the_package_schema():
    root = Path(__file__).resolve().parents[2]
    assert json.loads((root / "docs" / "tt.plan.schema.json").read_text()) == plan_mod.schema()


def test_intrinsic_table_is_the_only_source_of_compute_calls():
    """Every call in a generated compute kernel comes from the one table, intrinsics.CALLS."""
    allowed = {"get_arg_val"} | {re.match(r"(\w+)", spec.cpp).group(1) for spec in CALLS.values()}
    for name in KERNELS:
        text = artifact(KERNELS[name]()).files["kernels/compute.cpp"]
        body = re.sub(r"//[^\n]*", "", text[text.index("void kernel_main()"):])
        calls = set(re.findall(r"\b([a-z_0-9]+)(?:<[^>]*>)?\(", body)) - {"for", "if", "kernel_main"}
        assert calls <= allowed, calls - allowed


def test_transpose_a_goes_through_a_scratch_cb():
    from .test_errors import gemm_kernel

    art = artifact(gemm_kernel(M=64, N=64, K_=96, trans_a=True), multicast=False)   # one K step per block
    scratch = next(cb for cb in art.plan["cbs"] if cb["role"] == "scratch")
    assert scratch["name"] == "A_s_T" and scratch["num_pages"] == 1
    compute = art.files["kernels/compute.cpp"]
    assert "transpose_init(cb_A_s);" in compute
    assert "transpose_tile(cb_A_s, 0, 0);" in compute   # a 1x1-tile block: no loop
    t = compute.index("transpose_tile(")
    assert compute.index("cb_push_back(cb_A_s_T, 1);", t) < compute.index("matmul_tiles(cb_A_s_T, cb_B_s", t)
    assert compute.count("cb_pop_front(cb_A_s_T, 1);") == 1


def test_gelu_formula_and_tanh_fuse_in_dst():
    import tilelang.language as T

    @T.prim_func
    def gelu(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                x = A[by * 32 + i, bx * 32 + j]
                C[by * 32 + i, bx * 32 + j] = 0.5 * x * (1.0 + T.erf(x * 0.7071067811865476)) + T.tanh(x)

    compute = artifact(gelu).files["kernels/compute.cpp"]
    for call in ("erf_tile(", "tanh_tile(", "mul_binary_tile(", "add_binary_tile(", "mul_unary_tile("):
        assert call in compute
    assert '#include "api/compute/eltwise_unary/erf_erfc.h"' in compute


GOLDEN_CASE = ("design_gemm_64", lambda: K.design_gemm(64, 64, 64))


@pytest.mark.parametrize("rel", ["tt.program.txt", "kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp",
                                 "kernels/dataflow_helpers.h",
                                 "host.cpp", "tt.plan.json"])
def test_golden_design_gemm(rel):
    art = artifact(GOLDEN_CASE[1]())
    text = art.files[rel].replace(art.plan["source"], "<source>")
    path = GOLDEN / GOLDEN_CASE[0] / rel.replace("/", "__")
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{rel} differs from {path} (TILELANG_TT_UPDATE_GOLDEN=1 regenerates)"


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_cb_and_tensor_identifier_is_declared(name):
    art = artifact(KERNELS[name]())
    for rel in ("kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp"):
        text = art.files[rel]
        code = re.sub(r"//[^\n]*", "", text)
        declared = set(re.findall(r"constexpr uint32_t (cb_\w+) =", code))
        used = set(re.findall(r"\b(cb_\w+)\b", code)) - {"cb_reserve_back", "cb_push_back", "cb_wait_front",
                                                          "cb_pop_front", "cb"}
        assert used == declared, f"{rel}: used {sorted(used)} declared {sorted(declared)}"
        args = set(re.findall(r"const uint32_t (\w+) = get_arg_val", code))
        for a in args:
            assert len(re.findall(rf"\b{a}\b", code)) >= 2, f"{rel}: runtime arg {a} is read but never used"


def test_gemm_epilogue_fused_in_dst():
    """relu(C) + 1 applied to a DST-resident accumulator happens in DST before the pack."""
    import tilelang.language as T

    @T.prim_func
    def gemm_relu(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "float32")
            C_s = T.alloc_shared((32, 32), "bfloat16")
            T.clear(C_l)
            for k in T.serial(2):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(32, 32):
                C_s[i, j] = 2.0 / T.max(C_l[i, j], 0.0)
            T.copy(C_s, C[by * 32, bx * 32])

    art = artifact(gemm_relu)
    compute = art.files["kernels/compute.cpp"]
    assert art.plan["cbs"] and all(cb["name"] != "C_l" for cb in art.plan["cbs"])   # C_l lives in DST
    body = compute[compute.index("the accumulator lives in DST until it is packed"):]
    order = [body.index(s) for s in ("matmul_tiles(", "relu_tile(0);", "recip_tile(0);",
                                     "mul_unary_tile(0, 0x40000000u);", "tile_regs_commit();", "pack_tile(")]   # one tile: no loop
    assert order == sorted(order)
