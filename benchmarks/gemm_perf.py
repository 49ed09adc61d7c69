"""Modeled GEMM performance: our kernels beside the model of TTNN's kernel on the same shape, and DRAM traffic.

Run: .venv/bin/python benchmarks/gemm_perf.py [--skip-protocol] [--square-only]
For bf16 GEMMs (M x N x K: square 512..8192 and the LLaMA shapes 4096x11008x4096, 4096x14336x4096,
1024x4096x4096, 128x4096x4096) on wormhole_b0 (8x8) and blackhole (11x10), TileLang's example blocks (128x128x32,
B transposed, fp32 accumulator) and the design's (32x32x32), each compiled with the defaults (HiFi2, SuperBlockTT's
automatic multicast and per-core super-blocks; column "fused": the h x w user blocks fused per core): cores used,
our modeled time and TFLOPS, what binds it, DRAM bytes against the A + B + C minimum and, "L1 min", the least
ratio any 2-D multicast lattice can reach when the per-core output block keeps the kernel's accumulator in L1
(``l1_min_ratio``: above 1 the output does not fit the cores' L1, so some operand is read more than once); then the same performance
model applied to TTNN's 2-D multicast matmul on the same shape with every tensor in DRAM
(tilelang_tt/ttnn_reference.py dram_config), and ours/TTNN: our TFLOPS over TTNN's, a model against a model. How
far the model of TTNN's kernel is from TT's measurements is benchmarks/calibration.py's table (docs/perf_model.md);
nothing here divides a model by a measurement. The last columns model our kernel compiled with ``-multicast=false``
(the contiguous split).
Then, for 4096^3 on wormhole_b0, DRAM bytes read + written by a protocol-only tt-sim run against the minimum.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402

from examples import kernels as K  # noqa: E402
from tilelang_tt import device  # noqa: E402  (importing the package registers target "tt")
from tilelang_tt import ttnn_reference as ref  # noqa: E402
from tilelang_tt.device import TILE, TILE_ELEMS  # noqa: E402

SQUARE = tuple((n, n, n) for n in (512, 1024, 2048, 4096, 8192))
LLAMA = ((4096, 11008, 4096), (4096, 14336, 4096), (1024, 4096, 4096), (128, 4096, 4096))   # M, N, K
BLOCKS = {
    "tilelang 128x128x32": lambda m, n, k: K.tilelang_example_gemm(m, n, k, dtype="bfloat16", accum_dtype="float32"),
    "design 32x32x32": lambda m, n, k: K.design_gemm(m, n, k),
}
ACC_BYTES = {"tilelang 128x128x32": 4, "design 32x32x32": 2}     # the accumulator's element (float32 / bfloat16)
HEADER = (f"{'arch':12s} {'blocks':20s} {'M x N x K':>17s} {'cores':>5s} {'ours us':>9s} {'TFLOPS':>7s} "
          f"{'bound':>7s} {'DRAM MB':>8s} {'x min':>6s} {'L1 min':>6s} {'fused':>6s} | {'TTNN us':>9s} {'TFLOPS':>7s} {'bound':>7s} "
          f"{'ours/TTNN':>9s} | {'no mcast':>8s} {'bound':>7s} {'x min':>6s}")


def _fused(kernel) -> str:
    sb = kernel.plan.get("super_block")
    return "-" if sb is None else "x".join(str(f) for f in sb["factor"])


def l1_min_ratio(m: int, n: int, k: int, arch: str, acc_bytes: int) -> float:
    """The least DRAM traffic, over the A + B + C minimum, of any 2-D multicast GEMM on ``arch`` whose per-core
    output block (P x Q tiles, any lattice of rows x cols cores) keeps its accumulator in L1 beside double-buffered
    bf16 A and B tiles of one K step: A is read once per pass over N (ceil(Nt / (cols * Q))), B once per pass over M.
    Where this exceeds 1.0 no such GEMM reads each operand once: the output does not fit the cores' L1."""
    dev = device.get_device(arch)
    mt, nt = m // TILE, n // TILE
    a, b, c = 2 * m * k, 2 * k * n, 2 * m * n
    tile_bf16, tile_acc = 2 * TILE_ELEMS, acc_bytes * TILE_ELEMS
    best = None
    for rows in range(1, dev.grid_y + 1):
        for cols in range(1, dev.grid_x + 1):
            for p in range(1, -(-mt // rows) + 1):
                for q in range(1, -(-nt // cols) + 1):
                    if tile_acc * p * q + 2 * tile_bf16 * (p + q) > dev.l1_usable_bytes:
                        break
                    moved = a * -(-nt // (cols * q)) + b * -(-mt // (rows * p)) + c
                    best = moved if best is None else min(best, moved)
    return best / (a + b + c)


def _row(arch: str, label: str, shape: tuple, kernel, plain: dict) -> str:
    m, n, k = shape
    model = kernel.report["model"]
    ttnn = ref.model_matmul(ref.dram_config(m, k, n, arch), arch)
    minimum = 2 * (m * k + k * n + m * n)
    tflops = 2 * m * n * k / model["seconds"] / 1e12
    return (f"{arch:12s} {label:20s} {f'{m}x{n}x{k}':>17s} {len(kernel.plan['mapping']):5d} "
            f"{model['seconds'] * 1e6:9.1f} {tflops:7.2f} {model['bound']:>7s} {model['dram_bytes'] / 1e6:8.1f} "
            f"{model['dram_bytes'] / minimum:6.2f} {l1_min_ratio(m, n, k, arch, ACC_BYTES[label]):6.2f} "
            f"{_fused(kernel):>6s} | {ttnn['seconds'] * 1e6:9.1f} "
            f"{ttnn['tflops']:7.2f} {ttnn['bound']:>7s} {ttnn['seconds'] / model['seconds']:9.3f} | "
            f"{2 * m * n * k / plain['seconds'] / 1e12:8.2f} {plain['bound']:>7s} {plain['dram_bytes'] / minimum:6.2f}")


def _protocol(kernels: dict) -> None:
    import torch

    n = 4096
    minimum = 3 * n * n * 2
    for label, make in BLOCKS.items():
        for mcast in (False, True):
            kernel = (kernels[("wormhole_b0", label, (n, n, n))] if mcast
                      else tilelang.compile(make(n, n, n), target="tt -arch=wormhole_b0 -multicast=false"))
            tensors = [torch.zeros(*b["shape"], dtype=torch.bfloat16) for b in kernel.plan["buffers"]]
            t0 = time.perf_counter()
            kernel.emulate(*tensors, protocol_only=True)
            total = kernel.report["total"]
            moved = total["dram_read_bytes"] + total["dram_write_bytes"]
            model = kernel.report["model"]
            how = f"automatic: multicast, {_fused(kernel)} blocks fused per core" if mcast else "multicast=false"
            print(f"tt-sim protocol-only 4096^3 wormhole_b0 {label}, {how}: DRAM read "
                  f"{total['dram_read_bytes'] / 1e6:.1f} MB + written {total['dram_write_bytes'] / 1e6:.1f} MB = "
                  f"{moved / 1e6:.1f} MB, {moved / minimum:.2f}x the {minimum / 1e6:.1f} MB minimum (multicast "
                  f"{total.get('noc_multicast_bytes', 0) / 1e6:.1f} MB sent); model from these counters "
                  f"{model['tflops']:.2f} TFLOPS ({model['bound']}-bound); run {time.perf_counter() - t0:.1f} s",
                  flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-protocol", action="store_true", help="skip the 4096^3 protocol-only runs")
    parser.add_argument("--square-only", action="store_true", help="leave out the LLaMA shapes")
    args = parser.parse_args()
    t_start = time.perf_counter()
    shapes = SQUARE if args.square_only else SQUARE + LLAMA
    print(HEADER)
    kernels = {}
    for arch in ("wormhole_b0", "blackhole"):
        for label, make in BLOCKS.items():
            for shape in shapes:
                kernel = tilelang.compile(make(*shape), target=f"tt -arch={arch}")
                plain = tilelang.compile(make(*shape), target=f"tt -arch={arch} -multicast=false").report["model"]
                print(_row(arch, label, shape, kernel, plain), flush=True)
                kernels[(arch, label, shape)] = kernel
    print("(modeled, not measured: perf_model.py with device.PERF; ours from the static walk of each artifact's "
          "program, TTNN's from tilelang_tt/ttnn_reference.py; the calibration of TTNN's model against TT's "
          "measurements: benchmarks/calibration.py)")
    if not args.skip_protocol:
        _protocol(kernels)
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
