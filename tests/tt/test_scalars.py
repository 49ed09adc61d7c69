"""Block scalars (issue 24): ``T.alloc_var`` / ``T.alloc_local`` scalars, tensor elements used as scalars
(``slope = Slopes[by]``) and scalar loops, as TileLang's examples write them (ForwardScalarsTT, InlineIndexLetsTT,
and the ``_scalar`` CB compute reads an element from)."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt import emulator
from tilelang_tt.errors import TTCallError, TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]
M, N = 64, 128


def _scaled(dtype, local):
    @T.prim_func
    def scaled(A: T.Tensor((M, N), "float32"), S: T.Tensor((M // 32,), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 32, threads=128) as by:
            if local:
                s = T.alloc_local((2,), dtype)
                s[0] = S[by]
                s[1] = s[0] + s[0]
                for i, j in T.Parallel(32, N):
                    C[by * 32 + i, j] = A[by * 32 + i, j] * s[1] + 1.0
            else:
                s = T.alloc_var(dtype)
                s = S[by]
                for i, j in T.Parallel(32, N):
                    C[by * 32 + i, j] = A[by * 32 + i, j] * s + 1.0

    return scaled


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("local", [False, True], ids=["alloc_var", "alloc_local"])
def test_scalar_local_from_a_tensor_element(arch, dtype, local):
    kernel = tilelang.compile(_scaled(dtype, local), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(3)
    a = torch.randn(M, N, generator=g)
    s = torch.randn(M // 32, generator=g) if dtype == "float32" else torch.randint(-9, 9, (M // 32,), generator=g,
                                                                                   dtype=torch.int32)
    c = torch.zeros(M, N)
    kernel(a, s, c)
    scale = s.float().repeat_interleave(32)[:, None] * (2 if local else 1)
    # one fp32 multiply and one add per element, as torch does them (float32 in, float32 out)
    assert torch.equal(c, a * scale + 1.0)
    cb = next(cb for cb in kernel.plan["cbs"] if cb["name"] == "S_scalar")
    assert cb["format"] == {"float32": "Float32", "int32": "Int32"}[dtype]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_elements_as_scalars(arch, dtype):
    """``x * S[by, 2 * by + 17] + S[by, 33 - by]`` of a bfloat16 / float16 tensor (an attention sink ``Sinks[h]``):
    each element sits at another row parity, half of a word and face of its tile (columns 17..23 and 30..33), and
    compute widens it to float32 exactly, float16 subnormals, infinities and signs included."""
    R = M // 32

    @T.prim_func
    def scaled(A: T.Tensor((M, N), "float32"), S: T.Tensor((R, 40), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(R, threads=128) as by:
            for i, j in T.Parallel(32, N):
                C[by * 32 + i, j] = A[by * 32 + i, j] * T.Cast("float32", S[by, 2 * by + 17]) + T.Cast(
                    "float32", S[by, 33 - by])

    kernel = tilelang.compile(scaled, target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(5)
    a = torch.randn(M, N, generator=g)
    tdt = getattr(torch, dtype)
    s = torch.randn(R, 40, generator=g).to(tdt)
    specials = [3.0e-7, -1.5, 6.0e4, -2.0 ** -14] if dtype == "float16" else [1.0e-30, -1.5, 3.0e38, -2.0 ** -126]
    for r in range(R):      # a subnormal / tiny, a negative, a large and a smallest-normal factor
        s[r, 2 * r + 17] = specials[r]
    s[1, 32] = float("inf")
    c = torch.zeros(M, N)
    kernel(a, s, c)
    rows = torch.arange(R)
    scale = s[rows, 2 * rows + 17].float().repeat_interleave(32)[:, None]
    shift = s[rows, 33 - rows].float().repeat_interleave(32)[:, None]
    assert torch.equal(c, a * scale + shift)
    assert torch.isinf(c[32:64]).all()
    cb = next(cb for cb in kernel.plan["cbs"] if cb["name"] == "S_scalar")
    assert cb["format"] == {"bfloat16": "Float16_b", "float16": "Float16"}[dtype]


@pytest.mark.parametrize("arch", ARCHS)
def test_alibi_slope_read_from_a_tensor(arch):
    """``slope = Slopes[bz]``: a float let of a tensor element is the scalar operand where it is used."""
    H, S = 4, 64

    @T.prim_func
    def alibi(X: T.Tensor((H, S, S), "float32"), Slopes: T.Tensor((H,), "float32"),
              Y: T.Tensor((H, S, S), "float32")):
        with T.Kernel(S // 32, S // 32, H, threads=128) as (bx, by, bz):
            slope = Slopes[bz]
            for i, j in T.Parallel(32, 32):
                Y[bz, by * 32 + i, bx * 32 + j] = X[bz, by * 32 + i, bx * 32 + j] + slope * T.Cast(
                    "float32", (bx * 32 + j) - (by * 32 + i))

    kernel = tilelang.compile(alibi, target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(4)
    x, slopes = torch.randn(H, S, S, generator=g), torch.rand(H, generator=g)
    y = torch.zeros(H, S, S)
    kernel(x, slopes, y)
    pos = torch.arange(S)
    assert torch.equal(y, x + slopes[:, None, None] * (pos[None, None, :] - pos[None, :, None]).float())


def test_scalar_loops_are_unrolled():
    """A log-sum-exp over splits, written with T.alloc_var as MLA decode's combine writes it."""
    B, NS, D = 8, 4, 64

    @T.prim_func
    def combine(P: T.Tensor((B, D), "float32"), L: T.Tensor((B, NS), "float32"), O: T.Tensor((B, D), "float32")):
        with T.Kernel(B, threads=128) as b:
            m = T.alloc_var("float32")
            total = T.alloc_var("float32")
            m = -T.infinity("float32")
            for k in T.serial(NS):
                m = T.max(m, L[b, k])
            total = 0.0
            for k in T.serial(NS):
                total += T.exp2(L[b, k] - m)
            for i in T.Parallel(D):
                O[b, i] = P[b, i] * total

    kernel = tilelang.compile(combine, target="tt")
    g = torch.Generator().manual_seed(5)
    p, lse = torch.randn(B, D, generator=g), torch.randn(B, NS, generator=g)
    o = torch.zeros(B, D)
    kernel(p, lse, o)
    total = torch.exp2(lse.double() - lse.double().max(1, keepdim=True).values).sum(1, keepdim=True)
    # fp32 arithmetic on the SFPU: each exp2 and sum within a few fp32 ulps of the float64 value
    assert ((o.double() - p.double() * total).abs() <= 2.0 ** -20 * (p.double().abs() * total)).all()


def test_filled_scalar_locals_inside_a_swizzle_annotation():
    """``T.clear`` / ``T.fill`` of a scalar local are stores (TileLang's examples zero their accumulators so), and
    scalar stores under ``T.use_swizzle`` (an annotation around the body) are forwarded like any other."""
    B, NS, D = 8, 4, 64

    @T.prim_func
    def combine(L: T.Tensor((B, NS), "float32"), P: T.Tensor((B, D), "float32"), O: T.Tensor((B, D), "float32")):
        with T.Kernel(B, threads=128) as b:
            T.use_swizzle(10)
            total = T.alloc_local((1,), "float32")
            scale = T.alloc_local((2,), "float32")
            T.clear(total)
            T.fill(scale, 0.5)
            for k in T.serial(NS):
                total[0] = total[0] + L[b, k]
            for i in T.Parallel(D):
                O[b, i] = P[b, i] * total[0] * scale[1]

    kernel = tilelang.compile(combine, target="tt")
    lse, p = torch.randint(-8, 9, (B, NS)).float(), torch.randn(B, D)
    o = torch.zeros(B, D)
    kernel(lse, p, o)
    assert torch.equal(o, p * lse.sum(1, keepdim=True) * 0.5)


@pytest.mark.parametrize("arch", ARCHS)
def test_expert_found_by_a_scalar_loop(arch):
    """A grouped GEMM finds each row block's expert by scanning the experts' start rows (int32 scalar updated with
    T.if_then_else in a loop, as TileLang's grouped GEMM does); the weight block offset reads it."""
    G, Mr, K, Nc = 3, 128, 64, 64

    @T.prim_func
    def moe(X: T.Tensor((Mr, K), "bfloat16"), W: T.Tensor((G, K, Nc), "bfloat16"), Starts: T.Tensor((G,), "int32"),
            Y: T.Tensor((Mr, Nc), "bfloat16")):
        with T.Kernel(Nc // 32, Mr // 32, threads=128) as (bx, by):
            e = T.alloc_var(T.int32)
            e = 0
            for g in range(G):
                e = T.if_then_else(Starts[g] <= by * 32, g, e)
            xs = T.alloc_shared((32, K), "bfloat16")
            ws = T.alloc_shared((K, 32), "bfloat16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            T.copy(X[by * 32, 0], xs)
            T.copy(W[e, 0, bx * 32], ws)
            T.gemm(xs, ws, acc)
            T.copy(acc, Y[by * 32, bx * 32])

    kernel = tilelang.compile(moe, target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(Mr, K, generator=g).bfloat16(), torch.randn(G, K, Nc, generator=g).bfloat16()
    starts = torch.tensor([0, 32, 96], dtype=torch.int32)
    y = torch.zeros(Mr, Nc, dtype=torch.bfloat16)
    kernel(x, w, starts, y)
    expert = [0, 1, 1, 2]
    ref = torch.cat([x[r * 32:(r + 1) * 32].double() @ w[expert[r]].double() for r in range(Mr // 32)])
    absref = torch.cat([x[r * 32:(r + 1) * 32].double().abs() @ w[expert[r]].double().abs() for r in range(Mr // 32)])
    # as test_moe_grouped_gemm: HiFi2 drops in0's last mantissa bit (2^-7 per product), one output rounding
    bound = 2.0 ** -7 * absref + 2.0 ** -8 * ref.abs() + 1e-3
    assert ((y.double() - ref).abs() <= bound).all(), ((y.double() - ref).abs() - bound).max()


def _grouped_rows(G, rows, Mmax, N):
    """Each group's rows at the prefix sum of the group sizes, summed by a scalar loop over the group index (a grid
    variable), as TileLang's grouped per-split cast writes ``row_offset``."""
    @T.prim_func
    def grouped(X: T.Tensor((rows, N), "float32"), Sizes: T.Tensor((G,), "int32"),
                Y: T.Tensor((G, Mmax, N), "float32")):
        with T.Kernel(Mmax // 32, G, threads=128) as (bx, bz):
            row_offset = T.alloc_var(T.int32)
            row_offset = 0
            for i in T.serial(bz):
                row_offset += Sizes[i]
            xs = T.alloc_shared((32, N), "float32")
            T.copy(X[row_offset + bx * 32:row_offset + bx * 32 + 32, 0:N], xs)
            for i, j in T.Parallel(32, N):
                Y[bz, bx * 32 + i, j] = xs[i, j] * 2.0

    return grouped


@pytest.mark.parametrize("arch", ARCHS)
def test_a_scalar_loop_bounded_by_the_grid_is_unrolled_to_its_bound(arch):
    """``for i in T.serial(bz): row_offset += Sizes[i]``: the trip count is a grid variable, at most G - 1, so the
    loop is unrolled G - 1 times with iteration i guarded by ``i < bz``; each group's rows are read at its prefix
    sum (offsets 0, 40, 57: rows at unaligned offsets), rows past X read zeros."""
    G, rows, Mmax, N = 3, 132, 96, 64
    kernel = tilelang.compile(_grouped_rows(G, rows, Mmax, N), target={"kind": "tt", "arch": arch})
    x = torch.randn(rows, N, generator=torch.Generator().manual_seed(11))
    sizes = torch.tensor([40, 17, 75], dtype=torch.int32)
    y = torch.full((G, Mmax, N), float("nan"))
    kernel(x, sizes, y)
    padded = torch.cat([x, torch.zeros(Mmax, N)])
    offsets = [0, 40, 57]
    torch.testing.assert_close(y, torch.stack([2 * padded[o:o + Mmax] for o in offsets]), rtol=0, atol=0)


def test_a_scalar_loop_without_a_bound_is_refused():
    """A trip count read from a tensor has no bound to unroll to: refused naming the loop and the limit."""
    @T.prim_func
    def unbounded(X: T.Tensor((64, 64), "float32"), Sizes: T.Tensor((2,), "int32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            total = T.alloc_var(T.int32)
            total = 0
            for i in T.serial(Sizes[bx]):
                total += i
            for i, j in T.Parallel(32, 64):
                Y[bx * 32 + i, j] = X[bx * 32 + i, j] * T.Cast("float32", total)

    with pytest.raises(TTUnsupportedError, match=r"(?s)a loop of scalar work over Sizes\[bx\] iterations \(at most "
                                                 r"512 iterations, a constant or bounded by the grid, are computed at "
                                                 r"compile time\).*fix: give the loop a constant trip count"):
        tilelang.compile(unbounded, target="tt")


def test_a_running_maximum_is_a_max_not_a_tree_of_selects():
    """``if W[k] > mx: mx = W[k]`` over 8 elements: each step ``T.max(W[k], mx)`` (a select keeping the old value
    would name it twice per step: 2^8 leaves, and its DST spills ran out of CBs); the exclusive prefix sum and the
    maximum scale A as float32 evaluates them (within a few ulps)."""
    @T.prim_func
    def k(A: T.Tensor((32, 128), "float32"), W: T.Tensor((8,), "float32"), C: T.Tensor((32, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            prev = T.alloc_var("float32")
            cur = T.alloc_var("float32")
            mx = T.alloc_var("float32")
            cur = 0.0
            prev = 0.0
            mx = -1e30
            for kk in T.serial(8):
                prev = cur
                cur = cur + W[kk]
                if W[kk] > mx:
                    mx = W[kk]
            for i, j in T.Parallel(32, 128):
                C[bx * 32 + i, j] = A[bx * 32 + i, j] * prev + cur - mx

    a, w, c = torch.randn(32, 128), torch.randn(8, generator=torch.Generator().manual_seed(5)), torch.empty(32, 128)
    tilelang.compile(k, target="tt")(a, w, c)
    cur = torch.zeros((), dtype=torch.float32)
    for x in w[:7]:
        cur = cur + x
    prev, cur = cur, cur + w[7]
    torch.testing.assert_close(c, a * prev + cur - w.max(), rtol=2 ** -22, atol=2 ** -22)


def running_scale():
    """A scalar local carried from one iteration of a tile loop into the next (a running sum next to T.copy)."""
    @T.prim_func
    def carried(A: T.Tensor((32, 128), "float32"), S: T.Tensor((4,), "float32"), C: T.Tensor((32, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((32, 32), "float32")
            s = T.alloc_var("float32")
            s = 0.0
            for k in T.serial(4):
                T.copy(A[bx * 32, k * 32], a_s)
                s = s + S[k]
                for i, j in T.Parallel(32, 32):
                    C[bx * 32 + i, k * 32 + j] = a_s[i, j] * s

    return carried


def test_a_scalar_carried_across_a_tile_loop_becomes_a_one_element_fragment():
    """ForwardScalarsTT cannot give ``s`` one expression per iteration (its value comes from the iteration before,
    next to a T.copy): it becomes a one-element fragment the compute kernel updates; C is A times the running sum
    of S, exactly."""
    torch.manual_seed(6)
    a, s, c = torch.randn(32, 128), torch.randn(4), torch.empty(32, 128)
    tilelang.compile(running_scale(), target="tt")(a, s, c)
    running, sums = torch.zeros((), dtype=torch.float32), []
    for k in range(4):                      # float32 additions in the kernel's order
        running = running + s[k]
        sums.append(running)
    torch.testing.assert_close(c, a * torch.stack(sums).repeat_interleave(32)[None, :], rtol=0, atol=0)


def test_scalar_refusals():
    @T.prim_func
    def unset(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_var("float32")
            for i, j in T.Parallel(32, 32):
                C[bx * 32 + i, j] = A[bx * 32 + i, j] * s

    with pytest.raises(TTUnsupportedError, match=r"(?s)scalar local s has no value here: it is read before any "
                                                 r"statement stores to it.*fix: store to s before reading it"):
        tilelang.compile(unset, target="tt")

    @T.prim_func
    def byte(A: T.Tensor((64, 64), "bfloat16"), S: T.Tensor((2,), "uint8"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, threads=128) as by:
            for i, j in T.Parallel(32, 64):
                C[by * 32 + i, j] = A[by * 32 + i, j] * T.Cast("bfloat16", S[by])

    with pytest.raises(TTUnsupportedError, match=r"(?s)\(uint8\) is one element used as a scalar of the whole "
                                                 r"block: elements become scalars only of float32, int32, bfloat16, "
                                                 r"float16 tensors.*fix: pass S as a float32 tensor \(S.float\(\)\)"):
        tilelang.compile(byte, target="tt")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_float_kernel_parameters_of_every_width(dtype):
    """``alpha: T.bfloat16`` / ``T.float16`` / ``T.float32``: the kernels receive the bits of alpha's float32 value
    after rounding to its dtype (a 16-bit parameter used to arrive as int(alpha): 1.3 became 1)."""
    @T.prim_func
    def scale(A: T.Tensor((64, 64), "float32"), alpha: getattr(T, dtype), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as by:
            for i, j in T.Parallel(32, 64):
                C[by * 32 + i, j] = A[by * 32 + i, j] * alpha

    kernel = tilelang.compile(scale, target="tt")
    a, c = torch.randn(64, 64, generator=torch.Generator().manual_seed(6)), torch.zeros(64, 64)
    kernel(a, 1.3, c)
    assert torch.equal(c, a * torch.tensor(1.3, dtype=getattr(torch, dtype)).float())


def test_scalar_parameters_that_do_not_fit_a_runtime_argument():
    """A float64 parameter is refused at compile time; an integer value beyond 32 bits at the call (it would wrap)."""
    def kernel_with(dtype):
        @T.prim_func
        def shift(A: T.Tensor((32, 32), "float32"), alpha: getattr(T, dtype), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1, threads=128) as by:
                for i, j in T.Parallel(32, 32):
                    C[by * 32 + i, j] = A[by * 32 + i, j] + alpha

        return shift

    with pytest.raises(TTUnsupportedError, match=r"(?s)scalar parameter alpha is float64: a runtime argument is one "
                                                 r"32-bit word.*fix: declare it as one of T.float32, T.bfloat16"):
        tilelang.compile(kernel_with("float64"), target="tt")
    kernel = tilelang.compile(kernel_with("int64"), target="tt")
    a, c = torch.randn(32, 32), torch.zeros(32, 32)
    kernel(a, -7, c)
    assert torch.equal(c, a - 7)
    with pytest.raises(TTCallError, match=r"parameter alpha takes an int64 scalar; got 8589934592, outside "
                                          r"\[-2147483648, 2147483647\]"):
        kernel(a, 2 ** 33, c)
    with pytest.raises(TTCallError, match=r"8589934592 does not fit the 32-bit runtime argument that carries the int64 "
                                          r"scalar parameter"):      # the emulator's own check, for callers past it
        emulator._scalar_bits(2 ** 33, "int64")


def gate_by_last_element():
    """GDN's backward pass binds one element of a gate vector (``G_last = G_shared[block_S - 1]``) and uses it in
    T.Parallel nests: element 40 of a 64-element vector sits in the vector's second tile."""
    @T.prim_func
    def k(G: T.Tensor((128,), "float32"), X: T.Tensor((128, 64), "float32"), Y: T.Tensor((128, 64), "float32")):
        with T.Kernel(2, threads=128) as (bx,):
            g = T.alloc_shared((64,), "float32")
            x = T.alloc_fragment((64, 64), "float32")
            T.copy(G[bx * 64], g)
            T.copy(X[bx * 64, 0], x)
            last = g[40]
            for i, j in T.Parallel(64, 64):
                x[i, j] = x[i, j] * T.exp(last - g[i])
            T.copy(x, Y[bx * 64, 0])

    return k


def test_an_element_of_a_tile_buffer_bound_to_a_name_is_broadcast():
    """``last = g[40]`` is substituted where it is used (InlineIndexLetsTT: nothing writes ``g`` after it) and the
    element is picked out of ``g`` into a 1x1 line (masked, summed over the rows: exact) that the nest broadcasts."""
    torch.manual_seed(4)
    g, x, y = torch.randn(128), torch.randn(128, 64), torch.empty(128, 64)
    tilelang.compile(gate_by_last_element(), target="tt")(g, x, y)
    blocks = g.view(2, 64)
    want = (x.view(2, 64, 64) * torch.exp(blocks[:, 40:41] - blocks)[:, :, None]).reshape(128, 64)
    torch.testing.assert_close(y, want, rtol=1e-6, atol=1e-6)


def test_a_block_value_bound_to_a_name_is_refused_as_what_it_is():
    """``top = m[bx]`` (an element at a block-dependent place) stays a name the compute kernel would need a float
    register for: the refusal says so, not that it is a kernel parameter."""
    @T.prim_func
    def k(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as (bx,):
            x = T.alloc_fragment((32, 64), "float32")
            m = T.alloc_fragment((32,), "float32")
            T.copy(X[bx * 32, 0], x)
            T.reduce_max(x, m, dim=1)
            top = m[bx]
            for i, j in T.Parallel(32, 64):
                x[i, j] = x[i, j] - top
            T.copy(x, Y[bx * 32, 0])

    with pytest.raises(TTUnsupportedError, match=r"(?s)top, a float value the kernel body computes at block level, "
                       r"is used in an elementwise body.*fix: read it in the T.Parallel from a tensor element"):
        tilelang.compile(k, target="tt")


@pytest.mark.parametrize("arch", ARCHS)
def test_int32_element_at_a_tile_origin_is_a_scalar(arch):
    """Lens[0] sits at the origin of the tensor's first tile: a float element there is read as a broadcast tile,
    but there are no int32 tiles to broadcast, so it is read as a scalar like any other int32 element (TileLang's
    GQA varlen decode with batch 1 reads cu_seqlens_k[bid] with bid = 0)."""
    @T.prim_func
    def masked(X: T.Tensor((64, 64), "float32"), Lens: T.Tensor((4,), "int32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            x = T.alloc_fragment((32, 64), "float32")
            T.copy(X[bx * 32, 0], x)
            n = Lens[0] - Lens[1]
            for i, j in T.Parallel(32, 64):
                x[i, j] = T.if_then_else(j < n, x[i, j], 0.0)
            T.copy(x, Y[bx * 32, 0])

    kernel = tilelang.compile(masked, target={"kind": "tt", "arch": arch})
    x = torch.randn(64, 64)
    y = torch.empty(64, 64)
    kernel(x, torch.tensor([45, 5, 0, 0], dtype=torch.int32), y)
    keep = torch.arange(64)[None, :] < 40
    assert torch.equal(y, torch.where(keep, x, torch.zeros(())))
