"""Compiled kernels as torch custom ops (torch_ops.py): inside torch.compile graphs on tt-sim, with fake
implementations from the plan's shapes."""

import pytest
import tilelang
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import tilelang_tt
from examples import kernels as K
from tilelang_tt.torch_ops import TTTorchOpError

M, N, KD = 64, 96, 128


@pytest.fixture(scope="module")
def ops():
    """A GEMM returning its output (out_idx) and an elementwise add writing into the tensor it is given."""
    gemm = tilelang.compile(K.design_gemm(M, N, KD), out_idx=[-1], target="tt")
    add = tilelang.compile(K.elementwise_add(M, N, "bfloat16"), target="tt")
    return gemm, add, gemm.as_torch_op("tt_test::gemm"), tilelang_tt.torch_op(add, "tt_test::add")


def _inputs():
    torch.manual_seed(0)
    return (torch.randn(M, KD, dtype=torch.bfloat16), torch.randn(KD, N, dtype=torch.bfloat16),
            torch.randn(M, N, dtype=torch.bfloat16))


def _layer(x, w, bias):
    """A small model function: relu(x @ w + bias), the matmul and the add on tt-sim."""
    y = torch.ops.tt_test.gemm(x, w)
    out = torch.empty_like(y)
    torch.ops.tt_test.add(y, bias, out)
    return torch.relu(out) * 0.5


def test_schemas_say_what_each_kernel_returns_and_writes(ops):
    assert str(torch.ops.tt_test.gemm.default._schema) == "tt_test::gemm(Tensor A, Tensor B) -> Tensor"
    assert str(torch.ops.tt_test.add.default._schema) == "tt_test::add(Tensor A, Tensor B, Tensor(a!) C) -> ()"


def test_compiled_function_calling_two_kernels_equals_the_kernels_called_directly(ops):
    gemm, add, _, _ = ops
    x, w, bias = _inputs()
    backend = CompileCounterWithBackend("aot_eager")
    got = torch.compile(_layer, backend=backend, fullgraph=True)(x, w, bias)
    # one graph, both kernels in it as opaque ops (fullgraph: no break around them)
    assert backend.frame_count == 1
    targets = {str(n.target) for n in backend.graphs[0].graph.nodes if n.op == "call_function"}
    assert {"tt_test.gemm", "tt_test.add"} <= targets, targets
    y = gemm(x, w)
    direct = torch.empty_like(y)
    add(y, bias, direct)
    assert torch.equal(got, torch.relu(direct) * 0.5)
    ref = torch.relu(x.float() @ w.float() + bias.float()) * 0.5
    assert float((got.float() - ref).abs().max() / ref.abs().max()) <= 4 * 2**-8


def test_the_op_writes_the_tensor_it_is_given(ops):
    _, _, _, add_op = ops
    a, b = torch.randn(M, N, dtype=torch.bfloat16), torch.randn(M, N, dtype=torch.bfloat16)
    c = torch.full((M, N), 7.0, dtype=torch.bfloat16)
    assert add_op(a, b, c) is None
    assert torch.allclose(c.float(), (a.float() + b.float()), rtol=2**-7, atol=2**-7)


def test_opcheck_schema_fake_and_aot_dispatch(ops):
    _, _, gemm_op, add_op = ops
    x, w, bias = _inputs()
    for op, args in ((gemm_op, (x, w)), (add_op, (torch.randn(M, N, dtype=torch.bfloat16), bias,
                                                  torch.empty(M, N, dtype=torch.bfloat16)))):
        result = torch.library.opcheck(op, args)
        assert set(result.values()) == {"SUCCESS"}, result


@pytest.fixture(scope="module")
def dynamic_op():
    """C = 2 A + B over a symbolic number of rows M, its output C allocated by the op."""
    kernel = tilelang.compile(K.dynamic_scale_add(N=64), out_idx=[-1], target="tt")
    return kernel, kernel.as_torch_op("tt_test::scale_add")


def test_fake_implementation_keeps_a_symbolic_dimension_symbolic(dynamic_op):
    _, op = dynamic_op
    mode = FakeTensorMode(shape_env=ShapeEnv())
    rows_dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    a = mode.from_tensor(torch.empty(96, 64), symbolic_context=rows_dynamic)
    b = mode.from_tensor(torch.empty(96, 64), symbolic_context=rows_dynamic)
    with mode:
        c = op(a, b)
    assert isinstance(c.shape[0], torch.SymInt) and c.shape[0].node.expr == a.shape[0].node.expr
    assert c.shape[1] == 64 and c.dtype == torch.float32
    assert str(c.device) == "cpu"


def test_symbolic_rows_run_under_dynamic_compile(dynamic_op):
    kernel, _ = dynamic_op
    fn = torch.compile(lambda a, b: torch.ops.tt_test.scale_add(a, b) - b, backend="aot_eager", fullgraph=True,
                       dynamic=True)
    for rows in (32, 96):
        a, b = torch.randn(rows, 64), torch.randn(rows, 64)
        direct = torch.empty(rows, 64)
        kernel(a, b, direct)
        got = fn(a, b)
        assert got.shape == (rows, 64) and torch.equal(got, direct - b)
        assert torch.allclose(got, 2 * a, atol=1e-5)


def test_registering_a_name_twice_is_refused_clearly(ops):
    gemm, add, _, _ = ops
    with pytest.raises(TTTorchOpError, match=r"tt_test::gemm is already registered[\s\S]*torch\.ops\.tt_test\.gemm"):
        add.as_torch_op("tt_test::gemm")
    with pytest.raises(TTTorchOpError, match="not a custom op name"):
        gemm.as_torch_op("gemm")


def test_a_name_torch_already_has_is_refused():
    kernel = tilelang.compile(K.elementwise_add(64, 64, "float32"), out_idx=[-1], target="tt")
    with pytest.raises(TTTorchOpError, match="aten::add is already registered"):
        kernel.as_torch_op("aten::add")
