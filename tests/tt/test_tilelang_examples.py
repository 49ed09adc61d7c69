"""The example harness (benchmarks/tilelang_examples.py) at CI size: its classification on a small made-up
examples folder, and a few of TileLang's own examples known to pass, which must stay CORRECT. The whole snapshot
is a benchmark (`python benchmarks/tilelang_examples.py -j2`, docs/usage.md), not a test."""

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
harness = importlib.import_module("tilelang_examples")

# TileLang's examples that pass their own checks on tt-sim (the CI subset; ~2 min on 2 cores)
KNOWN_CORRECT = (
    "elementwise/test_example_elementwise.py::test_example_elementwise_add",
    "norm/test_rms_norm.py::test_rms_norm",
    "flash_attention/test_example_flash_attention.py::test_example_mha_fwd_bhsd",
    # two T.Kernels (split-KV attention, then the combine): a program sequence, vectors transposed on chip and a
    # reduction over 4 of a tile's 32 rows
    "flash_decoding/test_example_flash_decoding.py::test_example_example_mha_inference",
    # an attention backward pass: dQ accumulated with T.atomic_add (partial slices summed by a second launch)
    "flash_attention/test_example_flash_attention.py::test_example_mha_bwd_bhsd",
    # a float16 GEMM at rtol = atol = 1e-2: in1 split into bfloat16 parts (SrcA multiplies 10 of fp16's 11 bits; with
    # one matmul 4 of its 16384 elements miss)
    "visual_layout_inference/visual_layout_inference.py",
    # block-sparse attention: an int8 block-mask row copied into a fragment and branched on element by element
    # (CopiedElementsTT: the RISC-V cores read the mask's elements, stored as Int32 words)
    "seer_attention/test_block_sparse_attn_tilelang.py::test_block_sparse_attn_tilelang",
    # fused MoE: float16 results of an fp32 DST in Float32 pages the host rounds (through the packer's bfloat16,
    # 91 of its 1M elements missed 1e-2); expert rows at data-dependent offsets
    "fusedmoe/test_example_fusedmoe.py::test_example_fusedmoe_tilelang",
    # float8 results (Float32 pages the host rounds to float8_e4m3fn); its Triton speed comparison is not run
    "cast/test_example_cast.py::test_example_per_token_cast_to_fp8",
)

KERNEL = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def add(N=64, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((N, N), dtype), B: T.Tensor((N, N), dtype), C: T.Tensor((N, N), dtype)):
        with T.Kernel(N // 32, N // 32, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] + B[by * 32 + i, bx * 32 + j]
    return main
'''

EXAMPLES = {
    # TileLang's style: CUDA tensors, synchronize, do_bench; its test file calls main()
    "ok/example_ok.py": KERNEL + '''
def main():
    a = torch.randn(64, 64, device="cuda")
    b = torch.randn(64, 64).cuda()
    c = add()(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    from tilelang.profiler import do_bench
    assert do_bench(lambda: add()(a, b)).source == "modeled"


if __name__ == "__main__":
    main()
''',
    "ok/test_example_ok.py": "import example_ok\n\n\ndef test_ok():\n    example_ok.main()\n",
    "wrong/example_wrong.py": KERNEL + '''
a = torch.randn(96, 96, device=torch.device("cuda"))
torch.testing.assert_close(add(96)(a, a), a * 3)
''',
    "clear/example_clear.py": '''
import tilelang
import tilelang.language as T


@T.prim_func
def main(A: T.Tensor((64, 64), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        tx = T.get_thread_binding()
        A[by * 32, bx * 32 + tx % 32] = 1.0


if __name__ == "__main__":
    tilelang.compile(main)
''',
    # its check passes, then it imports Triton to compare speed with: correct, and the reason says what did not run
    "bench/example_bench.py": KERNEL + '''
a = torch.randn(64, 64, device="cuda")
torch.testing.assert_close(add()(a, a), a * 2)
import triton
''',
    "arch/example_arch.py": "import torch\nimport tilelang\n\nif __name__ == '__main__':\n"
                            "    major, minor = torch.cuda.get_device_capability()\n",
    "unclear/example_unclear.py": "import tilelang\n\nif __name__ == '__main__':\n    raise ValueError('boom')\n",
}


@pytest.fixture(scope="module")
def made_up(tmp_path_factory):
    root = tmp_path_factory.mktemp("examples")
    for rel, text in EXAMPLES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    units = harness.discover(root)
    return units, harness.run_units(root, units, jobs=2, timeout=240, logs=root / "logs", progress=False)


def test_discovery_runs_test_functions_and_uncalled_programs(made_up):
    units, _ = made_up
    assert [u.id for u in units] == ["arch/example_arch.py", "bench/example_bench.py", "clear/example_clear.py",
                                     "ok/test_example_ok.py::test_ok", "unclear/example_unclear.py",
                                     "wrong/example_wrong.py"]
    assert units[3].modules == ["ok/example_ok.py"]


def test_classification(made_up):
    _, results = made_up
    got = {r.id.split("/")[0]: (r.status, r.reason) for r in results}
    assert got["ok"][0] == "CORRECT" and got["ok"][1].startswith("1 check(s), 2 TT launch(es)"), got["ok"]
    assert got["wrong"][0] == "WRONG" and "Mismatched elements" in got["wrong"][1], got["wrong"]
    # the check that failed, where, and whether the compile warned of precision it loses (this kernel is exact)
    assert got["wrong"][1].endswith("wrong/example_wrong.py:17 [no TTPrecisionWarning]")
    assert got["clear"][0] == "CLEAR" and got["clear"][1].startswith("TTUnsupportedError"), got["clear"]
    assert got["arch"] == ("UNSUPPORTED-ARCH", "asks torch.cuda for the device (get_device_capability)")
    assert got["bench"][0] == "CORRECT" and got["bench"][1].startswith("1 check(s), 1 TT launch(es)") and \
        got["bench"][1].endswith("then needs Triton (a GPU-only package), not run"), got["bench"]
    assert got["unclear"][0] == "UNCLEAR" and got["unclear"][1].startswith("ValueError: boom at"), got["unclear"]
    report = harness.text_report(results)
    assert report.splitlines()[-1] == "examples: 2/6 correct (1 wrong, 1 clear, 1 arch, 1 unclear)"
    assert "== wrong" in report and "| ok | 1 | 1 | 0 | 0 | 0 | 0 |" in harness.markdown_report(results)


def test_source_markers_and_test_marks():
    import ast

    child = importlib.import_module("tilelang_examples_child")
    tree = ast.parse("@tilelang.testing.requires_cuda_compute_version_eq(9, 0)\ndef test_x(): pass\n"
                     "@tilelang.testing.requires_cuda_compute_version_lt(11)\ndef test_y(): pass\n")
    assert harness._test_marks(tree.body[0]) and not harness._test_marks(tree.body[1])
    assert child.SOURCE_MARKERS is harness.SOURCE_MARKERS


@pytest.mark.skipif(not harness.DEFAULT_ROOT.is_dir(), reason="no TileLang examples snapshot beside the repository")
def test_known_correct_examples_stay_correct(tmp_path):
    units = [u for u in harness.discover(harness.DEFAULT_ROOT) if u.id in KNOWN_CORRECT]
    assert len(units) == len(KNOWN_CORRECT)
    results = harness.run_units(harness.DEFAULT_ROOT, units, jobs=2, timeout=240, logs=tmp_path, progress=False)
    assert {r.id: r.status for r in results} == dict.fromkeys(KNOWN_CORRECT, "CORRECT"), \
        [(r.id, r.reason) for r in results]
