"""Calling a compiled kernel: every argument is checked against its parameter (runtime.check_argument), never
converted silently. A mismatch is a TTCallError (a ValueError, as TileLang's adapters raise) that names the
parameter, what was given, what it takes and a fix; valid calls, including non-contiguous tensors and the
documented stand-ins (NumPy float32 for bfloat16, other integer dtypes for integer inputs), match torch."""

import math

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import torch

from examples import kernels as K
from tilelang_tt import TTCallError, TTError


@pytest.fixture(scope="module")
def add32():
    return tilelang.compile(K.elementwise_add(64, 64, "float32"), target="tt")


@pytest.fixture(scope="module")
def scaled():
    """C = A * alpha + n, with a float32 and an int32 scalar parameter."""
    @T.prim_func
    def scaled(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32"), alpha: T.float32, n: T.int32):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * alpha + T.Cast("float32", n)

    return tilelang.compile(scaled, target="tt")


def ab():
    torch.manual_seed(0)
    return torch.randn(64, 64), torch.randn(64, 64)


def refused(kernel, args, *words):
    """The call raises TTCallError (and nothing else) whose message holds every word, and a fix."""
    with pytest.raises(TTCallError) as err:
        kernel(*args)
    text = str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, TTError)
    for word in (*words, "fix:"):
        assert word in text, f"{word!r} not in {text!r}"
    return text


def test_int32_output_for_a_float_kernel_is_refused(add32):
    a, b = ab()
    c = torch.full((64, 64), -1, dtype=torch.int32)
    refused(add32, (a, b, c), "parameter C", "float32", "int32", "torch.empty_like")
    assert bool((c == -1).all())          # nothing was written


@pytest.mark.parametrize("given", [torch.float64, torch.bfloat16, torch.int32])
def test_input_dtype_mismatch_is_refused(add32, given):
    a, b = ab()
    refused(add32, (a.to(given), b, torch.empty(64, 64)), "parameter A", "float32", str(given).removeprefix("torch."))


@pytest.mark.parametrize("which", [0, 2], ids=["input", "output"])
def test_meta_tensor_is_refused(add32, which):
    args = [*ab(), torch.empty(64, 64)]
    args[which] = torch.empty(64, 64, device="meta")
    refused(add32, args, f"parameter {'AC'[which // 2]}", "device meta", "no data", "x.cpu()")


def test_complex_input_is_refused(add32):
    a, b = ab()
    refused(add32, (torch.complex(a, b), b, torch.empty(64, 64)), "parameter A", "complex64", "imaginary part")


@pytest.mark.parametrize("n, words", [(2**40 + 7, ["1099511627783", "outside [-2147483648, 2147483647]"]),
                                      (-2**31 - 1, ["outside [-2147483648, 2147483647]"]),
                                      (2.9, ["2.9", "not an integer"]), (True, ["True (bool)"]),
                                      ("3", ["'3' (str)"])])
def test_int32_scalar_out_of_range_or_not_an_int_is_refused(scaled, n, words):
    a, _ = ab()
    refused(scaled, (a, torch.empty(64, 64), 1.0, n), "parameter n", "int32 scalar", *words)


@pytest.mark.parametrize("alpha, words", [("abc", ["'abc' (str)"]), (None, ["None (NoneType)"]),
                                          (1e300, ["1e+300", "outside float32's range"]),
                                          (10**400, ["outside float32's range"]),
                                          (torch.tensor(1.5), ["(Tensor)", "x.item()"])])
def test_bad_float_scalar_is_refused_naming_the_parameter(scaled, alpha, words):
    a, _ = ab()
    refused(scaled, (a, torch.empty(64, 64), alpha, 1), "parameter alpha", "float32 scalar", *words)


@pytest.mark.parametrize("shape", [(64, 32), (64,), (1, 64, 64)])
def test_shape_mismatch_is_refused(add32, shape):
    a, b = ab()
    refused(add32, (a, b, torch.empty(shape)), "parameter C", "shape [64, 64]", f"got shape {list(shape)}")


@pytest.mark.parametrize("count", [1, 4])
def test_wrong_number_of_arguments_is_refused(add32, count):
    a, b = ab()
    refused(add32, [a, b, torch.empty(64, 64), a][:count], "takes 3 arguments (A, B, C)", f"got {count}")


def test_wrong_number_of_arguments_with_out_idx_names_the_inputs():
    kernel = tilelang.compile(K.elementwise_add(64, 64, "float32"), out_idx=[2], target="tt")
    refused(kernel, ab()[:1], "takes 3 arguments (A, B, C), or the 2 without the outputs of out_idx=[2] (A, B)",
            "got 1")


def test_non_tensor_argument_is_refused(add32):
    a, b = ab()
    refused(add32, (a.tolist(), b, torch.empty(64, 64)), "parameter A", "(list)", "torch tensor or NumPy array")


def test_output_that_cannot_hold_the_results_is_refused(add32):
    a, b = ab()
    refused(add32, (a, b, torch.zeros(1, 64).expand(64, 64)), "parameter C", "overlap in memory", "strides [0, 1]")
    readonly = np.zeros((64, 64), np.float32)
    readonly.flags.writeable = False
    refused(add32, (a.numpy(), b.numpy(), readonly), "parameter C", "read-only")


def test_non_contiguous_tensors_are_read_and_written_in_place(add32):
    a, b = ab()
    a_t = a.T.contiguous().T                       # column-major storage
    b_s = torch.randn(64, 128)[:, ::2]             # every other column
    b_s.copy_(b)
    base = torch.full((64, 128), 7.0)
    c = base[:, 1::2]                              # a strided view of the caller's tensor
    assert not (a_t.is_contiguous() or b_s.is_contiguous() or c.is_contiguous())
    add32(a_t, b_s, c)
    assert torch.equal(base[:, 1::2], a + b) and bool((base[:, ::2] == 7).all())
    out = np.full((64, 128), 7.0, np.float32)
    add32(a.numpy().T.copy().T, b.numpy(), out[:, 1::2])     # NumPy: a Fortran-order input, a strided output
    assert np.array_equal(out[:, 1::2], (a + b).numpy()) and bool((out[:, ::2] == 7).all())


def test_valid_calls_match_torch(add32, scaled):
    a, b = ab()
    c = torch.empty(64, 64)
    add32(a, b, c)
    assert torch.equal(c, a + b)
    for alpha, n in [(1.5, 3), (-0.25, -2**31), (math.inf, 0), (np.float32(2.0), np.int64(2**31 - 1))]:
        scaled(a, c, alpha, n)
        torch.testing.assert_close(c, a * float(alpha) + float(n), rtol=0, atol=0)


def test_bfloat16_kernel_takes_bfloat16_tensors_and_numpy_float32():
    kernel = tilelang.compile(K.elementwise_add(64, 64, "bfloat16"), target="tt")
    a, b = (x.to(torch.bfloat16) for x in ab())
    ref = (a.float() + b.float()).to(torch.bfloat16)
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    kernel(a, b, c)
    torch.testing.assert_close(c, ref, rtol=2**-7, atol=0)
    out = np.empty((64, 64), np.float32)           # NumPy has no bfloat16: float32 stands in, exact on the way out
    kernel(a.float().numpy(), b.float().numpy(), out)
    assert np.array_equal(out, c.float().numpy())
    refused(kernel, (a.float(), b, c), "parameter A", "bfloat16", "got a tensor of dtype float32")
