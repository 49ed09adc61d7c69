"""One kernel over a mesh of chips (target option -mesh=RxC, MeshSplitTT, sharded MeshBuffers, tt-sim's mesh).

A mesh kernel splits one grid axis across the chips; each chip runs the same per-chip program over its blocks and
shards. Its results must equal the one-chip kernel's bit for bit (every output element is computed by the same
tile operations in the same order, on another chip), and each chip must move only its shard's bytes.
"""

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang_tt  # noqa: F401
from examples import kernels as K
from tilelang_tt.errors import TTTargetError, TTUnsupportedError
from tilelang_tt.target import normalize_tt_target, options_from_target

from .helpers import artifact, attention_ref

MESHES = ["1x2", "2x4"]


@pytest.mark.parametrize("spelling", ["tt -arch=wormhole_b0 -mesh=1x2", {"kind": "tt", "mesh": "1x2"},
                                      {"kind": "tt", "mesh": [1, 2]}])
def test_mesh_target_spellings(spelling):
    assert options_from_target(normalize_tt_target(spelling)).mesh == (1, 2)


def test_mesh_target_errors():
    with pytest.raises(TTTargetError, match=r"mesh='1x2x3' is not a mesh shape"):
        normalize_tt_target("tt -mesh=1x2x3")
    with pytest.raises(TTTargetError, match=r"has 64 chips, more than the 32"):
        normalize_tt_target({"kind": "tt", "mesh": [8, 8]})
    assert options_from_target(normalize_tt_target("tt")).mesh is None


def _gemm_case(M=256, N=128, K_=128):
    torch.manual_seed(7)
    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    return a, b, K.design_gemm(M, N, K_)


def _run_gemm(func, a, b, target):
    kernel = tilelang.compile(func, target=target)
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16)
    kernel(a, b, c)
    return kernel, c


@pytest.mark.parametrize("mesh", MESHES)
def test_row_sharded_gemm_equals_one_chip(mesh):
    a, b, func = _gemm_case()
    _, one = _run_gemm(func, a, b, "tt")
    kernel, c = _run_gemm(func, a, b, f"tt -mesh={mesh}")
    assert torch.equal(c, one)
    # and the one-chip result is the GEMM (bf16 inputs, bf16 accumulation in DST: 2^-8 relative per partial sum)
    ref = a.float() @ b.float()
    assert (c.float() - ref).abs().max() <= 2 ** -6 * (a.float().abs() @ b.float().abs()).max()
    plan = kernel.adapter.artifact.plan
    dist = {buf["name"]: buf["distribution"] for buf in plan["buffers"]}
    chips = int(mesh[0]) * int(mesh[2])
    assert dist["A"]["kind"] == "sharded" and dist["A"]["dim"] == 0 and dist["A"]["chips"] == chips
    assert dist["C"]["kind"] == "sharded" and dist["C"]["dim"] == 0
    assert dist["B"] == {"kind": "replicated"}
    assert plan["mesh"]["axis"] == "y" and plan["mesh"]["per_chip"] * chips == 256 // 32
    report = kernel.adapter.last_report
    assert report["mesh"] == [int(mesh[0]), int(mesh[2])] and len(report["chips"]) == chips


@pytest.mark.parametrize("mesh", MESHES)
def test_head_sharded_flash_attention_equals_one_chip(mesh):
    torch.manual_seed(3)
    shape = (1, 8, 128, 64)
    q, k, v = (torch.randn(*shape, dtype=torch.bfloat16) for _ in range(3))
    func = K.flash_attention(1, 8, 128, 128, 64)
    outs = []
    for target in ("tt", f"tt -mesh={mesh}"):
        kernel = tilelang.compile(func, target=target)
        o = torch.empty(*shape, dtype=torch.bfloat16)
        kernel(q, k, v, o)
        outs.append(o)
    assert torch.equal(outs[1], outs[0])
    assert (outs[0].float() - attention_ref(q, k, v, False, "bhsd")).abs().max() < 0.05
    dist = {b["name"]: b["distribution"] for b in kernel.adapter.artifact.plan["buffers"]}
    assert all(d["kind"] == "sharded" and d["dim"] == 1 for d in dist.values())   # Q, K, V, O by heads
    assert kernel.adapter.artifact.plan["mesh"]["axis"] == "y"


def test_each_chip_moves_only_its_shard():
    """Protocol-only counters of the 2x4 GEMM: every chip reads its A shard and all of B once from DRAM, writes its
    C shard once, and the host sends it exactly those input bytes and reads back its C shard."""
    a, b, func = _gemm_case()
    kernel = tilelang.compile(func, target="tt -mesh=2x4")
    c = torch.empty(256, 128, dtype=torch.bfloat16)
    kernel.adapter.run(a, b, c, protocol_only=True)
    report = kernel.adapter.last_report
    assert report["protocol_only"]
    a_shard, b_bytes, c_shard = 256 // 8 * 128 * 2, 128 * 128 * 2, 256 // 8 * 128 * 2
    for chip in report["chips"]:
        assert chip["total"]["dram_read_bytes"] == a_shard + b_bytes, chip
        assert chip["total"]["dram_write_bytes"] == c_shard, chip
        assert chip["host_to_device_bytes"] == a_shard + b_bytes
        assert chip["device_to_host_bytes"] == c_shard
    assert report["total"]["dram_read_bytes"] == 8 * (a_shard + b_bytes)
    assert sorted(tuple(ch["chip"]) for ch in report["chips"]) == [(r, c) for r in range(2) for c in range(4)]
    model = report["model"]["mesh"]     # the run's model: each chip's from its own cores, the kernel the slowest
    assert model["kernel_seconds"] == max(ch["seconds"] for ch in model["chips"]) == report["model"]["seconds"]
    assert [ch["host_to_device_bytes"] for ch in model["chips"]] == [a_shard + b_bytes] * 8


def _split_k(M=64, N=64, K_=128, KS=2):
    kc = K_ // KS

    @T.prim_func
    def main(A: T.Tensor((M, K_), "bfloat16"), B: T.Tensor((K_, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, M // 32, KS, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.annotate_tt_mesh(axis="z")
            T.clear(C_l)
            for k in T.serial(kc // 32):
                T.copy(A[by * 32, bz * kc + k * 32], A_s)
                T.copy(B[bz * kc + k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.atomic_add(C[by * 32, bx * 32], C_l)

    return main


def test_cross_chip_reduction_is_refused():
    with pytest.raises(TTUnsupportedError) as err:
        artifact(_split_k(), mesh="1x2")
    text = str(err.value)
    assert text.startswith("T.atomicadd(C_l, C[by * 32, bx * 32]): C is accumulated across the split grid axis z (bz): "
                           "its blocks run on different chips, so this is a reduction across chips, which a mesh "
                           "kernel cannot do\n")
    assert text.endswith('  fix: split a grid axis whose blocks write disjoint parts of C (T.annotate_tt_mesh(axis="y") '
                         'or T.annotate_tt_mesh(axis="x")), or run the reduction on one chip (no -mesh)')


def test_uneven_split_is_refused():
    with pytest.raises(TTUnsupportedError, match=r"the grid's blockIdx.y extent 3 does not divide evenly over the 2 "
                                                 r"chips of the 1x2 mesh"):
        artifact(K.design_gemm(96, 64, 64), mesh="1x2")


def _lower_triangle(M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = T.if_then_else(by * 32 + i >= bx * 32 + j, A[by * 32 + i, bx * 32 + j],
                                                             T.float32(0))

    return main


def test_split_axis_used_outside_an_index_is_refused():
    """A mask that compares by * 32 with a column: a chip would compare its local block number."""
    with pytest.raises(TTUnsupportedError, match=r"the split grid axis by is used in .*, not only to index the "
                                                 r"sharded tensors: each chip runs its blocks with a local block number"):
        artifact(_lower_triangle(), mesh="1x2")


def test_2x4_host_program_passes_the_real_header_check(tmp_path):
    from tilelang_tt.realcheck.host import check_host

    art = artifact(K.design_gemm(256, 128, 64), mesh="2x4")
    host = art.directory / "host.cpp"
    result = check_host(host, art.plan)
    assert result.ok, result.problems
    assert {"MeshDevice::create", "MeshShape::MeshShape", "Shape2D::Shape2D", "MeshCoordinate::MeshCoordinate",
            "MeshCoordinateRange::MeshCoordinateRange"} <= set(result.checked)
    # a mesh shape the library has no constructor for fails the check (on a copy: the artifact stays as written)
    broken = tmp_path / "host.cpp"
    broken.write_text(host.read_text().replace("MeshShape(2, 4)", "MeshShape(2, 4, 1, 1)"))
    bad = check_host(broken, art.plan)
    assert not bad.ok and "MeshShape" in bad.problems[0]


def test_mesh_model_is_the_slowest_chip_plus_the_host_links():
    from tilelang_tt import mesh_model

    plan = {"device": {"arch": "wormhole_b0"}, "mesh": {"shape": [1, 4], "chips": 4}, "buffers": [
        {"io": "input", "bytes": 4000, "distribution": {"kind": "sharded", "shard_bytes": 1000}},
        {"io": "input", "bytes": 500, "distribution": {"kind": "replicated"}},
        {"io": "output", "bytes": 800, "distribution": {"kind": "sharded", "shard_bytes": 200}}]}
    chips = [{"seconds": s, "matmul_tiles": 10, "dram_bytes": 1} for s in (1e-3, 3e-3, 2e-3, 1e-3)]
    model = mesh_model.mesh_model(chips, plan)
    assert model["seconds"] == 3e-3 and model["mesh"]["slowest_chip"] == [0, 1]
    # two chips behind each n300 PCIe link (31.5 GB/s a direction): 2 x (1000 + 500) B in, 2 x 200 B out per link
    assert model["mesh"]["host_to_device_seconds"] == 3000 / 31.5e9
    assert model["mesh"]["device_to_host_seconds"] == 400 / 31.5e9
    assert model["mesh"]["end_to_end_seconds"] == 3000 / 31.5e9 + 3e-3 + 400 / 31.5e9
    assert model["tflops"] == 40 * 2 * 32 ** 3 / 3e-3 / 1e12


def test_inspect_draws_the_mesh(tmp_path):
    """`tilelang-tt inspect` of a 2x4 kernel: one chip cell per chip with its blocks, and each tensor's
    distribution in the text; the SVG is never written over a file tilelang-tt did not write."""
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    _, _, func = _gemm_case()
    kernel = tilelang.compile(func, target="tt -mesh=2x4")
    svg = tmp_path / "mesh.svg"
    proc = subprocess.run([sys.executable, "-m", "tilelang_tt.cli", "inspect", str(kernel.artifact_dir), "--svg",
                           str(svg)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "mesh 2x4 (8 chips): grid axis y (8 blocks) split, 1 per chip" in proc.stdout
    assert "chip (1, 3): blocks 7..7" in proc.stdout
    assert "A [256, 128]: sharded along dim 0" in proc.stdout and "B [128, 128]: replicated" in proc.stdout
    chips = [r for r in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == "chip"]
    assert sorted(r.find("{http://www.w3.org/2000/svg}title").text for r in chips)[0] == "chip (0, 0): y blocks 0..0"
    assert len(chips) == 8
    mine = tmp_path / "mine.svg"
    mine.write_text("user data")
    proc = subprocess.run([sys.executable, "-m", "tilelang_tt.cli", "inspect", str(kernel.artifact_dir), "--svg",
                           str(mine)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and mine.read_text() == "user data"
