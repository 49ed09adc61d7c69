"""Main job: compile the reference kernels for Tenstorrent and show what was generated.

Compiles the design's GEMM (bf16, 32x32 blocks), TileLang's example GEMM (128x128x32 blocks, transpose_B,
fp16 in / fp32 accumulate, T.Pipelined, T.use_swizzle) and elementwise kernels (fp32 and bf16, plus a
fused exp(a) * b + 1 chain) for wormhole_b0 and blackhole, and prints each per-core plan and the
artifact directory. Execution needs a device or the emulator (next milestone).
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", str(ROOT / "tt_artifacts"))

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402
from tilelang_tt.summary import plan_summary  # noqa: E402

CASES = [
    ("design GEMM 512x512x512 bf16", lambda: K.design_gemm(512, 512, 512)),
    ("TileLang example GEMM 1024^3 fp16/fp32", lambda: K.tilelang_example_gemm(1024, 1024, 1024)),
    ("elementwise add 1024x1024 fp32", lambda: K.elementwise_add(1024, 1024, "float32")),
    ("elementwise add 1024x1024 bf16", lambda: K.elementwise_add(1024, 1024, "bfloat16")),
    ("fused exp(a)*b+1 128x128 bf16", lambda: K.fused_chain(128, 128)),
]


def main() -> int:
    for arch in ("wormhole_b0", "blackhole"):
        for title, make in CASES:
            kernel = tilelang.compile(make(), target=f"tt -arch={arch}")
            print(f"== {title} [{arch}]")
            print(plan_summary(kernel.plan, max_rows=4))
            print(f"  sources: {kernel.artifact_dir}")
            for name in sorted(p.relative_to(kernel.artifact_dir) for p in kernel.artifact_dir.rglob("*") if p.is_file()):
                print(f"    {name}")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
