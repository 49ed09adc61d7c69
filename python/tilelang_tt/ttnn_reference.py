"""TTNN's own kernels as TT programs, so the performance model can price them like ours ("like with like").

Each builder returns ``(kernels, plan)``: ``{role: body}`` of ``ttir`` nodes and the part of a plan the model
reads (CB and tensor page sizes, placements, multicast groups, the per-core mapping). ``perf_model.program_work``
counts them exactly as it counts a compiled artifact, and ``perf_model.evaluate`` prices them with the same rates.

* ``matmul_program``: tt-metal's 2-D multicast matmul (``MatmulMultiCoreReuseMultiCastProgramConfig``,
  ``matmul_multicore_reuse_mcast_2d_program_factory``) as its kernels run it: the in0 reader (a row's first core
  reads an ``out_block_h x in0_block_w`` block, or takes it from its L1 shard, and multicasts it along the row),
  the in1 reader + writer (a column's first core reads ``in0_block_w x out_block_w`` and multicasts it down the
  column; the output block is written once it is complete), and the compute kernel (``matmul_block`` per output
  subblock and K tile, packer L1 accumulation across K blocks: bmm_large_block_zm_fused_bias_activation.cpp).
* ``sdpa_program``: tt-metal's FlashAttention-2 SDPA (``sdpa_program_factory``): per (Q chunk, K chunk) pair,
  QK^T, the online softmax (row max, exp, row sum, rescale) and P.V, K and V read from DRAM per pair.

Configurations: ``benchmark_config`` reproduces tt-metal's GEMM benchmark (tests/ttnn/unit_tests/benchmarks/
test_benchmark.py: per-core block from the grid, ``in0_block_w = K / grid_x / 32 / in0_block_w_div``, output
blocks split ``num_out_blocks_h x num_out_blocks_w``, subblock by its SUBBLOCK_HW_CHOICES); ``dram_config`` is the
same program with every tensor in DRAM for any shape (the benchmark's DRAM rows' pattern: 8x8-tile output blocks,
16x16 for Bfp4_b, in0_block_w up to 16 K tiles), each core's block padded up as TTNN pads its last cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from . import perf_model as pm
from . import ttir
from .device import TILE, TILE_FORMATS, get_device
from .transform.multicast_reuse import multicast_read

# tt-metal test_benchmark.py SUBBLOCK_HW_CHOICES: the first (h, w) dividing the output block wins
SUBBLOCK_HW_CHOICES = ((4, 2), (2, 4), (8, 1), (1, 8), (7, 1), (1, 7), (3, 2), (2, 3), (6, 1), (1, 6), (5, 1),
                       (1, 5), (2, 2), (4, 1), (1, 4), (3, 1), (1, 3), (2, 1), (1, 2), (1, 1))
FORMATS = {"bf16": "Float16_b", "bfp8": "Bfp8_b", "bfp4": "Bfp4_b"}


def subblock(h: int, w: int, out_sharded: bool = False, fp32_acc: bool = False) -> tuple[int, int]:
    for sh, sw in SUBBLOCK_HW_CHOICES:
        if fp32_acc and sh * sw > 4:
            continue
        if out_sharded and (w % sw or sh != 1):
            continue
        if h % sh == 0 and w % sw == 0:
            return sh, sw
    return 1, 1


@dataclass(frozen=True)
class MatmulConfig:
    """One run of TTNN's 2-D multicast matmul: shape, grid (x, y), formats and the program config's blocks."""

    M: int
    K: int
    N: int
    grid: tuple[int, int]           # (x, y): compute_with_storage_grid_size
    fmt: str                        # tile format of in0, in1 and out (device.TILE_FORMATS)
    fidelity: str
    in0_block_w: int                # K tiles per block
    per_core_M: int                 # output tiles per core
    per_core_N: int
    out_block_h: int
    out_block_w: int
    subblock: tuple[int, int]       # (out_subblock_h, out_subblock_w)
    in0_l1: bool = False            # in0 block-sharded in L1 (else DRAM interleaved)
    out_l1: bool = False            # output block-sharded in L1
    resident: bool = False          # operands already in each core's L1, nothing moves (single-core microbenchmark)
    iterations: int = 1             # kernel_iters: the whole program repeated in one launch

    @property
    def flops(self) -> int:
        return 2 * self.M * self.K * self.N * self.iterations


def benchmark_config(M: int, K: int, N: int, grid: tuple[int, int], dtype: str, fidelity: str, in0_sharded: bool,
                     out_sharded: bool, in0_block_w_div: int = 1, num_out_blocks_h: int = 1,
                     num_out_blocks_w: int = 1) -> MatmulConfig:
    """tt-metal test_benchmark.py's derivation of the program config from one row of its shape table."""
    gx, gy = grid
    per_core_m, per_core_n = M // gy // TILE, N // gx // TILE
    bh, bw = per_core_m // num_out_blocks_h, per_core_n // num_out_blocks_w
    return MatmulConfig(M, K, N, grid, FORMATS[dtype], fidelity, K // gx // TILE // in0_block_w_div, per_core_m,
                        per_core_n, bh, bw, subblock(bh, bw, out_sharded), in0_sharded, out_sharded)


def _largest_divisor(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def dram_config(M: int, K: int, N: int, arch: str, fmt: str = "Float16_b", fidelity: str = "HiFi2",
                grid: tuple[int, int] | None = None) -> MatmulConfig:
    """TTNN's 2-D multicast matmul with A, B and C in DRAM, for any shape, on the arch's whole grid."""
    dev = get_device(arch)
    gx, gy = grid or (dev.grid_x, dev.grid_y)
    mt, kt, nt = (-(-d // TILE) for d in (M, K, N))
    cap = 16 if fmt == "Bfp4_b" else 8
    pm_, pn = -(-mt // gy), -(-nt // gx)
    bh, bw = min(pm_, cap), min(pn, cap)
    pm_, pn = -(-pm_ // bh) * bh, -(-pn // bw) * bw          # the last cores' blocks padded to whole output blocks
    return MatmulConfig(M, K, N, (gx, gy), fmt, fidelity, _largest_divisor(kt, 16), pm_, pn, bh, bw,
                        subblock(bh, bw))


def _loop(name: str, extent: int, body: list) -> list:
    if extent <= 0:
        return []
    return [ttir.For(tirx.Var(name, "int32"), 0, extent, body)]


def _call(op: str, *args) -> ttir.Call:
    return ttir.Call(op, tuple(args))


def _fetch(cb: str, tensor: str, rows: int, cols: int, group: str | None) -> list:
    """Reserve, read (or read and multicast with ``group``: TTMulticastReuse's handshake), wait, push: one block
    into a CB."""
    read = _call("read_tiles", ttir.CB(cb), ttir.Tensor(tensor), 0, 0, rows, cols)
    move = multicast_read(read, group, flush=False) if group else [read, _call("noc_async_read_barrier")]
    return [_call("cb_reserve_back", ttir.CB(cb), rows * cols), *move, _call("cb_push_back", ttir.CB(cb), rows * cols)]


def _store(cb: str, tensor: str, rows: int, cols: int) -> list:
    return [_call("cb_wait_front", ttir.CB(cb), rows * cols),
            _call("write_tiles", ttir.CB(cb), ttir.Tensor(tensor), 0, 0, rows, cols),
            _call("noc_async_write_barrier"), _call("cb_pop_front", ttir.CB(cb), rows * cols)]


def _k_block(c: MatmulConfig, acc: int, dst_cb: str) -> list:
    """One K block of one output block: every subblock's matmul_block over in0_block_w, packed into ``dst_cb``."""
    sh, sw = c.subblock
    nsub = (c.out_block_h // sh) * (c.out_block_w // sw)
    sub = [_call("tile_regs_acquire"),
           *_loop("k", c.in0_block_w, [_call("matmul_block", ttir.CB("in0"), ttir.CB("in1"), 0, 0, 0, 0, sw, sh,
                                             c.in0_block_w)]),
           _call("tile_regs_commit"), _call("tile_regs_wait"),
           *_loop("i", sh * sw, [_call("pack_tile", ttir.Dst(0), ttir.CB(dst_cb))]), _call("tile_regs_release")]
    return [_call("cb_wait_front", ttir.CB("in0"), c.out_block_h * c.in0_block_w),
            _call("cb_wait_front", ttir.CB("in1"), c.in0_block_w * c.out_block_w),
            _call("pack_reconfig_l1_acc", acc), *_loop("sb", nsub, sub),
            _call("cb_pop_front", ttir.CB("in0"), c.out_block_h * c.in0_block_w),
            _call("cb_pop_front", ttir.CB("in1"), c.in0_block_w * c.out_block_w)]


def _compute(c: MatmulConfig, nk: int) -> list:
    """Packer L1 accumulation as TTNN runs it: the first K block packs the partials plain, the later ones add onto
    them in L1, the last one packs the finished block into the output CB."""
    if nk == 1:
        return _k_block(c, 0, "out")
    return [*_k_block(c, 0, "interm"), *_loop("kb", nk - 2, _k_block(c, 1, "interm")), *_k_block(c, 1, "out")]


def matmul_program(c: MatmulConfig) -> tuple[dict, dict]:
    """The kernels of one launch of TTNN's 2-D multicast matmul under config ``c``, and their plan."""
    gx, gy = c.grid
    kt = -(-c.K // TILE)
    nk = -(-kt // c.in0_block_w)
    n_out = (c.per_core_M // c.out_block_h) * (c.per_core_N // c.out_block_w) * c.iterations
    in0 = [] if c.resident else _fetch("in0", "A", c.out_block_h, c.in0_block_w, "mcast_in0")
    in1 = [] if c.resident else _fetch("in1", "B", c.in0_block_w, c.out_block_w, "mcast_in1")
    out = [] if c.out_l1 or c.resident else _store("out", "C", c.out_block_h, c.out_block_w)
    kernels = {"reader": _loop("ob", n_out, _loop("b", nk, in0)),
               "compute": _loop("ob", n_out, _compute(c, nk)),
               "writer": _loop("ob", n_out, [*_loop("b", nk, in1), *out])}
    page = TILE_FORMATS[c.fmt].tile_bytes
    partial = TILE_FORMATS["Float16_b"].tile_bytes      # L1 accumulation needs a non-block-float partial format
    plan = {"cbs": [{"name": "in0", "page_size": page, "format": c.fmt}, {"name": "in1", "page_size": page,
                                                                          "format": c.fmt},
                    {"name": "interm", "page_size": partial, "format": "Float16_b"},
                    {"name": "out", "page_size": page, "format": c.fmt}],
            "buffers": [{"name": "A", "page_size": page, "placement": "L1" if c.in0_l1 else "DRAM"},
                        {"name": "B", "page_size": page, "placement": "DRAM"},
                        {"name": "C", "page_size": page, "placement": "L1" if c.out_l1 else "DRAM"}],
            # TTNN's 2-D multicast: in0 sent along each core row by the core at x = 0, in1 down each column by y = 0
            "multicast": {"groups": [
                {"name": "mcast_in0", "axis": "row", "cores": [{"is_sender": x == 0} for y in range(gy) for x in range(gx)]},
                {"name": "mcast_in1", "axis": "column",
                 "cores": [{"is_sender": y == 0} for y in range(gy) for x in range(gx)]}]},
            "mapping": [{"core": [y, x]} for y in range(gy) for x in range(gx)], "schedule": {"common_args": {}}}
    return kernels, plan


def matmul_work(c: MatmulConfig) -> list[pm.CoreWork]:
    return pm.program_work(*matmul_program(c))


def model_matmul(c: MatmulConfig, arch: str, perf=None) -> dict:
    """The performance model of TTNN's 2-D multicast matmul under config ``c`` (modeled, not measured)."""
    model = pm.evaluate(matmul_work(c), arch, c.fidelity, "model of TTNN's 2-D multicast matmul", perf)
    model["tflops"] = c.flops / model["seconds"] / 1e12     # of the unpadded shape (padding is overhead)
    return model


@dataclass(frozen=True)
class SdpaConfig:
    """One launch of TTNN's SDPA: shape (batch, query heads, K/V heads, sequence, head dim), chunks, grid."""

    batch: int
    heads: int
    kv_heads: int
    seq: int
    dim: int
    causal: bool
    grid: tuple[int, int]
    q_chunk: int = 256
    k_chunk: int = 512
    fmt: str = "Float16_b"
    fidelity: str = "HiFi2"

    @property
    def pairs(self) -> int:
        """(Q chunk, K chunk) pairs of all heads: the causal ones on or below the diagonal."""
        nq, nk = -(-self.seq // self.q_chunk), -(-self.seq // self.k_chunk)
        per_head = sum(min(nk, -(-((q + 1) * self.q_chunk) // self.k_chunk)) for q in range(nq)) if self.causal \
            else nq * nk
        return self.batch * self.heads * per_head

    @property
    def flops(self) -> int:
        full = 4 * self.batch * self.heads * self.seq * self.seq * self.dim
        return full // 2 if self.causal else full


def _tiles(op: str, n: int, *cbs: str) -> list:
    """``n`` tile ops of one kind on the CBs ``cbs`` (the model counts calls; indices do not matter)."""
    return _loop("t", n, [_call(op, *(ttir.CB(cb) for cb in cbs), 0, 0, ttir.Dst(0))])


def _matmul(a: str, b: str, out: str, rows: int, cols: int, inner: int) -> list:
    """A rows x cols output over ``inner`` K tiles by matmul_block subblocks, packed into ``out``."""
    sh, sw = subblock(rows, cols)
    sub = [_call("tile_regs_acquire"),
           *_loop("k", inner, [_call("matmul_block", ttir.CB(a), ttir.CB(b), 0, 0, 0, 0, sw, sh, inner)]),
           _call("tile_regs_commit"), _call("tile_regs_wait"),
           *_loop("i", sh * sw, [_call("pack_tile", ttir.Dst(0), ttir.CB(out))]), _call("tile_regs_release")]
    return _loop("sb", (rows // sh) * (cols // sw), sub)


def _sdpa_pair(qt: int, kt: int, dt: int) -> list:
    """One (Q chunk, K chunk) step of the online softmax: S = Q K^T, row max, P = exp(S - max), row sum, O += P V
    after rescaling O and the sum by exp(old max - new max) (sdpa_fw compute kernel)."""
    s = qt * kt
    return [*_matmul("q", "k", "s", qt, kt, dt),
            *_tiles("reduce_tile_max_row", s, "s", "scaler"), *_tiles("sub_tiles_bcast_cols", s, "s", "max"),
            *_tiles("exp_tile", s), *_loop("i", s, [_call("pack_tile", ttir.Dst(0), ttir.CB("p"))]),
            *_tiles("reduce_tile_sum_row", s, "p", "scaler"),
            *_matmul("p", "v", "pv", qt, dt, kt),
            *_tiles("exp_tile", qt), *_tiles("mul_tiles_bcast_cols", qt * dt, "o", "corr"),
            *_tiles("add_tiles", qt * dt, "o", "pv"), *_tiles("mul_tiles", qt, "sum", "corr"),
            *_tiles("add_tiles", qt, "sum", "psum"),
            *_loop("i", qt * dt + 2 * qt, [_call("pack_tile", ttir.Dst(0), ttir.CB("o"))])]


def sdpa_program(c: SdpaConfig) -> tuple[dict, dict]:
    """The kernels of TTNN's SDPA on one core with the average share of the work (TTNN balances causal chunks
    across cores), and their plan. K and V of a GQA group are read by every query head that uses them."""
    gx, gy = c.grid
    cores = gx * gy
    qt, kt, dt = c.q_chunk // TILE, c.k_chunk // TILE, c.dim // TILE
    q_chunks = -(-(c.batch * c.heads * -(-c.seq // c.q_chunk)) // cores)
    pairs = -(-c.pairs // cores)
    kernels = {"reader": [*_loop("q", q_chunks, _fetch("q", "Q", qt, dt, None)),
                          *_loop("p", pairs, [*_fetch("k", "K", kt, dt, None), *_fetch("v", "V", kt, dt, None)])],
               "compute": [*_loop("p", pairs, _sdpa_pair(qt, kt, dt)),
                           *_loop("q", q_chunks, [*_tiles("recip_tile", qt),
                                                  *_tiles("mul_tiles_bcast_cols", qt * dt, "o", "sum"),
                                                  *_loop("i", qt * dt, [_call("pack_tile", ttir.Dst(0),
                                                                              ttir.CB("out"))])])],
               "writer": _loop("q", q_chunks, _store("out", "O", qt, dt))}
    page, bf16 = TILE_FORMATS[c.fmt].tile_bytes, TILE_FORMATS["Float16_b"].tile_bytes
    cbs = {"q": page, "k": page, "v": page, "out": page, **dict.fromkeys(
        ("s", "p", "pv", "o", "max", "sum", "psum", "corr", "scaler"), bf16)}
    plan = {"cbs": [{"name": n, "page_size": b, "format": c.fmt if b == page else "Float16_b"}
                    for n, b in cbs.items()],
            "buffers": [{"name": n, "page_size": page, "placement": "DRAM"} for n in ("Q", "K", "V", "O")],
            "mapping": [{"core": [y, x]} for y in range(gy) for x in range(gx)], "schedule": {"common_args": {}}}
    return kernels, plan


def model_sdpa(c: SdpaConfig, arch: str, perf=None) -> dict:
    """The performance model of TTNN's SDPA under config ``c`` (modeled, not measured): every core as busy as the
    average one, as TTNN's causal balancing aims for."""
    works = pm.program_work(*sdpa_program(c))
    model = pm.evaluate(works, arch, c.fidelity, "model of TTNN's SDPA (FlashAttention-2)", perf)
    model["tflops"] = c.flops / model["seconds"] / 1e12
    return model
