"""The bf16 GEMM of benchmarks/emulator_vs_ttlang.py written in TT-Lang, timed on Tenstorrent's Python simulator.

Runs under the Python that has tt-lang-sim 1.1.6 installed (not the project's venv; tt-lang-sim is not a
project dependency):
    python3 -m venv /tmp/ttls && /tmp/ttls/bin/pip install torch==2.13.0 && /tmp/ttls/bin/pip install tt-lang-sim==1.1.6
    /tmp/ttls/bin/python benchmarks/ttlang_sim_gemm.py M N K BLOCK GRID_ROWS GRID_COLS
Prints one JSON line: {"seconds": warm run time, "cpu_seconds": its CPU time, "matmul_tiles": tile products, ...}.

The kernel is tt-lang's own matmul tutorial (ttl/tutorials/matmul/step_3_multinode.py) reduced to y = a @ b:
BLOCK x BLOCK blocks (BLOCK/32 tiles a side) in dataflow buffers, the compute kernel accumulating
acc + a_blk @ b_blk per K block, one node per (GRID_ROWS x GRID_COLS) output region. Torch runs on one thread.
"""

import json
import sys
import time

from ttl.sim.ttlang_sim import setup_simulator_imports

setup_simulator_imports()

import torch  # noqa: E402
import ttl  # noqa: E402
import ttnn  # noqa: E402

TILE = 32


def make_gemm(block: int, grid_rows: int, grid_cols: int):
    bt = block // TILE   # tiles per block side

    @ttl.operation(grid=(grid_cols, grid_rows))
    def gemm(a: ttnn.Tensor, b: ttnn.Tensor, y: ttnn.Tensor) -> None:
        m_blocks = a.shape[0] // block // grid_rows
        n_blocks = b.shape[1] // block // grid_cols
        k_blocks = a.shape[1] // block
        a_dfb = ttl.make_dataflow_buffer_like(a, shape=(bt, bt), block_count=2)
        b_dfb = ttl.make_dataflow_buffer_like(b, shape=(bt, bt), block_count=2)
        acc_dfb = ttl.make_dataflow_buffer_like(y, shape=(bt, bt), block_count=2)
        y_dfb = ttl.make_dataflow_buffer_like(y, shape=(bt, bt), block_count=2)

        def node_blocks():   # (first M tile, first N tile) of each output block of this node, in order
            node_n, node_m = ttl.node(dims=2)
            for lm in range(m_blocks):
                for ln in range(n_blocks):
                    yield (node_m * m_blocks + lm) * bt, (node_n * n_blocks + ln) * bt

        @ttl.datamovement()
        def read():
            for m0, n0 in node_blocks():
                for kb in range(k_blocks):
                    with a_dfb.reserve() as a_blk, b_dfb.reserve() as b_blk:
                        tx_a = ttl.copy(a[m0:m0 + bt, kb * bt:(kb + 1) * bt], a_blk)
                        tx_b = ttl.copy(b[kb * bt:(kb + 1) * bt, n0:n0 + bt], b_blk)
                        tx_a.wait()
                        tx_b.wait()

        @ttl.compute()
        def compute():
            for _ in range(m_blocks):
                for _ in range(n_blocks):
                    with acc_dfb.reserve() as acc_blk:
                        acc_blk.store(ttl.block.fill(0, shape=acc_blk.shape))
                    for _ in range(k_blocks):
                        with a_dfb.wait() as a_blk, b_dfb.wait() as b_blk, acc_dfb.wait() as pre:
                            with acc_dfb.reserve() as acc_blk:
                                acc_blk.store(pre + a_blk @ b_blk)
                    with acc_dfb.wait() as acc_blk, y_dfb.reserve() as y_blk:
                        y_blk.store(acc_blk)

        @ttl.datamovement()
        def write():
            for m0, n0 in node_blocks():
                with y_dfb.wait() as y_blk:
                    ttl.copy(y_blk, y[m0:m0 + bt, n0:n0 + bt]).wait()

    return gemm


def main() -> int:
    M, N, K, block, grid_rows, grid_cols = (int(v) for v in sys.argv[1:7])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = ttnn.open_device(device_id=0)
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(K, N, dtype=torch.bfloat16)

    def tt(t):
        return ttnn.from_torch(t, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device,
                               memory_config=ttnn.DRAM_MEMORY_CONFIG)

    gemm = make_gemm(block, grid_rows, grid_cols)
    ta, tb = tt(a), tt(b)
    times, cpu = [], []
    for _ in range(2):   # the first run includes tt-lang-sim's one-time setup; the second is the warm time
        ty = tt(torch.zeros(M, N, dtype=torch.bfloat16))
        t0, c0 = time.perf_counter(), time.process_time()
        gemm(ta, tb, ty)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    y = ttnn.to_torch(ty).float()
    ref = a.float() @ b.float()
    print(json.dumps({"seconds": times[-1], "cpu_seconds": cpu[-1], "first_seconds": times[0],
                      "matmul_tiles": (M // TILE) * (N // TILE) * (K // TILE),
                      "rel_err": ((y - ref).abs().max() / ref.abs().max()).item()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
