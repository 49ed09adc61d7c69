"""SDPAFusionTT: FlashAttention recognised, its work split balanced, its mask evaluated only on diagonal chunks.

Tolerance of every run against torch's SDPA: ``tests/tt/helpers.attention_error_bound`` (derived there from the
hardware's error model: bf16 probabilities, TF32 scores, bf16 output).
"""

import pytest
import tilelang
import tvm
from tvm import tirx

from examples import kernels as K
from tests.tt.helpers import lower, run_attention
from tilelang_tt.device import get_device
from tilelang_tt.schedule import contiguous_split
from tilelang_tt.target import make_options
from tilelang_tt.transform.sdpa_fusion import core_loads, sdpa_fusion, zigzag



CASES = [  # (batch, heads, kv_heads, seq_q, seq_kv, dim, causal, layout, arch, max_cores)
    (1, 4, 4, 512, 512, 64, True, "bhsd", "wormhole_b0", 8),
    (2, 2, 2, 256, 256, 128, True, "bshd", "blackhole", 3),
    (1, 8, 2, 128, 128, 64, True, "bshd", "wormhole_b0", 8),     # GQA: 8 query heads, 2 K/V heads
    (1, 2, 2, 128, 384, 64, True, "bhsd", "blackhole", 4),       # K/V longer than Q (past keys)
    (2, 2, 1, 256, 256, 64, False, "bshd", "blackhole", 8),
    (1, 2, 2, 4, 512, 64, True, "bhsd", "wormhole_b0", 2),       # decode: 4 query rows against 512 keys
    (1, 2, 1, 1, 256, 128, False, "bshd", "blackhole", 2),       # decode: one query row, GQA
    (1, 2, 2, 2048, 2048, 64, True, "bhsd", "blackhole", 8),     # long sequence
]


@pytest.mark.parametrize("batch,heads,kv_heads,seq_q,seq_kv,dim,causal,layout,arch,max_cores", CASES)
def test_attention_against_sdpa(batch, heads, kv_heads, seq_q, seq_kv, dim, causal, layout, arch, max_cores):
    kernel = run_attention(batch, heads, kv_heads, seq_q, seq_kv, dim, causal, layout, arch, max_cores)
    sdpa = kernel.plan["sdpa"]
    assert sdpa["mask"] == ("diagonal" if causal else "none")
    assert (sdpa["q_chunk_tiles"], sdpa["k_chunk_tiles"], sdpa["head_dim_tiles"]) == (2, 2, dim // 32)
    n_q, n_kv = -(-seq_q // 64), seq_kv // 64      # a decode step's few rows are one (padded) Q block
    past = -(-(seq_kv - seq_q) // 64)
    work = [min(n_kv, q + 1 + past) for q in range(n_q)] if causal else [n_kv] * n_q
    assert sdpa["work"] == work and sdpa["causal"] == (len(set(work)) > 1)
    # matmul tiles: QK^T and P.V, (2 x 2 tiles) x dim/32 each, for every visited (Q chunk, K/V chunk)
    per_pair = 2 * 2 * (dim // 32) * 2
    assert kernel.report["total"]["matmul_tiles"] == batch * heads * sum(work) * per_pair
    # DRAM: Q and O once (whole blocks: a decode step's Q matrix is padded to one block), K and V once per
    # visited (Q chunk, K/V chunk) and block of query heads (GQA: the heads of a group a block computes together)
    total = kernel.report["total"]
    chunk_bytes = 64 * dim * 2
    head_blocks = heads // sdpa.get("heads_per_block", 1)
    assert total["dram_read_bytes"] == batch * (heads * n_q + head_blocks * 2 * sum(work)) * chunk_bytes
    assert total["dram_write_bytes"] == batch * heads * n_q * chunk_bytes


def test_causal_split_is_balanced():
    """Causal, 4 heads x 8 Q chunks on 8 cores: the row-major split gives the core holding chunks 4-7 of a head
    26 K/V chunks and the one holding 0-3 only 10; zigzag pairs (q, 7 - q) give every core 18."""
    row_major = core_loads(list(range(1, 9)), 4, 8, lambda p, n: p, 1)
    assert (min(row_major), max(row_major)) == (10, 26)
    plan = tilelang.compile(K.flash_attention(1, 4, 512, 512, 64, is_causal=True),
                            target={"kind": "tt", "max_cores": 8}).plan
    assert plan["sdpa"]["zigzag"] and plan["sdpa"]["core_loads"] == [18, 18]
    # recomputed from the plan's mapping: the blocks each core visits, through the zigzag remap
    loads = [sum(zigzag(b % 8, 8) + 1 for b in range(m["start_id"], m["start_id"] + m["count"]))
             for m in plan["mapping"]]
    assert loads == [18] * 8


def test_split_keeps_zigzag_pairs_together():
    """Odd per-core counts would separate a pair: with granule 2 every core starts on an even block."""
    for total, cores in ((24, 8), (40, 6), (16, 5)):
        split = contiguous_split(total, cores, 2)
        assert all(start % 2 == 0 for start, _ in split)
        assert sum(c for _, c in split) == total and max(c for _, c in split) - min(c for _, c in split) <= 2
    assert contiguous_split(7, 3, 1) == [(0, 3), (3, 2), (5, 2)]


def test_non_causal_keeps_the_plain_split():
    plan = tilelang.compile(K.flash_attention(1, 2, 256, 256, 64), target={"kind": "tt", "max_cores": 3}).plan
    assert not plan["sdpa"]["causal"] and not plan["sdpa"]["zigzag"] and plan["sdpa"]["granule"] == 1
    assert [(m["start_id"], m["count"]) for m in plan["mapping"]] == [(0, 3), (3, 3), (6, 2)]


def _kv_loops(func):
    loops = []

    def visit(node):
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.SERIAL and node.thread_binding is None:
            loops.append(node)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return loops


def _has_select(stmt) -> bool:
    hits = []
    tirx.stmt_functor.post_order_visit(stmt, lambda n: hits.append(n) if isinstance(n, tirx.Call)
                                       and n.op.name == "tirx.if_then_else" else None)
    return bool(hits)


def _binds(stmt) -> dict:
    out = {}
    tirx.stmt_functor.post_order_visit(stmt, lambda n: out.__setitem__(n.var, n.value)
                                       if isinstance(n, tirx.Bind) else None)
    return out


def _value(expr, binds: dict, grid: dict) -> int:
    """``expr`` with the function's Binds and the grid variables substituted, as an integer."""
    for _ in range(len(binds) + 1):
        expr = tirx.stmt_functor.substitute(expr, {**binds, **grid})
    return int(tvm.arith.Analyzer().simplify(expr))


def test_mask_only_on_diagonal_chunks():
    """The K/V loop is split where the diagonal starts: the chunks before it fill the scores with 0, only the
    diagonal chunks keep the mask's select. 64-row Q and K/V chunks: Q chunk q sees K/V chunks 0..q (the trip
    count), chunk k is wholly visible to it when its last key, 64 k + 63, is at most the first query, 64 q, i.e. for
    k < q; so for every Q chunk the unmasked loop runs chunks [0, q) and the masked loop exactly chunk q."""
    func = sdpa_fusion(K.flash_attention(1, 2, 256, 256, 64, is_causal=True), make_options())
    full, diagonal = _kv_loops(func)
    assert not _has_select(full.body) and _has_select(diagonal.body)
    binds, grid = _binds(func.body), {}
    tirx.stmt_functor.post_order_visit(func.body, lambda n: grid.__setitem__(str(n.thread_binding.thread_tag), n)
                                       if isinstance(n, tirx.For) and n.thread_binding is not None else None)
    assert {t: int(f.extent) for t, f in grid.items()} == {"blockIdx.x": 4, "blockIdx.y": 2, "blockIdx.z": 1}
    for q in range(4):
        for head in range(2):
            at = {grid["blockIdx.x"].loop_var: tirx.IntImm("int32", q),
                  grid["blockIdx.y"].loop_var: tirx.IntImm("int32", head),
                  grid["blockIdx.z"].loop_var: tirx.IntImm("int32", 0)}
            spans = [(_value(loop.min, binds, at), _value(loop.min + loop.extent, binds, at))
                     for loop in (full, diagonal)]
            assert spans == [(0, q), (q, q + 1)], (q, head, spans)


def test_structure_not_found_leaves_the_kernel_alone():
    func = K.softmax(64, 64)
    assert sdpa_fusion(func, make_options()).same_as(func)
    lowered, _ = lower(K.tilelang_example_gemm(128, 128, 128))
    assert "tt.sdpa" not in lowered.attrs


@pytest.mark.parametrize("causal,qk_chunk_tiles", [(True, 2), (True, 1), (False, 2)])
def test_kv_streamed_in_qk_chunks(causal, qk_chunk_tiles):
    """block_N = 128 re-blocked to K/V chunks of qk_chunk_tiles tiles: the same results, the K/V CBs shrink, and
    a causal run skips the chunks above the diagonal that the 128-row blocks would have computed and masked."""
    kernel = run_attention(1, 2, 2, 256, 256, 64, causal, "bhsd", "wormhole_b0", 4, block_N=128,
                           qk_chunk_tiles=qk_chunk_tiles)
    rows = 32 * qk_chunk_tiles
    sdpa = kernel.plan["sdpa"]
    assert sdpa["k_chunk_tiles"] == qk_chunk_tiles
    cbs = {c["name"]: c for c in kernel.plan["cbs"]}
    assert cbs["K_shared"]["block_tiles"] == rows // 32 * 2 and cbs["acc_s"]["block_tiles"] == 2 * rows // 32
    n_kv = 256 // rows
    work = [min(n_kv, (q + 1) * 64 // rows) for q in range(4)] if causal else [n_kv] * 4
    assert sdpa["work"] == work
    per_pair = 2 * (rows // 32) * 2 * 2        # QK^T: 2 x rows/32 tiles x 2 (dim); P.V: 2 x 2 x rows/32
    assert kernel.report["total"]["matmul_tiles"] == 2 * sum(work) * per_pair
    assert kernel.report["total"]["dram_read_bytes"] == 2 * (4 * 64 + 2 * sum(work) * rows) * 64 * 2


def test_hifi4_attention_meets_the_tight_bound():
    """At HiFi4 no operand bits are dropped: only bf16 probabilities, TF32 scores and the output rounding remain."""
    kernel = run_attention(1, 2, 2, 256, 256, 64, True, "bhsd", "blackhole", 4, math_fidelity="HiFi4")
    assert kernel.plan["math_fidelity"] == "HiFi4"


def test_qk_chunk_must_divide_block_n():
    from tilelang_tt.errors import TTAnnotationError

    with pytest.raises(TTAnnotationError, match=r"qk_chunk_tiles=3 asks for K/V chunks of 96 rows, which do not "
                                                r"divide the kernel's K/V block of 128 rows"):
        lower(K.flash_attention(1, 2, 256, 256, 64, block_N=128, qk_chunk_tiles=3))


def test_reblocking_needs_a_running_maximum():
    """A masked kernel that restarts its row maximum each block would get -inf maxima on a chunk whose rows are all
    masked: re-blocking it is refused with the fix."""
    from tilelang_tt.errors import TTAnnotationError

    func = K.flash_attention(1, 2, 256, 256, 64, is_causal=True, block_N=128, qk_chunk_tiles=2)

    def drop_running_max(stmt):      # the kernel as TileLang's older examples wrote it
        if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL and isinstance(stmt.body, tirx.BufferStore) \
                and isinstance(stmt.body.value, tirx.Max):
            return tirx.Evaluate(0)
        return None

    func = func.with_body(tirx.stmt_functor.ir_transform(func.body, None, drop_running_max, ["tirx.For"]))
    with pytest.raises(TTAnnotationError, match=r"keep a running maximum"):
        lower(func)


def test_kv_chunk_chosen_from_l1():
    """block_N = 1024 with head dim 128 needs 2.1 MB of circular buffers: SDPAFusionTT halves the K/V chunk until
    they fit (512 rows), where the kernel as written is refused for L1."""
    kernel = run_attention(1, 2, 2, 1024, 1024, 128, True, "bhsd", "wormhole_b0", 8, block_M=128, block_N=1024)
    sdpa = kernel.plan["sdpa"]
    assert (sdpa["k_chunk_tiles"], sdpa["k_chunk_from"]) == (16, "L1")
    assert sum(c["bytes"] for c in kernel.plan["cbs"]) <= get_device("wormhole_b0").l1_usable_bytes   # test_hw_table
    assert sdpa["work"] == [1, 1, 1, 1, 2, 2, 2, 2]
    plain = tilelang.compile(K.flash_attention(1, 2, 256, 256, 64), target="tt").plan["sdpa"]
    annotated = tilelang.compile(K.flash_attention(1, 2, 256, 256, 64, block_N=128, qk_chunk_tiles=2),
                                 target="tt").plan["sdpa"]
    assert (plain["k_chunk_from"], annotated["k_chunk_from"]) == ("block_N", "annotation")
