"""Outputs a kernel writes in part keep the caller's elements (TileLang writes device memory in place): the plan
uploads such a tensor first (``io`` "inout", coverage.py); an output the writer stores whole is not uploaded."""

import tilelang
import tilelang.language as T
import torch

from examples import kernels as K


def _corner(rows: int, cols: int):
    @T.prim_func
    def corner(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            for i, j in T.Parallel(rows, cols):
                C[i, j] = A[i, j] * 2.0

    return corner


def test_a_corner_written_keeps_the_rest():
    """A 32x32 corner (whole tiles) and a 16x8 corner (a window of one tile) of a 64x64 output."""
    for rows, cols in ((32, 32), (16, 8)):
        kernel = tilelang.compile(_corner(rows, cols), target="tt")
        assert [b["io"] for b in kernel.plan["buffers"]] == ["input", "inout"]
        a, c = torch.randn(64, 64), torch.full((64, 64), 1000.0)
        kernel(a, c)
        expect = torch.full((64, 64), 1000.0)
        expect[:rows, :cols] = a[:rows, :cols] * 2
        assert torch.equal(c, expect), (rows, cols)


def test_outputs_written_whole_are_not_uploaded():
    """A GEMM's C and an elementwise result over a grid that covers them (edge tiles included: 100 rows) stay
    outputs; the host program reads nothing into them."""
    gemm = tilelang.compile(K.design_gemm(96, 64, 64), target="tt")
    add = tilelang.compile(K.elementwise_add(100, 64), target="tt")
    for kernel in (gemm, add):
        assert kernel.plan["buffers"][-1]["io"] == "output"
        host = (kernel.artifact_dir / "host.cpp").read_text()
        assert "read_tensor(C" not in host and "EnqueueWriteMeshBuffer(cq, C" not in host


def test_symbolic_output_is_uploaded_and_keeps_what_is_not_written():
    """With a T.dynamic row count the writes are not known before the run: the output is uploaded (conservative),
    and the columns the kernel does not write keep their values."""
    n = T.dynamic("n")

    @T.prim_func
    def half(A: T.Tensor((n, 64), "float32"), C: T.Tensor((n, 64), "float32")):
        with T.Kernel(1, T.ceildiv(n, 32), threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, j] = A[by * 32 + i, j] + 1.0

    kernel = tilelang.compile(half, target="tt")
    assert kernel.plan["buffers"][1]["io"] == "inout"
    a, c = torch.randn(70, 64), torch.full((70, 64), -5.0)
    kernel(a, c)
    assert torch.equal(c[:, :32], a[:, :32] + 1) and (c[:, 32:] == -5).all()
