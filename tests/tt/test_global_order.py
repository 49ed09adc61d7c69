"""A launch that reads back what it wrote to a tensor is refused (the reader fetched the old data: a copy of A
through W returned W's initial values); reading a region before writing it, and regions that later iterations
never read back, run."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError


def through_global(case: str):
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), W: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            a = T.alloc_fragment((32, 64), "float32")
            b = T.alloc_fragment((32, 64), "float32")
            if case == "copy_back":         # A -> W -> b: W read back after the write
                T.copy(A[bx * 32, 0], a)
                T.copy(a, W[bx * 32, 0])
                T.copy(W[bx * 32, 0], b)
                T.copy(b, C[bx * 32, 0])
            elif case == "loop":            # each step reads the rows the step before wrote
                T.copy(A[bx * 32, 0], a)
                for k in T.serial(3):
                    T.copy(W[bx * 32, 0], b)
                    for i, j in T.Parallel(32, 64):
                        b[i, j] = b[i, j] + a[i, j]
                    T.copy(b, W[bx * 32, 0])
            elif case == "in_place":        # read, then write the same rows once: runs
                T.copy(W[bx * 32, 0], b)
                for i, j in T.Parallel(32, 64):
                    b[i, j] = b[i, j] * 2.0
                T.copy(b, W[bx * 32, 0])
            else:                           # a loop over column blocks, each read before it is written: runs
                for k in T.serial(2):
                    T.copy(W[bx * 32, k * 32], b[:, 0:32])
                    for i, j in T.Parallel(32, 32):
                        b[i, j] = b[i, j] + 1.0
                    T.copy(b[:, 0:32], W[bx * 32, k * 32])

    return k


@pytest.mark.parametrize("case", ["copy_back", "loop"])
def test_reading_back_a_write_is_refused(case):
    with pytest.raises(TTUnsupportedError, match="reads W, which .* writes earlier in this launch"):
        tilelang.compile(through_global(case), target="tt")


@pytest.mark.parametrize("case", ["in_place", "columns"])
def test_read_before_write_runs(case):
    torch.manual_seed(0)
    A, W, C = torch.randn(64, 64), torch.randn(64, 64), torch.zeros(64, 64)
    W0 = W.clone()
    tilelang.compile(through_global(case), target="tt")(A, W, C)
    torch.testing.assert_close(W, W0 * 2 if case == "in_place" else W0 + 1, rtol=0, atol=0)
