"""Rows wider than L1 (RowStreamTT): TileLang's softmax, RMSNorm and LayerNorm over 4096 x 32768 float32.

Run: .venv/bin/python benchmarks/row_stream.py [--protocol]
Each kernel's row block (32 rows of 32768 float32 = 4 MB per tile buffer) does not fit L1, so the compiler sweeps
the rows in column chunks. Printed per kernel and architecture: the chunk and the number of sweeps RowStreamTT
chose, the modeled DRAM bytes against the minimum (each input and output once), and the modeled time (the static
model of the artifact). --protocol also runs tt-sim protocol-only on wormhole_b0 (no math; the DRAM counters).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402

M, N = 4096, 32768
KERNELS = {
    "softmax": lambda: K.softmax(M, N, 32, "float32"),
    "rms_norm": lambda: K.rms_norm(M, N, 32),
    "layernorm": lambda: K.layernorm(M, N, blk_m=32, in_dtype="float32", out_dtype="float32"),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", action="store_true", help="run tt-sim protocol-only on wormhole_b0")
    args = parser.parse_args()
    print(f"{'kernel':10s} {'arch':12s} {'chunk':>6s} {'sweeps':>6s} {'DRAM MB':>8s} {'min MB':>7s} {'x min':>6s} "
          f"{'model us':>9s} {'bound':>6s}")
    for name, make in KERNELS.items():
        for arch in ("wormhole_b0", "blackhole"):
            kernel = tilelang.compile(make(), target=f"tt -arch={arch}")
            stream, model = kernel.plan["row_stream"], kernel.report["model"]
            minimum = sum(b["bytes"] for b in kernel.plan["buffers"])      # every tensor once, in or out
            print(f"{name:10s} {arch:12s} {stream['chunk']:6d} {stream['sweeps']:6d} {model['dram_bytes'] / 1e6:8.1f} "
                  f"{minimum / 1e6:7.1f} {model['dram_bytes'] / minimum:6.2f} {model['seconds'] * 1e6:9.1f} "
                  f"{model['bound']:>6s}", flush=True)
            if args.protocol and arch == "wormhole_b0":
                import torch

                t0 = time.perf_counter()
                kernel.emulate(*[torch.zeros(*b["shape"]) for b in kernel.plan["buffers"]], protocol_only=True)
                total = kernel.report["total"]
                moved = total["dram_read_bytes"] + total["dram_write_bytes"]
                print(f"  tt-sim protocol-only: DRAM {moved / 1e6:.1f} MB ({moved / minimum:.2f}x the minimum), "
                      f"run {time.perf_counter() - t0:.0f} s", flush=True)
    print("(modeled, not measured: perf_model.py with device.PERF, static counts of each artifact's program)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
