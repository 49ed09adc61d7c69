"""T.annotate_tt_schedule / T.annotate_tt_sharding inside real kernels, through tilelang.compile."""

import pytest
import tilelang.language as T

from tilelang_tt.errors import TTAnnotationError, TTUnsupportedError

from .helpers import artifact, blocks_of


def gemm_with(schedule=None, sharding=None, M=256, N=256, K=64):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "float32")
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            if sharding is not None:
                T.annotate_tt_sharding(sharding(A, B, C))
            T.clear(C_l)
            for k in T.serial(K // 32):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])

    return gemm


@pytest.mark.parametrize("schedule", [
    dict(policy="contiguous", order="block_linear(4)"),
    dict(policy="strided"),
    dict(policy="strided", stride=(0, 16), order="block_linear(2)"),
    dict(policy="rect"),
    dict(policy="rect", rect=(0, 0, 2, 4)),
])
@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_schedule_annotation_reaches_the_plan(schedule, arch):
    art = artifact(gemm_with(schedule), arch=arch)
    plan = art.plan
    assert plan["policy"] == schedule["policy"]
    assert plan["order"] == schedule.get("order", "row_major")
    blocks = [b for b, _ in blocks_of(plan)]
    assert sorted(blocks) == sorted((y, x) for y in range(8) for x in range(8))
    if "rect" in schedule:
        assert all((m["rect_h"], m["rect_w"]) == (2, 4) for m in plan["mapping"])
        assert len(plan["mapping"]) == 8
    reader = art.files["kernels/reader.cpp"]
    for name in plan["runtime_args"]:
        assert f"const uint32_t {name} = get_arg_val<uint32_t>(" in reader


@pytest.mark.parametrize("order,grid", [("block_linear(3)", (8, 8)), ("block_linear(2)", (5, 7)),
                                        ("row_major", (3, 5))])
def test_reader_recovers_the_plan_order_in_cpp(order, grid, tmp_path):
    """Compile the reader's (by, bx) recovery with the host C++ compiler and run it for every block id:
    it must agree with the plan's order."""
    import re
    import subprocess

    from tilelang_tt.schedule import order_to_coord

    M, N = grid[0] * 32, grid[1] * 32
    # multicast=False: the contiguous split's order (a GEMM without a schedule choice may get multicast rectangles)
    art = artifact(gemm_with(dict(order=order, multicast=False), M=M, N=N))
    reader = art.files["kernels/reader.cpp"]
    loop = reader[reader.index("for (uint32_t n = 0; n < count; ++n)"):]
    binds = re.findall(r"^\s*(const uint32_t \w+ = [^;]*;)", loop, re.M)
    assert binds[-2].startswith("const uint32_t by =") and binds[-1].startswith("const uint32_t bx =")
    src = tmp_path / "order.cpp"
    src.write_text("#include <cstdint>\n#include <cstdio>\nint main() {\n"
                   f"  for (uint32_t start_id = 0; start_id < {grid[0] * grid[1]}u; ++start_id) {{\n"
                   "    const uint32_t n = 0;\n    " + "\n    ".join(binds) +
                   '\n    std::printf("%u %u\\n", by, bx);\n  }\n}\n')
    exe = tmp_path / "order"
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(exe), str(src)], check=True)
    got = [tuple(map(int, line.split())) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                    check=True).stdout.splitlines()]
    k = int(order[13:-1]) if order.startswith("block_linear") else None
    assert got == [order_to_coord(b, grid[0], grid[1], k) for b in range(grid[0] * grid[1])]


def test_sharding_annotation_reaches_the_plan():
    art = artifact(gemm_with(sharding=lambda A, B, C: {
        A: T.TTShard(axis=0, tiles=("rows", 32), placement="DRAM"),
        C: T.TTShard(axis=(0, 1), tiles=("rows", "cols", 32), placement="L1"),
    }))
    buffers = {b["name"]: b for b in art.plan["buffers"]}
    assert buffers["A"]["shard"]["axis"] == [0] and buffers["A"]["placement"] == "DRAM"
    assert buffers["C"]["placement"] == "L1" and buffers["B"]["placement"] == "DRAM"
    assert "BufferType::L1" in art.files["host.cpp"]


@pytest.mark.parametrize("make,message", [
    (lambda: T.TTShard(placement="HBM"), r"placement='HBM' is not one of \['DRAM', 'L1'\]"),
    (lambda: T.TTShard(tiles=("rows", 16)), r"tiles=\('rows', 16\) must look like"),
    (lambda: T.TTShard(axis=-1), r"axis=-1 must be a non-negative int"),
    (lambda: T.TTShard(order="zigzag"), r"order='zigzag' is not one of"),
    (lambda: T.TTShard(faces="8x8"), r"faces='8x8' is not one of \['16x16'\]"),
])
def test_bad_ttshard(make, message):
    with pytest.raises(TTAnnotationError, match=message):
        make()


def test_bad_schedule_inside_kernel_is_our_error():
    with pytest.raises(TTAnnotationError, match=r"policy='spiral' is not one of"):
        gemm_with(dict(policy="spiral"))


def test_sharding_axis_out_of_range():
    with pytest.raises(TTAnnotationError, match=r"axis \[2\] is out of range for A of rank 2"):
        artifact(gemm_with(sharding=lambda A, B, C: {A: T.TTShard(axis=2)}))


def test_col_major_tiles_not_supported_yet():
    with pytest.raises(TTUnsupportedError, match=r"tile order 'col_major' for B"):
        artifact(gemm_with(sharding=lambda A, B, C: {B: T.TTShard(order="col_major")}))


def test_sharding_key_must_be_a_buffer():
    with pytest.raises(TTAnnotationError, match=r"is not a buffer"):
        T.annotate_tt_sharding({"A": T.TTShard()})
