"""The tt target through TileLang's public entry points: every spelling, compile and jit."""

import pytest
import tilelang
import tilelang.language as T
from tvm.target import Target

from examples import kernels as K
from tilelang_tt.errors import TTTargetError
from tilelang_tt.runtime import TTJITKernel
from tilelang_tt.target import normalize_tt_target, options_from_target


@pytest.mark.parametrize("spelling,arch,max_cores", [
    ("tt", "wormhole_b0", None),
    ("tt -arch=wormhole_b0", "wormhole_b0", None),
    ("tt -arch=blackhole", "blackhole", None),
    ("tt -arch=blackhole -max_cores=16", "blackhole", 16),
    ({"kind": "tt"}, "wormhole_b0", None),
    ({"kind": "tt", "arch": "blackhole", "max_cores": 4}, "blackhole", 4),
])
def test_spellings_normalize(spelling, arch, max_cores):
    target = normalize_tt_target(spelling)
    assert isinstance(target, Target) and target.kind.name == "ext_dev"
    opts = options_from_target(target)
    assert (opts.arch, opts.max_cores) == (arch, max_cores)


@pytest.mark.parametrize("other", ["cuda", "llvm", {"kind": "cuda"}, "ttx"])
def test_other_targets_are_not_ours(other):
    assert normalize_tt_target(other) is None


@pytest.mark.parametrize("spelling,message", [
    ("tt -arch=grayskull", r"unknown arch 'grayskull'"),
    ("tt -max_cores=0", r"max_cores must be a positive integer, got '0'"),
    ({"kind": "tt", "fidelity": "HiFi2"}, r"unknown option 'fidelity'"),
    ({"kind": "tt", "math_fidelity": "HiFi9"}, r"unknown math fidelity 'HiFi9'"),
    ("tt arch=blackhole", r"cannot parse 'arch=blackhole'"),
])
def test_bad_targets(spelling, message):
    with pytest.raises(TTTargetError, match=message):
        normalize_tt_target(spelling)


@pytest.mark.parametrize("target,arch", [("tt", "wormhole_b0"), ("tt -arch=blackhole", "blackhole"),
                                         ({"kind": "tt", "arch": "blackhole"}, "blackhole")])
def test_tilelang_compile(target, arch, artifact_root):
    kernel = tilelang.compile(K.design_gemm(64, 64, 64), target=target)
    assert isinstance(kernel, TTJITKernel)
    assert kernel.plan["device"]["arch"] == arch
    assert kernel.artifact_dir.is_dir()   # a cache hit (same kernel and target) may reuse an earlier directory
    assert sorted(p.name for p in kernel.artifact_dir.rglob("*") if p.is_file()) == [
        "CMakeLists.txt", "compute.cpp", "dataflow_helpers.h", "host.cpp", "reader.cpp", "tt.plan.json",
        "tt.program.json", "tt.program.txt", "writer.cpp"]
    source = kernel.get_kernel_source()
    for banner in ("kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp", "kernels/dataflow_helpers.h",
                   "host.cpp", "tt.plan.json"):
        assert f"// ===== {banner} =====" in source


def test_max_cores_limits_the_grid(artifact_root):
    # multicast off: the contiguous split over max_cores (a multicast lattice of 8x8 blocks has 4 cores at most)
    kernel = tilelang.compile(K.design_gemm(256, 256, 64), target={"kind": "tt", "max_cores": 6, "multicast": False})
    assert len(kernel.plan["mapping"]) == 6
    assert sorted(m["count"] for m in kernel.plan["mapping"]) == [10, 10, 11, 11, 11, 11]
    assert kernel.plan["core_ranges"] == [[[0, 0], [0, 5]]]


def test_jit_decorator_lazy_and_cached(artifact_root):
    @tilelang.jit(target="tt -arch=blackhole")
    def make(M, N):
        @T.prim_func
        def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
                for i, j in T.Parallel(32, 32):
                    C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] - B[by * 32 + i, bx * 32 + j]
        return add

    k1 = make(64, 96)
    k2 = make(64, 96)
    assert isinstance(k1, TTJITKernel) and k1 is k2
    assert k1.plan["grid"] == [2, 3] and k1.plan["device"]["arch"] == "blackhole"
    compute = k1.tt_artifact.files["kernels/compute.cpp"]
    # fp32 operands: both copied into DST exactly (unpack-to-DEST) and subtracted on the SFPU
    assert "sub_binary_tile(" in compute and "copy_tile(cb_A_tile" in compute and "copy_tile(cb_B_tile" in compute


def test_annotations_available_on_tilelang_language():
    from tilelang_tt import language as TT

    for name in ("annotate_tt_schedule", "annotate_tt_sharding", "TTShard"):
        assert getattr(T, name) is getattr(TT, name)
    assert TT.Kernel is T.Kernel
