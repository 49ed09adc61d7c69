"""CopiedElementsTT: a 1-D tile buffer that copies a row of a tensor only to branch on its elements (TileLang's
block-sparse attention: ``T.copy(BlockSparseMask[bz, by, bx, :], block_mask)`` then ``if block_mask[k] != 0:``)
reads the tensor's elements where the condition needs them; control flow runs on the RISC-V cores, which read
elements from L1, not tile buffers. An int8 mask read only that way is stored as Int32 words (as bool masks are).
"""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError
from tilelang_tt.transform.copied_elements import copied_elements

ARCHS = ["wormhole_b0", "blackhole"]


def masked_gemm(M, N, K, bm=32, bn=32, bk=32, mask_dtype="int8", read_in_parallel=False):
    """C = sum over the K blocks the mask keeps of A_blk @ B_blk (TileLang's block-sparse GEMM, with the mask row
    copied into a fragment as seer_attention copies its block mask)."""
    nk = K // bk

    @T.prim_func
    def g(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"),
          Mask: T.Tensor((M // bm, N // bn, nk), mask_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), "bfloat16")
            b = T.alloc_shared((bk, bn), "bfloat16")
            acc = T.alloc_fragment((bm, bn), "float32")
            mask = T.alloc_fragment((nk,), mask_dtype)
            T.copy(Mask[by, bx, :], mask)
            T.clear(acc)
            for k in T.Pipelined(nk, num_stages=1):
                if mask[k] != 0:
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, acc)
            if read_in_parallel:
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] = acc[i, j] + mask[0]
            T.copy(acc, C[by * bm, bx * bn])

    return g


@pytest.mark.parametrize("arch", ARCHS)
def test_block_mask_copied_into_a_fragment(arch):
    """Integer-valued operands: every product and sum is exact, so C equals the masked reference bit for bit; the
    mask tensor is stored as Int32 words and no tile buffer holds it."""
    M, N, K = 64, 64, 128
    kernel = tilelang.compile(masked_gemm(M, N, K), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-4, 5, (M, K), generator=g).bfloat16()
    b = torch.randint(-4, 5, (K, N), generator=g).bfloat16()
    mask = torch.randint(0, 2, (2, 2, 4), generator=g).to(torch.int8)
    mask[0, 0] = torch.tensor([0, 0, 0, 0], dtype=torch.int8)       # a block with nothing to add
    c = torch.empty(M, N)
    kernel(a, b, mask, c)
    ref = torch.zeros(M, N)
    for by in range(2):
        for bx in range(2):
            for k in range(4):
                if mask[by, bx, k]:
                    ref[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32] += (
                        a[by * 32:(by + 1) * 32, k * 32:(k + 1) * 32].float() @ b[k * 32:(k + 1) * 32, bx * 32:(bx + 1) * 32].float())
    assert torch.equal(c, ref)
    fmt = {buf["name"]: buf["format"] for buf in kernel.plan["buffers"]}
    assert fmt["Mask"] == "Int32"
    assert not any(cb["name"].startswith("mask") for cb in kernel.plan["cbs"])


def test_the_rewrite_reads_the_tensor_in_the_condition():
    func = copied_elements(masked_gemm(64, 64, 128))
    text = func.script()
    assert "mask = T.alloc" not in text and "T.copy(Mask" not in text
    assert 'if T.Cast("int32", Mask[by, bx, k]) != 0:' in text


def test_a_mask_also_read_by_compute_is_left_as_written():
    """A fragment read in a T.Parallel too is data for compute: the rewrite leaves it, and the int8 copy of a
    sub-tile block of block-float pages into a tile buffer is then refused, naming the tensor."""
    func = masked_gemm(64, 64, 128, read_in_parallel=True)
    assert copied_elements(func).same_as(func)
    with pytest.raises(TTUnsupportedError, match=r"a block smaller than a tile of Mask, stored as Bfp8_b"):
        tilelang.compile(func, target="tt")
