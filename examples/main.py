"""Main job: compile the reference kernels for Tenstorrent, run them, and check them against torch.

Compiles the design's GEMM (bf16, 32x32 blocks), TileLang's example GEMM (128x128x32 blocks, transpose_B,
fp16 in / fp32 accumulate, T.Pipelined, T.use_swizzle) and elementwise kernels (fp32 and bf16, plus a
fused exp(a) * b + 1 chain) for wormhole_b0 and blackhole, prints each per-core plan and the artifact
directory, runs the exact generated host program and kernels on tt-sim (the CPU emulator; no Tenstorrent
device here) and prints the max error against torch, and checks every artifact against the real TT-Metalium
0.81 headers and libtt_metal.so.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", str(ROOT / "tt_artifacts"))

import tilelang  # noqa: E402
import torch  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402
from tilelang_tt.realcheck import check_artifact  # noqa: E402
from tilelang_tt.summary import plan_summary  # noqa: E402

def gemm_inputs(M, N, K_, dtype, transpose_b=False):
    a = torch.randn(M, K_, dtype=dtype)
    b = torch.randn(N, K_, dtype=dtype) if transpose_b else torch.randn(K_, N, dtype=dtype)
    ref = a.float() @ (b.float().T if transpose_b else b.float())
    return [a, b, torch.empty(M, N, dtype=dtype)], ref


def eltwise_inputs(M, N, dtype, fn):
    a, b = torch.randn(M, N, dtype=dtype), torch.randn(M, N, dtype=dtype)
    return [a, b, torch.empty(M, N, dtype=dtype)], fn(a.float(), b.float())


CASES = [
    ("design GEMM 512x512x512 bf16", lambda: K.design_gemm(512, 512, 512),
     lambda: gemm_inputs(512, 512, 512, torch.bfloat16)),
    ("TileLang example GEMM 1024^3 fp16/fp32", lambda: K.tilelang_example_gemm(1024, 1024, 1024),
     lambda: gemm_inputs(1024, 1024, 1024, torch.float16, transpose_b=True)),
    ("elementwise add 1024x1024 fp32", lambda: K.elementwise_add(1024, 1024, "float32"),
     lambda: eltwise_inputs(1024, 1024, torch.float32, lambda a, b: a + b)),
    ("elementwise add 1024x1024 bf16", lambda: K.elementwise_add(1024, 1024, "bfloat16"),
     lambda: eltwise_inputs(1024, 1024, torch.bfloat16, lambda a, b: a + b)),
    ("fused exp(a)*b+1 128x128 bf16", lambda: K.fused_chain(128, 128),
     lambda: eltwise_inputs(128, 128, torch.bfloat16, lambda a, b: torch.exp(a) * b + 1)),
]


def main() -> int:
    torch.manual_seed(0)
    worst = []
    failures = 0
    for arch in ("wormhole_b0", "blackhole"):
        for title, make, inputs in CASES:
            kernel = tilelang.compile(make(), target=f"tt -arch={arch}")
            print(f"== {title} [{arch}]")
            print(plan_summary(kernel.plan, max_rows=4))
            print(f"  sources: {kernel.artifact_dir}")
            for name in sorted(p.relative_to(kernel.artifact_dir) for p in kernel.artifact_dir.rglob("*") if p.is_file()):
                print(f"    {name}")
            args, ref = inputs()
            kernel(*args)
            err = (args[-1].float() - ref).abs().max().item()
            rel = err / ref.abs().max().item()
            total = kernel.report["total"]
            print(f"  ran on tt-sim (CPU emulator) in {kernel.report['wall_seconds']:.2f} s: max |error| vs torch "
                  f"{err:.3g} (relative {rel:.2e}); DRAM read {total['dram_read_bytes']} B, written "
                  f"{total['dram_write_bytes']} B, {total['matmul_tiles']} matmul_tiles, {total['tile_ops']} other tile ops")
            worst.append((rel, title, arch))
            check = check_artifact(kernel.artifact_dir)
            print(f"  real TT-Metalium 0.81 check: {'PASS' if check.ok else 'FAIL ' + str(check.first_error())} "
                  f"({len(check.units)} kernel translation units, {len(check.host.checked)} host APIs, "
                  f"{check.seconds:.1f} s)")
            failures += 0 if check.ok else 1
            print()
    rel, title, arch = max(worst)
    print(f"largest relative error: {rel:.2e} ({title}, {arch}); real-header check failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
