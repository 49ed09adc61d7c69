"""Every dtype-changing T.copy TileLang allows, against torch, on both archs.

A tensor's DRAM pages keep the tensor's format and a CB the NoC fills has the format of the pages it receives;
the change of format happens on the compute path (copy_tile unpacks the staging CB's format into DST, the packer
writes the other). The matrix is (tensor dtype, buffer dtype, scope, direction) over float32 / float16 / bfloat16,
shared and fragment buffers, reads (tensor -> buffer) and writes (buffer -> tensor), and both archs.

Inputs are values every format holds exactly (k / 16 for |k| <= 127: at most 7 significant bits), so every copy
must be bit-exact whatever the rounding of the path; a copy that reads the wrong bytes (two bf16 values read as
one fp32 word) is off by orders of magnitude. Rounding on a narrowing copy is checked separately with random
values against the packer's documented rounding (fp32 -> bf16: nearest, ties away from zero).
"""

import itertools

import pytest
import tilelang
import tilelang.language as T
import torch

from tests.tt.test_numerics import packer_bf16
from tilelang_tt.errors import TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]
DTYPES = ["float32", "float16", "bfloat16"]
TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
M, N, BM = 64, 64, 32


def through_buffer(t_in, buf_dtype, t_out, scope):
    """X (t_in) -> a (BM x N) buffer of buf_dtype in `scope` -> Y (t_out), one row block per block."""
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def k(X: T.Tensor((M, N), t_in), Y: T.Tensor((M, N), t_out)):
        with T.Kernel(M // BM, threads=128) as by:
            x = alloc((BM, N), buf_dtype)
            T.copy(X[by * BM, 0], x)
            T.copy(x, Y[by * BM, 0])
    return k


def exact_values(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-127, 128, (M, N), generator=g).float() / 16).to(TORCH[dtype])


CASES = [(t, b, s, d, a) for t, b in itertools.product(DTYPES, DTYPES) for s in ("shared", "fragment")
         for d in ("read", "write") for a in ARCHS]


@pytest.mark.parametrize("tensor_dtype,buf_dtype,scope,direction,arch", CASES,
                         ids=[f"{t}-{b}-{s}-{d}-{a}" for t, b, s, d, a in CASES])
def test_copy_matrix_exact(tensor_dtype, buf_dtype, scope, direction, arch):
    """read: X (tensor_dtype) -> buffer (buf_dtype) -> Y (buf_dtype); write: X (buf_dtype) -> buffer -> Y
    (tensor_dtype). Exactly representable values come back bit for bit."""
    t_in, t_out = (tensor_dtype, buf_dtype) if direction == "read" else (buf_dtype, tensor_dtype)
    kernel = tilelang.compile(through_buffer(t_in, buf_dtype, t_out, scope), target={"kind": "tt", "arch": arch})
    x = exact_values(t_in)
    y = torch.full((M, N), float("nan"), dtype=TORCH[t_out])
    kernel(x, y)
    assert torch.equal(y.float(), x.float()), (y.float() - x.float()).abs().max()


def test_widening_copy_program_converts_on_compute():
    """The reader moves bf16 pages into a bf16 staging CB (never a Float32 CB: a page is 2048 bytes) and compute
    converts with copy_tile into the float32 buffer's CB."""
    kernel = tilelang.compile(through_buffer("bfloat16", "float32", "bfloat16", "fragment"), target="tt")
    cbs = {c["name"]: c for c in kernel.plan["cbs"]}
    assert cbs["x_in"]["format"] == "Float16_b" and cbs["x_in"]["page_size"] == 2048
    assert cbs["x_in"]["producer"] == ["reader"] and cbs["x"]["format"] == "Float32"
    program = (kernel.artifact_dir / "tt.program.txt").read_text()
    assert "read_tiles(cb:x_in, tensor:X" in program and "copy_tile(cb:x_in, " in program


@pytest.mark.parametrize("arch", ARCHS)
def test_narrowing_read_rounds_like_the_packer(arch):
    """float32 tensor -> bfloat16 fragment: compute packs the fp32 values into the bf16 CB, rounding to nearest
    with ties away from zero (the packer), including exact ties."""
    kernel = tilelang.compile(through_buffer("float32", "bfloat16", "bfloat16", "fragment"),
                              target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(1)
    x = torch.randn(M, N, generator=g) * 100
    x[0, :8] = torch.tensor([1 + 2**-8, -(1 + 2**-8), 1 + 3 * 2**-8, 2**-126, 3.0, -0.0, 65504.0, 1e-3])
    y = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(x, y)
    expected = torch.from_numpy(packer_bf16(x.numpy()))
    assert torch.equal(y.float(), expected), (y.float() - expected).abs().max()


@pytest.mark.parametrize("arch", ARCHS)
def test_widening_rows_with_sub_tile_blocks(arch):
    """16-row blocks of a bf16 tensor loaded into a float32 fragment (a block smaller than a tile keeps its
    window in the tile through the staging CB), scaled and stored as bf16."""
    @T.prim_func
    def k(X: T.Tensor((64, 32), "bfloat16"), Y: T.Tensor((64, 32), "bfloat16")):
        with T.Kernel(4, threads=128) as by:
            x = T.alloc_fragment((16, 32), "float32")
            T.copy(X[by * 16, 0], x)
            for i, j in T.Parallel(16, 32):
                x[i, j] = x[i, j] * 2.0
            T.copy(x, Y[by * 16, 0])

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x = torch.randn(64, 32, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, x * 2)


def test_integer_float_copy_is_refused():
    """A uint8 tensor copied into a float buffer has no byte-preserving meaning: refused, with the cast to use."""
    @T.prim_func
    def k(X: T.Tensor((32, 32), "uint8"), Y: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((32, 32), "float32")
            T.copy(X[0, 0], x)
            T.copy(x, Y[0, 0])

    with pytest.raises(TTUnsupportedError) as e:
        tilelang.compile(k, target="tt")
    msg = str(e.value)
    assert "uint8 tensor X" in msg and "float32 tile buffer x" in msg and "T.cast" in msg


@pytest.mark.parametrize("buf_dtype,t_out", [("float32", "bfloat16"), ("bfloat16", "float32"),
                                             ("float16", "float32"), ("float32", "float16")])
@pytest.mark.parametrize("scope", ["shared", "fragment"])
def test_computed_buffer_written_to_another_dtype(buf_dtype, t_out, scope):
    """A buffer compute fills (T.Parallel) and the writer drains into a tensor of another dtype: the packer
    converts into a staging CB of the tensor's format; the writer never moves pages of the buffer's format."""
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def k(X: T.Tensor((M, N), buf_dtype), Y: T.Tensor((M, N), t_out)):
        with T.Kernel(M // BM, threads=128) as by:
            x = alloc((BM, N), buf_dtype)
            for i, j in T.Parallel(BM, N):
                x[i, j] = X[by * BM + i, j] * 2.0
            T.copy(x, Y[by * BM, 0])

    kernel = tilelang.compile(k, target="tt")
    x = exact_values(buf_dtype)
    y = torch.full((M, N), float("nan"), dtype=TORCH[t_out])
    kernel(x, y)
    assert torch.equal(y.float(), x.float() * 2), (y.float() - x.float() * 2).abs().max()


def _float16_fragment_copy(out_dtype):
    """fp32 tensor -> float32 fragment -> float16 fragment -> ``out_dtype`` tensor."""
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float32"), O: T.Tensor((32, 32), out_dtype)):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((32, 32), "float32")
            g = T.alloc_fragment((32, 32), "float16")
            T.copy(A, f)
            T.copy(f, g)
            T.copy(g, O)
    return k


def _compile_recording(func):
    import warnings

    from tilelang_tt import TTPrecisionWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(func, target="tt")
    return kernel, [str(w.message) for w in caught if issubclass(w.category, TTPrecisionWarning)]


def test_float16_fragment_read_back_unrounded_is_warned():
    """A float16 fragment compute writes is held as Float32 (0.81 has no float16 rounding in an fp32 DST): copied
    to a float16 tensor the host rounds it (exact, no warning); read back as float32 it keeps float32's values
    (70000 stays 70000 where a GPU gives inf), which the plan and a TTPrecisionWarning say."""
    a = torch.tensor([70000.0, 0.1, 65519.0, 1e-9] * 8)[None, :].repeat(32, 1)
    kernel, warned = _compile_recording(_float16_fragment_copy("float16"))
    assert warned == [] and "float16_held" not in kernel.plan["precision"]
    o = torch.zeros(32, 32, dtype=torch.float16)
    kernel(a, o)
    assert torch.equal(o, a.half())
    kernel, warned = _compile_recording(_float16_fragment_copy("float32"))
    assert kernel.plan["precision"]["float16_held"] == ["g"]
    assert len(warned) == 1 and "float16 tile buffers g hold the float32 values compute wrote, unrounded" in warned[0]
    o = torch.zeros(32, 32)
    kernel(a, o)
    assert torch.equal(o, a)      # what the warning says: the float32 values


@pytest.mark.parametrize("kind", ["min", "absmax"])
@pytest.mark.parametrize("dim", [1, 0])
def test_float16_extrema_are_exact(kind, dim):
    """``T.reduce_min`` / ``T.reduce_absmax`` of a float16 fragment negate / take |x| into a scratch CB first: a
    Float16 one would be packed from the fp32 DST through bfloat16 (8 significant bits); it is Float32, so the
    selected value is the input's own (the FPU reads it as FP16, exactly)."""
    reduce = {"min": T.reduce_min, "absmax": T.reduce_absmax}[kind]
    n = 32 if dim == 1 else 64

    @T.prim_func
    def k(X: T.Tensor((32, 64), "float16"), O: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((32, 64), "float16")
            r = T.alloc_fragment((n,), "float32")
            T.copy(X, s)
            reduce(s, r, dim=dim)
            T.copy(r, O)

    kernel, warned = _compile_recording(k)
    torch.manual_seed(1)
    x, o = (torch.randn(32, 64) * 3).half(), torch.zeros(n)
    kernel(x, o)
    ref = x.float().amin(dim) if kind == "min" else x.float().abs().amax(dim)
    assert torch.equal(o, ref) and warned == []
