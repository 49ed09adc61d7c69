"""Index arithmetic that goes below zero: the kernels' variables are uint32_t, so where an operation reads the sign
(floor division and modulo, min / max, comparisons) of a value that may be negative, the C++ is int32_t with TIR's
floor semantics. TileLang's sliding-window attention starts its K loop at max(0, (bx * bm - window) // bn), which
is negative for the first query blocks; read as uint32_t it wrapped to a huge start, the loop ran zero times and
every row came out wrong (tt-sim ran it without complaint: the kernels were valid C++)."""

import math
import os
import subprocess

import pytest
import tilelang
import tilelang.language as T
import torch
from tvm import tirx

from tilelang_tt.cexpr import cexpr

BX = tirx.Var("bx", "int32")
C = lambda v: tirx.IntImm("int32", v)     # noqa: E731
CASES = [   # (TIR expression, its value in Python for bx)
    (tirx.FloorDiv(BX * 64 - 256, C(64)), lambda bx: (bx * 64 - 256) // 64),
    (tirx.Max(C(0), tirx.FloorDiv(BX * 64 - 200, C(64))), lambda bx: max(0, (bx * 64 - 200) // 64)),
    (tirx.FloorMod(BX * 3 - 7, C(4)), lambda bx: (bx * 3 - 7) % 4),
    (tirx.Min(BX - 5, C(2)) + 10, lambda bx: min(bx - 5, 2) + 10),
    (tirx.Select(BX - 5 < 2, C(1), C(0)), lambda bx: int(bx - 5 < 2)),
    (tirx.Div(BX - 5, C(2)), lambda bx: math.trunc((bx - 5) / 2)),   # TIR's Div truncates toward zero
    (tirx.FloorDiv(BX + 31, C(32)), lambda bx: (bx + 31) // 32),     # never negative: stays uint32_t
]


def test_printed_expressions_have_tir_semantics(tmp_path):
    """Compiled with the host compiler tt-sim builds kernels with (TT_SIM_CXX, default c++), run for bx = 0..8."""
    lines = [f'    std::printf("%d\\n", static_cast<int32_t>({cexpr(e, {BX: "bx"})}));' for e, _ in CASES]
    src = tmp_path / "e.cpp"
    src.write_text("#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\nint main(int argc, char** argv) {\n"
                   "    const uint32_t bx = static_cast<uint32_t>(std::atoi(argv[1]));\n" + "\n".join(lines) + "\n}\n")
    subprocess.run([os.environ.get("TT_SIM_CXX", "c++"), "-std=c++17", "-Wall", "-Werror", str(src), "-o", str(tmp_path / "e")], check=True)
    for bx in range(0, 9):
        out = subprocess.run([str(tmp_path / "e"), str(bx)], capture_output=True, text=True, check=True).stdout.split()
        assert [int(v) for v in out] == [f(bx) for _, f in CASES], bx
    assert cexpr(CASES[-1][0], {BX: "bx"}) == "(bx + 31u) / 32u"


def sliding_window_attention(S, D, W, bm, bn):
    """TileLang's attention-sink example, sliding-window form: the K loop runs from max(0, (bx * bm - W) // bn)."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((S, D), "bfloat16"), K: T.Tensor((S, D), "bfloat16"), V: T.Tensor((S, D), "bfloat16"),
             O: T.Tensor((S, D), "float32")):
        with T.Kernel(S // bm, threads=128) as bx:
            q = T.alloc_shared((bm, D), "bfloat16")
            k = T.alloc_shared((bn, D), "bfloat16")
            v = T.alloc_shared((bn, D), "bfloat16")
            s = T.alloc_fragment((bm, bn), "float32")
            p = T.alloc_fragment((bm, bn), "bfloat16")
            o = T.alloc_fragment((bm, D), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_prev = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            row = T.alloc_fragment((bm,), "float32")
            T.copy(Q[bx * bm, 0], q)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            start = T.max(0, (bx * bm - W) // bn)
            end = T.ceildiv((bx + 1) * bm, bn)
            for kb in T.Pipelined(start, end, num_stages=1):
                T.copy(K[kb * bn, 0], k)
                for i, j in T.Parallel(bm, bn):
                    qi, kj = bx * bm + i, kb * bn + j
                    s[i, j] = T.if_then_else(qi >= kj and qi < kj + W, 0, -T.infinity("float32"))
                T.gemm(q, k, s, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    m[i] = T.max(m[i], m_prev[i])
                    m[i] = T.if_then_else(m[i] == -T.infinity("float32"), 0, m[i])   # a block the window masks whole
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, row, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp2(m_prev[i] * scale - m[i] * scale) + row[i]
                for i, j in T.Parallel(bm, D):
                    o[i, j] *= T.exp2(m_prev[i] * scale - m[i] * scale)
                T.copy(s, p)
                T.copy(V[kb * bn, 0], v)
                T.gemm(p, v, o)
            for i, j in T.Parallel(bm, D):
                o[i, j] /= l[i]
            T.copy(o, O[bx * bm, 0])

    return main


@pytest.mark.parametrize("W", [64, 96, 256])
def test_sliding_window_attention_whose_first_k_block_is_computed_below_zero(W):
    S, D, bm, bn = 256, 64, 64, 64
    kernel = tilelang.compile(sliding_window_attention(S, D, W, bm, bn), target="tt")
    g = torch.Generator().manual_seed(W)
    q, k, v = (torch.randn(S, D, generator=g).bfloat16() for _ in range(3))
    o = torch.empty(S, D)
    kernel(q, k, v, o)
    qi, kj = torch.arange(S)[:, None], torch.arange(S)[None, :]
    allowed = (qi >= kj) & (qi < kj + W)
    # what the kernel computes: it reads K blocks from max(0, (bx * bm - W) // bn), so a query's window is cut at
    # that block (W = 96: the first 32 keys of a 96-key window fall in a block the loop skips)
    first = torch.clamp((torch.arange(S) // bm * bm - W) // bn, min=0) * bn
    allowed &= kj >= first[:, None]
    logits = (q.float() @ k.float().T) / math.sqrt(D)
    ref = torch.softmax(logits.masked_fill(~allowed, float("-inf")), -1) @ v.float()
    assert (o - ref).abs().max().item() < 0.03    # bf16 P and HiFi2 operands (attention_error_bound's terms)
