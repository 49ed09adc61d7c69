"""Block-level ``if`` in the kernel body (issue 24's control flow): a condition on block indices, loop variables,
scalar parameters or elements of int32 tensors (a block-sparse mask, per-expert token counts) guards part of a
block. Reader, compute and writer all run the same ``if`` (a TT program loop of ``cond ? 1 : 0`` trips, printed as
an if), so the CB protocol inside it balances on its own and the verifier proves it; a tensor element in the
condition is read by the reader and handed to compute through a CB (``read_tile_value``); skipped work moves no
DRAM bytes. Conditions on float tensors, ``else`` branches and fragments written under an ``if`` and read after it
are refused by name.
"""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt import ttir
from tilelang_tt.errors import TTUnsupportedError, TTVerifyError

ARCHS = ["wormhole_b0", "blackhole"]


def guarded_rows(M=128, N=64):
    """Blocks of rows at or past ``valid`` are skipped whole (a varlen bound given as a scalar)."""
    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"), valid: T.int32):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), "float32")
            c = T.alloc_fragment((32, 32), "float32")
            if by * 32 < valid:
                T.copy(A[by * 32, bx * 32], a)
                for i, j in T.Parallel(32, 32):
                    c[i, j] = a[i, j] * 2.0 + 1.0
                T.copy(c, C[by * 32, bx * 32])

    return k


def guarded_k_loop(causal: bool):
    """A GEMM whose K loop skips steps: ``k < kmax`` (a scalar) or, causal, ``k <= by`` (block indices only)."""
    @T.prim_func
    def g(A: T.Tensor((128, 128), "bfloat16"), B: T.Tensor((128, 128), "bfloat16"), C: T.Tensor((128, 128), "float32"),
          kmax: T.int32):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((64, 64), "bfloat16")
            b = T.alloc_shared((64, 64), "bfloat16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):
                if (k <= by) if causal else (k < kmax):
                    T.copy(A[by * 64, k * 64], a)
                    T.copy(B[k * 64, bx * 64], b)
                    T.gemm(a, b, acc)
            T.copy(acc, C[by * 64, bx * 64])

    return g


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("valid", [0, 40, 96, 128])
def test_guarded_blocks_are_skipped(arch, valid):
    kernel = tilelang.compile(guarded_rows(), target=f"tt -arch={arch}")
    torch.manual_seed(1)
    a, c = torch.randn(128, 64), torch.full((128, 64), -7.0)
    kernel(a, c, valid)
    rows = -(-valid // 32) * 32           # whole blocks of 32 rows run when their first row is below valid
    want = torch.full((128, 64), -7.0)
    want[:rows] = a[:rows] * 2 + 1
    torch.testing.assert_close(c, want, rtol=0, atol=0)
    assert kernel.report["total"]["dram_read_bytes"] == rows * 64 * 4   # skipped blocks read nothing


@pytest.mark.parametrize("arch", ARCHS)
def test_guarded_k_steps_with_a_scalar_bound(arch):
    kernel = tilelang.compile(guarded_k_loop(causal=False), target={"kind": "tt", "arch": arch,
                                                                    "math_fidelity": "HiFi4"})
    torch.manual_seed(2)
    a, b, c = torch.randn(128, 128).bfloat16(), torch.randn(128, 128).bfloat16(), torch.empty(128, 128)
    reads = []
    for kmax in (0, 1, 2):
        kernel(a, b, c, kmax)
        ref = a.double()[:, :kmax * 64] @ b.double()[:kmax * 64]
        assert (c.double() - ref).abs().max().item() <= 1e-4 * (1 + ref.abs().max().item())
        reads.append(kernel.report["total"]["dram_read_bytes"])
    assert reads == [0, reads[2] // 2, reads[2]] and reads[2] > 0
    compute = (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    assert "if (k < kmax) {" in compute


def test_causal_k_steps_are_modeled_at_compile_time():
    """A condition on block indices only: the static model iterates the blocks and counts the steps that run."""
    from tilelang_tt import perf_model

    kernel = tilelang.compile(guarded_k_loop(causal=True), target={"kind": "tt", "math_fidelity": "HiFi4"})
    torch.manual_seed(3)
    a, b, c = torch.randn(128, 128).bfloat16(), torch.randn(128, 128).bfloat16(), torch.empty(128, 128)
    kernel(a, b, c, 0)
    lower = torch.zeros(128, 128, dtype=torch.float64)
    for by in range(2):
        rows = slice(by * 64, by * 64 + 64)
        lower[rows] = a.double()[rows, :(by + 1) * 64] @ b.double()[:(by + 1) * 64]
    assert (c.double() - lower).abs().max().item() <= 1e-4 * (1 + lower.abs().max().item())
    static = perf_model.static_work(kernel.artifact_dir)
    # by = 0 runs one K step, by = 1 two: 3 of 4 (block row, step) pairs, each reading a 64x64 A and B block
    assert sum(w.dram_read_bytes for w in static) == 2 * 3 * 2 * 64 * 64 * 2
    assert sum(w.dram_read_bytes for w in static) == kernel.report["total"]["dram_read_bytes"]


def test_guard_prints_as_an_if_and_is_stored():
    from tests.tt.helpers import artifact
    from tilelang_tt import ttir_json
    import json

    art = artifact(guarded_rows())
    assert "if ((by * 32u) < valid) {" in art.files["kernels/reader.cpp"]
    assert "if ((by * 32u) < valid):" in art.files["tt.program.txt"]
    program = ttir_json.from_json(json.loads(art.files["tt.program.json"]))
    assert ttir.dump(program) == art.files["tt.program.txt"]


def test_verifier_refuses_a_guard_only_one_kernel_runs():
    """The reader's if dropped (its reads run for every block) while compute still skips: pushes and pops of the
    CB differ under the condition, and the verifier says so."""
    from tests.tt.helpers import lower
    from tilelang_tt.kernel_context import KernelContext
    from tilelang_tt.pipeline import build_program
    from tilelang_tt.transform.verify_program import verify_program

    func, opts = lower(guarded_rows())
    program = build_program(func, KernelContext(func, opts), opts)

    def unguard(body):
        out = []
        for n in body:
            if isinstance(n, ttir.For) and n.guard is not None:
                out += unguard(n.body)
            elif isinstance(n, ttir.For):
                out.append(n.rebuilt(unguard(n.body)))
            else:
                out.append(n)
        return out

    program.kernels["reader"].body = unguard(program.kernels["reader"].body)
    with pytest.raises(TTVerifyError, match=r"\[cb-pages\] reader pushes .* page\(s\) of a per block, compute pops"):
        verify_program(program, 1 << 20, 32)


def test_refused_branches():
    @T.prim_func
    def on_values(A: T.Tensor((64, 64), "float32"), Scale: T.Tensor((2,), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), "float32")
            if Scale[by] > 0.5:
                T.copy(A[by * 32, bx * 32], a)
                T.copy(a, C[by * 32, bx * 32])

    with pytest.raises(TTUnsupportedError, match=r"an if on the values of Scale \(float32, tensor\)"):
        tilelang.compile(on_values, target="tt")

    @T.prim_func
    def with_else(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), "float32")
            T.copy(A[by * 32, bx * 32], a)
            if bx == 0:     # a copy in one branch, a T.Parallel in the other: neither form MergeBranchesTT merges
                T.copy(a, C[by * 32, bx * 32])
            else:
                for i, j in T.Parallel(32, 32):
                    C[by * 32 + i, bx * 32 + j] = a[i, j] * 2.0

    with pytest.raises(TTUnsupportedError, match="(?s)an if with an else branch.*fix: write the else branch as a second"):
        tilelang.compile(with_else, target="tt")

    @T.prim_func
    def read_after(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32"), valid: T.int32):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), "float32")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A[by * 32, bx * 32], a)
            if by < valid:
                for i, j in T.Parallel(32, 32):
                    c[i, j] = a[i, j] + 1.0
            T.copy(c, C[by * 32, bx * 32])

    with pytest.raises(TTUnsupportedError, match="fragment c is written inside an if and read after it"):
        tilelang.compile(read_after, target="tt")


def block_sparse_gemm(M=128, N=128, K=256, bm=64, bn=64, bk=64, mask_dtype="bool"):
    """TileLang's blocksparse_gemm example: K steps whose mask element is false (0) are skipped; a bool mask is
    written by the host as Int32 words."""
    @T.prim_func
    def bs(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"),
           Mask: T.Tensor((M // bm, N // bn, K // bk), mask_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), "bfloat16")
            b = T.alloc_shared((bk, bn), "bfloat16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                if (Mask[by, bx, k] if mask_dtype == "bool" else Mask[by, bx, k] != 0):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return bs


@pytest.mark.parametrize("arch,mask_dtype", [("wormhole_b0", "bool"), ("blackhole", "int32")])
def test_block_sparse_gemm_skips_masked_steps(arch, mask_dtype):
    kernel = tilelang.compile(block_sparse_gemm(mask_dtype=mask_dtype),
                              target={"kind": "tt", "arch": arch, "math_fidelity": "HiFi4"})
    torch.manual_seed(4)
    a, b = torch.randn(128, 256).bfloat16(), torch.randn(256, 128).bfloat16()
    mask = torch.rand(2, 2, 4) < 0.5
    mask[0, 0] = False                  # a block with no step at all: zeros
    mask = mask if mask_dtype == "bool" else mask.int()
    c = torch.empty(128, 128)
    kernel(a, b, mask, c)
    ref = torch.zeros(128, 128, dtype=torch.float64)
    for i in range(2):
        for j in range(2):
            for k in range(4):
                if mask[i, j, k]:
                    ref[i * 64:(i + 1) * 64, j * 64:(j + 1) * 64] += \
                        a.double()[i * 64:(i + 1) * 64, k * 64:(k + 1) * 64] @ b.double()[k * 64:(k + 1) * 64, j * 64:(j + 1) * 64]
    assert (c.double() - ref).abs().max().item() <= 1e-4 * (1 + ref.abs().max().item())
    # each step that runs reads a 64x64 bf16 block of A and of B; each evaluation reads the mask's 64-byte face row
    steps = int(mask.sum())
    assert kernel.report["total"]["dram_read_bytes"] == steps * 2 * 64 * 64 * 2 + 2 * 2 * 4 * 64
    compute = (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    assert "read_tile_value(cb_Mask_cidx, 0, k % 16u);" in compute and "if (Mask_value != 0u) {" in compute
    assert kernel.plan["buffers"][2]["format"] == "Int32"


def test_expert_with_no_tokens_skips_its_stores():
    """An MoE-style early exit: blocks whose expert has no tokens (Counts[e] == 0) are skipped by all three kernels,
    the writer reading the count through its own index CB; the rows they would write keep the caller's values."""
    @T.prim_func
    def k(X: T.Tensor((4, 64, 64), "float32"), Counts: T.Tensor((4,), "int32"), Y: T.Tensor((4, 64, 64), "float32")):
        with T.Kernel(2, 4, threads=128) as (bx, be):
            x = T.alloc_fragment((64, 32), "float32")
            if Counts[be] > 0:
                T.copy(X[be, 0, bx * 32], x)
                for i, j in T.Parallel(64, 32):
                    x[i, j] = x[i, j] * 3.0
                T.copy(x, Y[be, 0, bx * 32])

    kernel = tilelang.compile(k, target="tt")
    torch.manual_seed(5)
    x, y = torch.randn(4, 64, 64), torch.full((4, 64, 64), 5.0)
    counts = torch.tensor([3, 0, 7, 0], dtype=torch.int32)
    kernel(x, counts, y)
    want = torch.full((4, 64, 64), 5.0)
    want[[0, 2]] = x[[0, 2]] * 3
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    writer = (kernel.artifact_dir / "kernels" / "writer.cpp").read_text()
    assert "read_index(cb_Counts_idx_w, Counts" in writer


def selected_blocks(NB=3, NS=4, D=64):
    """TileLang's native sparse attention picks key blocks from an index table and skips the invalid ones
    (``if i_s <= i_t and i_s >= 0``); here each block sums the 32-row blocks of X its table row names, each weighted
    by its own index (an element of a 3-D int32 table used as a scalar inside a T.Parallel)."""
    @T.prim_func
    def k(X: T.Tensor((NB * 32, D), "float32"), Idx: T.Tensor((1, NB, NS), "int32"),
          O: T.Tensor((NB * 32, D), "float32")):
        with T.Kernel(NB, threads=128) as bx:
            x = T.alloc_shared((32, D), "float32")
            acc = T.alloc_fragment((32, D), "float32")
            T.clear(acc)
            for i in T.serial(NS):
                s = Idx[0, bx, i] * 32
                if s <= bx * 32 and s >= 0:
                    T.copy(X[s:s + 32, :], x)
                    for a, b in T.Parallel(32, D):
                        acc[a, b] += x[a, b] * T.Cast("float32", Idx[0, bx, i] + 1)
            T.copy(acc, O[bx * 32, 0])

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_blocks_selected_by_an_index_table_with_a_compound_condition(arch):
    NB, NS, D = 3, 4, 64
    kernel = tilelang.compile(selected_blocks(NB, NS, D), target={"kind": "tt", "arch": arch})
    x = torch.randn(NB * 32, D)
    idx = torch.tensor([[[0, -1, 0, 2], [1, 0, -1, -1], [2, 1, 0, 5]]], dtype=torch.int32)
    out = torch.zeros(NB * 32, D)
    kernel(x, idx, out)
    want = torch.zeros(NB * 32, D)
    for b in range(NB):
        acc = torch.zeros(32, D)
        for i in range(NS):
            s = int(idx[0, b, i])
            if s * 32 <= b * 32 and s >= 0:     # -1 (no block) and 2 > 0 (a future block) are skipped
                acc = acc + x[s * 32:(s + 1) * 32] * float(s + 1)
        want[b * 32:(b + 1) * 32] = acc
    assert torch.equal(out, want)     # one float32 multiply and add per step, in the loop's order


# ---- if / else in the kernel body (MergeBranchesTT), integer division of indices -----------------------------------
def branchy(rows=128):
    """The block-causal attention example's branches: which block to load, and how to fill a fragment (a mask in one
    branch, T.clear in the other); a third if / else predicates two different fragments."""
    @T.prim_func
    def k(X: T.Tensor((rows, 32), "float32"), O: T.Tensor((64, 64), "float32"), P: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            s = T.alloc_shared((32, 32), "float32")
            m = T.alloc_fragment((32, 32), "float32")
            a = T.alloc_fragment((32, 32), "float32")
            b = T.alloc_fragment((32, 32), "float32")
            if by == 0:
                T.copy(X[bx * 32, 0], s)
            else:
                T.copy(X[64 + bx * 32, 0], s)
            if bx != 0:
                for i, j in T.Parallel(32, 32):
                    m[i, j] = T.if_then_else(i // 8 >= j // 8, s[i, j], -1.0)
            else:
                T.clear(m)
            T.fill(a, 1.0)
            T.fill(b, 2.0)
            if bx == by:
                for i, j in T.Parallel(32, 32):
                    a[i, j] = m[i, j] + 10.0
            else:
                for i, j in T.Parallel(32, 32):
                    b[i, j] = m[i, j] * 3.0
            for i, j in T.Parallel(32, 32):
                m[i, j] = m[i, j] + a[i, j] + b[i, j]
            T.copy(m, O[by * 32, bx * 32])
            for i, j in T.Parallel(32, 32):
                a[i, j] = (i - 20) // 8 * 100 + (j - 3) % 5 + (i + 32 * by) // 3
            T.copy(a, P[by * 32, bx * 32])
    return k


def test_if_else_branches_run_as_selects():
    kernel = tilelang.compile(branchy(), target="tt")
    x = torch.randint(-50, 50, (128, 32)).float()
    o, p = torch.empty(64, 64), torch.empty(64, 64)
    kernel(x, o, p)
    i, j = torch.arange(32)[:, None], torch.arange(32)[None, :]
    for by in range(2):
        for bx in range(2):
            s = x[bx * 32:(bx + 1) * 32] if by == 0 else x[64 + bx * 32:64 + (bx + 1) * 32]
            m = torch.where(i // 8 >= j // 8, s, torch.tensor(-1.0)) if bx != 0 else torch.zeros(32, 32)
            a = m + 10.0 if bx == by else torch.ones(32, 32)
            b = torch.full((32, 32), 2.0) if bx == by else m * 3.0
            assert torch.equal(o[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32], m + a + b), (by, bx)
            want = torch.div(i - 20, 8, rounding_mode="floor") * 100 + torch.remainder(j - 3, 5) + \
                torch.div(i + 32 * by, 3, rounding_mode="floor")
            assert torch.equal(p[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32], want.float().expand(32, 32)), (by, bx)


def test_lower_guard_of_a_shifted_store_is_kept():
    """``if i - 8 >= 0: C[i - 8, j] = A[i, j]``: the guard is not a tail guard (the writer clips rows past the
    tensor's end, not before its start); dropped, rows -8..-1 were written below C's DRAM buffer."""
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as by:
            for i, j in T.Parallel(32, 32):
                if i - 8 >= 0:
                    C[i - 8, j] = A[i, j]

    with pytest.raises(TTUnsupportedError, match="row offset -8 of C is not a multiple of 32"):
        tilelang.compile(k, target="tt")
