"""Grouped-query attention: SDPAFusionTT puts the query heads of a K/V group in one block, so each K/V chunk is
read from DRAM once per group (and visited pair), not once per query head. Results against torch's SDPA within
``attention_error_bound``; DRAM bytes and matmul tiles against their formulas from tt-sim's counters."""

import pytest

from tests.tt.helpers import run_attention


def _run(heads, kv_heads, seq, dim, causal, layout, arch, max_cores, block=64):
    return run_attention(1, heads, kv_heads, seq, seq, dim, causal, layout, arch, max_cores, block_M=block,
                         block_N=block)


@pytest.mark.parametrize("causal,layout,arch", [(True, "bhsd", "wormhole_b0"), (False, "bshd", "wormhole_b0"),
                                                (True, "bshd", "blackhole")])
def test_kv_read_once_per_group(causal, layout, arch):
    """8 query heads over 2 K/V heads, 4 Q chunks, 4 cores: one block computes a group's 4 heads; K and V bytes
    read are those of 2 heads, not 8."""
    heads, kv_heads, seq, dim = 8, 2, 256, 64
    kernel = _run(heads, kv_heads, seq, dim, causal, layout, arch, max_cores=4)
    sdpa = kernel.plan["sdpa"]
    assert (sdpa["kv_group"], sdpa["heads_per_block"]) == (4, 4)
    n_q = seq // 64
    work = [q + 1 for q in range(n_q)] if causal else [n_q] * n_q
    assert sdpa["work"] == work
    chunk = 64 * dim * 2
    total = kernel.report["total"]
    assert total["dram_read_bytes"] == heads * n_q * chunk + kv_heads * 2 * sum(work) * chunk
    assert total["dram_write_bytes"] == heads * n_q * chunk
    # the math is the same: QK^T and P.V of (2 x 2 tiles) x dim/32 per visited pair and query head
    assert total["matmul_tiles"] == heads * sum(work) * 2 * 2 * (dim // 32) * 2
    # the grid's head axis counts groups: 2 groups x 4 Q chunks
    assert sum(m["count"] for m in kernel.plan["mapping"]) == 8


def test_group_split_when_a_core_would_idle():
    """16 query heads over 2 K/V heads (groups of 8), 2 Q chunks, 8 cores: 8 heads per block would leave 4 blocks
    for 8 cores and double the busiest core's work; 4 heads per block keep it at 4 head-blocks (as with one head
    per block), so each group is split in two blocks and K/V are read twice per group."""
    kernel = _run(16, 2, 128, 64, False, "bshd", "wormhole_b0", max_cores=8)
    sdpa = kernel.plan["sdpa"]
    assert (sdpa["kv_group"], sdpa["heads_per_block"]) == (8, 4)
    total = kernel.report["total"]
    chunk = 64 * 64 * 2
    assert total["dram_read_bytes"] == 16 * 2 * chunk + (16 // 4) * 2 * (2 + 2) * chunk


def test_no_grouping_that_unbalances_the_cores():
    """Causal, 8 query heads over 2 K/V heads, 2 Q chunks (1 and 2 K/V chunks), 8 cores: with one head per
    block the busiest core visits 3 K/V chunks; two heads per block would make it 4 (1.33x), so every head reads
    its K/V."""
    kernel = _run(8, 2, 128, 64, True, "bshd", "wormhole_b0", max_cores=8)
    assert "heads_per_block" not in kernel.plan["sdpa"]
    assert max(kernel.plan["sdpa"]["core_loads"]) == 3


def test_no_grouping_when_blocks_are_fewer_than_cores():
    """8 head-blocks on 64 cores: grouping would only idle cores; every head reads its K/V."""
    kernel = _run(4, 1, 64, 64, False, "bhsd", "wormhole_b0", max_cores=64)
    assert "heads_per_block" not in kernel.plan["sdpa"]
    total = kernel.report["total"]
    assert total["dram_read_bytes"] == 4 * 64 * 64 * 2 * 3


def test_fewer_heads_per_block_when_the_group_does_not_fit_l1():
    """Head dim 256, 128x128 blocks, one core: a group's 4 heads carry 4 Q blocks and 4 fp32 accumulators
    (~0.8 MB) beside the shared K/V and score buffers, more than wormhole's L1 at any K/V chunk; 2 heads fit, at
    the kernel's own block_N."""
    kernel = _run(8, 2, 256, 256, False, "bhsd", "wormhole_b0", max_cores=1, block=128)
    sdpa = kernel.plan["sdpa"]
    assert (sdpa["heads_per_block"], sdpa["k_chunk_tiles"], sdpa["k_chunk_from"]) == (2, 4, "block_N")
    chunk = 128 * 256 * 2
    assert kernel.report["total"]["dram_read_bytes"] == 8 * 2 * chunk + (8 // 2) * 2 * (2 * 2) * chunk
