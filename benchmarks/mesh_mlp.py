"""LLaMA-3-70B's MLP on a T3000 (2x4 Wormhole mesh) beside one Wormhole chip: the performance model from static counts.

The MLP of one layer over 8192 tokens (hidden 8192, intermediate 28672, SwiGLU): the gate and up projections
(8192x8192 @ 8192x28672 each) and the down projection (8192x28672 @ 28672x8192), each TileLang's example GEMM in bf16
with 128x128 blocks (K steps of 64) compiled for one chip and for ``-mesh=2x4`` (split by rows: the activations and outputs row-sharded,
the weights replicated). Nothing is emulated at this size: the counts are the static walk of each chip's TT program
times the plan's mapping (``perf_model.model_for_artifact``); the mesh model takes the slowest chip and adds the host
transfers over the cards' PCIe links. The SiLU(gate) * up product between the GEMMs is left out (elementwise, small).

    python benchmarks/mesh_mlp.py [--mesh 2x4] [--tokens 8192]
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", str(ROOT / "tt_artifacts"))

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402
from tilelang_tt import perf_model  # noqa: E402

HIDDEN, INTERMEDIATE = 8192, 28672


def gemm(M, N, K_):
    """TileLang's example GEMM (B stored [N, K], fp32 accumulation) in bf16 with 128x128 blocks, K steps of 64."""
    return K.tilelang_example_gemm(M, N, K_, 128, 128, 64, dtype="bfloat16", num_stages=2)


def model(func, target):
    kernel = tilelang.compile(func, target=target)
    art = kernel.adapter.artifact
    return perf_model.model_for_artifact(art.directory, art.plan)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--tokens", type=int, default=8192)
    args = ap.parse_args()
    M = args.tokens
    layers = [("gate", M, INTERMEDIATE, HIDDEN), ("up", M, INTERMEDIATE, HIDDEN), ("down", M, HIDDEN, INTERMEDIATE)]
    print(f"LLaMA-3-70B MLP, {M} tokens, bf16, wormhole_b0: one chip beside a {args.mesh} mesh "
          f"({perf_model.LABEL}; static counts, no emulation)")
    print(f"{'GEMM':6s} {'M x N x K':22s} {'1 chip ms':>10s} {'mesh kernel ms':>15s} {'host in+out ms':>15s} "
          f"{'speed-up':>9s} {'mesh TFLOPS':>11s}")
    total_one = total_mesh = total_host = 0.0
    for name, m, n, k in layers:
        t0 = time.perf_counter()
        one = model(gemm(m, n, k), "tt -arch=wormhole_b0 -compile_only")
        mesh = model(gemm(m, n, k), f"tt -arch=wormhole_b0 -mesh={args.mesh} -compile_only")
        for mdl in (one, mesh):
            if "error" in mdl:
                raise SystemExit(f"{name}: {mdl['error']}")
        host = mesh["mesh"]["host_to_device_seconds"] + mesh["mesh"]["device_to_host_seconds"]
        total_one, total_mesh, total_host = total_one + one["seconds"], total_mesh + mesh["seconds"], total_host + host
        print(f"{name:6s} {f'{m}x{n}x{k}':22s} {one['seconds'] * 1e3:10.2f} {mesh['seconds'] * 1e3:15.2f} "
              f"{host * 1e3:15.2f} {one['seconds'] / mesh['seconds']:8.2f}x {mesh['tflops']:11.1f}"
              f"   (compiled in {time.perf_counter() - t0:.1f} s; slowest chip {mesh['mesh']['slowest_chip']}, "
              f"bound: {mesh['bound']})")
    print(f"{'MLP':6s} {'':22s} {total_one * 1e3:10.2f} {total_mesh * 1e3:15.2f} {total_host * 1e3:15.2f} "
          f"{total_one / total_mesh:8.2f}x")
    print("kernel time = the slowest chip; host in+out = the shards and replicated weights over the cards' PCIe "
          "links (two chips per n300 link), not overlapped with compute")


if __name__ == "__main__":
    main()
