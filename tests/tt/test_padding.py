"""Tensors of any shape (TilePadTT): zero-filled edge tiles on read, only valid elements stored on write.

Every case runs with poisoned padding (NaN in the padded part of the input tiles): results can only be
right if the readers zero-fill edge tiles themselves. All artifacts also pass the real-header check
(session hook in tests/conftest.py).
"""

import itertools
import json

import numpy as np
import pytest
import tilelang
import torch

from examples import kernels as K
from examples.random_cases import gemm
from tilelang_tt import emulator

SIZES = [200, 168, 100, 33, 1]
# every size in every position, plus the all-equal corners
GEMM_SHAPES = sorted({(m, n, k) for m, n, k in itertools.product(SIZES, repeat=3)
                      if len({m, n, k}) == 3 and SIZES.index(m) % 2 == SIZES.index(k) % 2} |
                     {(s, s, s) for s in SIZES})[:14]


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    monkeypatch.setenv("TILELANG_TT_POISON_PADDING", "1")


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in GEMM_SHAPES])
def test_gemm_any_shape(shape):
    M, N, K_ = shape
    torch.manual_seed(sum(shape))
    kernel = tilelang.compile(gemm(M, N, K_, 64, 64, 32, "bfloat16", None), target="tt")
    buffers = {b["name"]: b for b in kernel.plan["buffers"]}
    assert buffers["A"]["shape"] == [M, K_] and buffers["A"]["padded_shape"] == [-(-M // 32) * 32, -(-K_ // 32) * 32]
    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = a.float() @ b.float()
    # fp32 accumulation over an exact zero K tail; only the bf16 output rounding remains
    assert torch.isfinite(c.float()).all()
    assert (c.float() - ref).abs().max() <= 2 * 2**-8 * ref.abs().max() + 1e-6


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_elementwise_100x75(dtype):
    tdt = getattr(torch, dtype)
    kernel = tilelang.compile(K.elementwise_add(100, 75, dtype), target="tt -arch=blackhole")
    a, b = torch.randn(100, 75, dtype=tdt), torch.randn(100, 75, dtype=tdt)
    c = torch.full((100, 75), 7.0, dtype=tdt)
    kernel(a, b, c)
    assert torch.equal(c, a + b)


def test_writers_store_only_valid_elements():
    """exp(a) * b + 1 is 1 (not 0) on zero padding: if the writer stored whole edge tiles, the padded part
    of the output tile grid would hold ones. It must stay as the device buffer started (zeros)."""
    kernel = tilelang.compile(K.fused_chain(100, 75, block_M=32, block_N=32), target="tt")
    a, b = torch.randn(100, 75, dtype=torch.bfloat16), torch.randn(100, 75, dtype=torch.bfloat16)
    c = torch.empty(100, 75, dtype=torch.bfloat16)
    result = emulator.run(kernel.artifact_dir, kernel.plan, {0: a, 1: b, 2: c}, backend="sim")
    grid = result.padded_outputs["C"]
    assert grid.shape == (128, 96)
    assert not grid[100:, :].any() and not grid[:, 75:].any()
    ref = torch.exp(a.float()) * b.float() + 1
    assert (c.float() - ref).abs().max() <= 4 * 2**-8 * ref.abs().max()


def test_plan_records_logical_and_padded_shapes():
    kernel = tilelang.compile(K.elementwise_add(100, 75, "float32"), target="tt")
    plan = json.loads((kernel.artifact_dir / "tt.plan.json").read_text())
    for buf in plan["buffers"]:
        assert buf["shape"] == [100, 75] and buf["padded_shape"] == [128, 96]
        assert buf["num_pages"] == 4 * 3 and buf["bytes"] == 12 * 4096
    reader = (kernel.artifact_dir / "kernels" / "reader.cpp").read_text()
    assert "constexpr TileGrid A_grid{4, 3, 4, 11};" in reader     # 100 = 3*32 + 4 rows, 75 = 2*32 + 11 cols
    assert "read_tiles(cb_A_tile, A, A_grid," in reader   # edge tiles: read_tile_part in dataflow_helpers.h


def test_blocks_beyond_the_tensor_are_skipped():
    """64x64 blocks over a 33x1 output: most of each block lies outside the tensor."""
    kernel = tilelang.compile(gemm(33, 1, 200, 64, 64, 64, "float16", None), target="tt")
    a, b = torch.randn(33, 200, dtype=torch.float16), torch.randn(200, 1, dtype=torch.float16)
    c = torch.empty(33, 1, dtype=torch.float16)
    kernel(a, b, c)
    ref = a.float() @ b.float()
    # fp16 at HiFi4: SrcA's lowest mantissa bit is consumed by no fidelity phase unless in1 is split (2^-10 of
    # |a||b| per product), and the fp16 result leaves the fp32 DST through Float32 pages the host rounds (2^-11)
    bound = 2**-11 * ref.abs() + 2**-10 * (a.float().abs() @ b.float().abs()) + 1e-6
    assert ((c.float() - ref).abs() <= bound).all()
    assert kernel.plan["precision"]["float16_results"] == ["C"]
    assert kernel.report["total"]["dram_write_bytes"] == 33 * 1 * 4   # exactly the valid elements, Float32 pages
    np.testing.assert_array_equal(np.isfinite(c.float().numpy()), True)
