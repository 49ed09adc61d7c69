"""The explicit TT program: faithful to the TIR (loop bounds, let-bound values, names), and its verifier.

Numbers are checked against torch on the emulator; each verifier rule gets a hand-built program that
breaks exactly that rule.
"""

import pytest
import tilelang
import tilelang.language as T
import torch
import tvm
from tvm import tirx

from tilelang_tt.errors import TTError, TTVerifyError
from tilelang_tt.names import NameSupply, generated
from tilelang_tt.transform.verify_program import verify_program
from tilelang_tt.ttir import CB, CBInfo, Call, Dst, For, Kernel, Lit, Program, Tensor, VReg


def k_range_gemm(start, stop):
    """C = sum over k in [start, stop) of A[:, k-block] @ B[k-block, :] with 32x32 blocks."""
    @T.prim_func
    def gemm(A: T.Tensor((64, 96), "bfloat16"), B: T.Tensor((96, 64), "bfloat16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for k in T.serial(start, stop):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])
    return gemm


def hifi2_in0(a):
    """matmul in0 as the FPU multiplies it at HiFi2 (the default for bf16 inputs): in0 goes through SrcB, whose
    HiFi2 phases use its implicit 1 + 6 mantissa bits (fp32 bits & 0xfffe0000; TT_KERNEL_PATTERNS.md 5.2); in1 is
    exact. The references below use it, so their tolerances stay those of fp32 accumulation."""
    return (a.float().view(torch.int32) & -0x20000).view(torch.float32)


def _gemm_ref(a, b, k_lo):
    """Rows of block row r sum k-blocks k_lo(r)..2."""
    a = hifi2_in0(a)
    c = torch.zeros(64, 64)
    for r in range(2):
        for k in range(k_lo(r), 3):
            c[r * 32:(r + 1) * 32] += a[r * 32:(r + 1) * 32, k * 32:(k + 1) * 32].float() @ b[k * 32:(k + 1) * 32].float()
    return c


def test_serial_with_a_start_runs_from_it():
    kernel = tilelang.compile(k_range_gemm(1, 3), target="tt")
    assert "for (uint32_t k = 1u; k < 1u + 2u; ++k)" in kernel.get_kernel_source()
    a, b = torch.randn(64, 96).bfloat16(), torch.randn(96, 64).bfloat16()
    c = torch.empty(64, 64)
    kernel(a, b, c)
    torch.testing.assert_close(c, _gemm_ref(a, b, lambda r: 1), rtol=1e-2, atol=1e-2)


def test_serial_with_a_symbolic_start():
    @T.prim_func
    def gemm(A: T.Tensor((64, 96), "bfloat16"), B: T.Tensor((96, 64), "bfloat16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for k in T.serial(by, 3):       # block row r starts at k-block r
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])

    kernel = tilelang.compile(gemm, target="tt")
    a, b = torch.randn(64, 96).bfloat16(), torch.randn(96, 64).bfloat16()
    c = torch.empty(64, 64)
    kernel(a, b, c)
    torch.testing.assert_close(c, _gemm_ref(a, b, lambda r: r), rtol=1e-2, atol=1e-2)


def test_let_bound_indices_in_parallel_loads_and_stores():
    @T.prim_func
    def add(A: T.Tensor((64, 128), "float32"), B: T.Tensor((64, 128), "float32"), C: T.Tensor((64, 128), "float32")):
        with T.Kernel(4, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                y = by * 32 + i
                x = bx * 32 + j
                C[y, x] = A[y, x] + B[y, x]

    kernel = tilelang.compile(add, target="tt")
    a, b, c = torch.randn(64, 128), torch.randn(64, 128), torch.empty(64, 128)
    kernel(a, b, c)
    torch.testing.assert_close(c, a + b)


def test_let_bound_copy_offsets():
    @T.prim_func
    def gemm(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, 2, threads=128) as (bx, by):
            start_y = by * 64
            A_s = T.alloc_shared((64, 32), "bfloat16")
            B_s = T.alloc_shared((32, 64), "bfloat16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.serial(2):
                T.copy(A[start_y, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[start_y, 0])

    kernel = tilelang.compile(gemm, target="tt")
    a, b, c = torch.randn(128, 64).bfloat16(), torch.randn(64, 64).bfloat16(), torch.empty(128, 64)
    kernel(a, b, c)
    torch.testing.assert_close(c, hifi2_in0(a) @ b.float(), rtol=1e-2, atol=1e-2)


def test_keyword_and_non_ascii_names_reach_cpp_renamed():
    @T.prim_func
    def gemm(template: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"),
             C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for new in T.serial(2):
                kü = new * 32
                T.copy(template[by * 32, kü], A_s)
                T.copy(B[kü, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])

    kernel = tilelang.compile(gemm, target="tt")
    src = kernel.get_kernel_source()
    # the let-bound K offset is inlined (InlineIndexLetsTT), so SuperBlockTT sees the canonical GEMM and fuses its
    # two K steps into one: the renamed loop runs once
    assert "for (uint32_t new_t = 0; new_t < 1u; ++new_t)" in src
    assert "const auto template_t = TensorAccessor(" in src
    a, b, c = torch.randn(64, 64).bfloat16(), torch.randn(64, 64).bfloat16(), torch.empty(64, 64)
    kernel(a, b, c)
    torch.testing.assert_close(c, hifi2_in0(a) @ b.float(), rtol=1e-2, atol=1e-2)


def test_name_supply():
    names = NameSupply()
    k1, k2 = tirx.Var("k", "int32"), tirx.Var("k", "int32")
    assert [names.var(k1).name, names.var(k2).name, names.var(k1).name] == ["k", "k_2", "k"]
    assert names.var(tirx.Var("int", "int32")).name == "int_t"
    assert names.var(tirx.Var("mt", "int32")).name == "mt_t"          # a name the generator uses itself
    assert names.fresh("ä b") == "__b"
    with pytest.raises(AssertionError):
        generated("user_name")


# -- the verifier: one hand-built program per rule ------------------------------------------------------

def _cb(name, index, producer, consumer, fmt="Float16_b"):
    return CBInfo(name, index, fmt, 1, 2, (1, 1), producer, consumer, "input", page_size=2048)


def _program(reader=(), compute=(), writer=(), startup=None, cbs=None):
    cbs = cbs or {"in": _cb("in", 0, ("reader",), ("compute",)), "out": _cb("out", 16, ("compute",), ("writer",))}
    kernels = {"reader": Kernel("reader", list(reader)), "compute": Kernel("compute", list(compute)),
               "writer": Kernel("writer", list(writer))}
    kernels["compute"].startup = startup or Call("hw_startup", (CB("in"), CB("in"), CB("out")))
    return Program("bad", kernels, cbs, 8, "test.py:1 (kernel 'bad')")


IN, OUT = CB("in"), CB("out")
READ = [Call("cb_reserve_back", (IN, 1)), Call("read_tiles", (IN, Tensor("A"), 0, 0, 1, 1)),
        Call("noc_async_read_barrier", ()), Call("cb_push_back", (IN, 1))]
WRITE = [Call("cb_wait_front", (OUT, 1)), Call("write_tiles", (OUT, Tensor("C"), 0, 0, 1, 1)),
         Call("noc_async_write_barrier", ()), Call("cb_pop_front", (OUT, 1))]


def _copy(slot=0, init=True, reconfig_after=False):
    body = [Call("cb_wait_front", (IN, 1)), Call("cb_reserve_back", (OUT, 1)), Call("tile_regs_acquire", ())]
    body += [Call("copy_init", (IN,))] if init else []
    body += [Call("reconfig_data_format_srca", (IN,))] if reconfig_after else []
    body += [Call("copy_tile", (IN, 0, Dst(slot)), "T.copy(A_s, C_s)"), Call("tile_regs_commit", ()),
             Call("tile_regs_wait", ()), Call("pack_tile", (Dst(slot), OUT)), Call("tile_regs_release", ()),
             Call("cb_pop_front", (IN, 1)), Call("cb_push_back", (OUT, 1))]
    return body


def _verify(p):
    return verify_program(p, 1 << 20, 32)


def test_verifier_accepts_a_correct_program():
    _verify(_program(READ, _copy(), WRITE))


BAD = {
    "cb-reserve": lambda: _program([c for c in READ if c.op != "cb_reserve_back"], _copy(), WRITE),
    "cb-front": lambda: _program(READ, [c for c in _copy() if c.op != "cb_wait_front"], WRITE),
    "cb-pages": lambda: _program(READ + READ, _copy(), WRITE),
    "dst-capacity": lambda: _program(READ, _copy(slot=8), WRITE),
    "dst-phase": lambda: _program(READ, [c for c in _copy() if c.op != "tile_regs_wait"], WRITE),
    "init": lambda: _program(READ, _copy(init=False), WRITE),
    "reconfig-order": lambda: _program(READ, _copy(reconfig_after=True), WRITE),
    "src-format": lambda: _program(READ, _copy(), WRITE, cbs={
        "in": _cb("in", 0, ("reader",), ("compute",), "Float32"), "out": _cb("out", 16, ("compute",), ("writer",))},
        startup=Call("hw_startup", (OUT, OUT, OUT))),
    "read-barrier": lambda: _program([c for c in READ if c.op != "noc_async_read_barrier"], _copy(), WRITE),
    "unlowered": lambda: _program(READ, [Call("consume", (IN, 1))] + _copy(), WRITE),
    "l1-budget": lambda: _program(READ, _copy(), WRITE, cbs={
        "in": _cb("in", 40, ("reader",), ("compute",)), "out": _cb("out", 16, ("compute",), ("writer",))}),
}


def test_verifier_refuses_an_init_before_its_reconfig():
    """The LLK asserts in the init that the unpacker already has the init's CB formats (TT_KERNEL_PATTERNS 5.4):
    copy_init of a Float32 CB while SrcA is configured for Float16_b is refused even when a reconfiguration and a
    second copy_init follow before the copy (tt-sim refuses it at the first init, as the hardware does)."""
    cbs = {"in": _cb("in", 0, ("reader",), ("compute",), "Float32"), "out": _cb("out", 16, ("compute",), ("writer",))}
    body = _copy()
    at = next(i for i, c in enumerate(body) if c.op == "copy_init")
    body[at:at + 1] = [Call("copy_init", (IN,)), Call("reconfig_data_format_srca", (IN,)), Call("copy_init", (IN,))]
    startup = Call("hw_startup", (OUT, OUT, OUT))
    with pytest.raises(TTVerifyError) as info:
        _verify(_program(READ, body, WRITE, startup=startup, cbs=cbs))
    assert info.value.rule == "src-format", str(info.value)
    assert "copy_init for in (Float32) while srca is configured for Float16_b: reconfig_data_format must come " \
           "before the init it affects" in str(info.value)
    body[at:at + 3] = [Call("reconfig_data_format_srca", (IN,)), Call("copy_init", (IN,))]   # the right order
    _verify(_program(READ, body, WRITE, startup=startup, cbs=cbs))


@pytest.mark.parametrize("rule", sorted(BAD))
def test_verifier_rule(rule):
    with pytest.raises(TTVerifyError) as info:
        _verify(BAD[rule]())
    assert info.value.rule == rule, str(info.value)
    assert "internal error in the" in str(info.value) and "test.py:1" in str(info.value)


def test_the_persistent_loop_is_marked_and_counted_per_block():
    """LowerToTTProgram marks the loop over the core's blocks (``For.persistent``), the program passes keep the mark,
    and the cb-pages rule counts pages per block: inside the persistent loop, not times its trip count."""
    from tests.tt.helpers import lower
    from tilelang_tt.kernel_context import KernelContext
    from tilelang_tt.pipeline import build_program
    from tilelang_tt.transform.verify_program import _pages

    func, opts = lower(k_range_gemm(0, 3))
    program = build_program(func, KernelContext(func, opts), opts)
    for role, kernel in program.kernels.items():
        marked = [n for n in kernel.body if isinstance(n, For) and n.persistent]
        assert len(marked) == 1, role
    n, k = tirx.Var("n", "int32"), tirx.Var("k", "int32")
    push = Call("cb_push_back", (IN, 2))
    analyzer = tvm.arith.Analyzer()
    assert _pages([For(n, 0, 5, [For(k, 0, 3, [push])], persistent=True)], "cb_push_back", "in", analyzer) == 6
    assert _pages([For(n, 0, 5, [For(k, 0, 3, [push])], note="persistent loop")], "cb_push_back", "in",
                  analyzer) == 30


def test_l1_budget_rule_is_reached_when_stream_bands_is_skipped(monkeypatch):
    """StreamBandsTT refuses (or bands) CBs that do not fit before the TT program exists, so the verifier's byte check
    is the second line of defence: with that pass skipped, a real lowering of a 384x384-block GEMM with K blocks of
    96 reaches it. Its CBs, by hand: the fp32 accumulator and C's double-buffered bf16 CB (589,824 B each), A_s and
    B_s double-buffered (147,456 B each): 1,474,560 B against wormhole's 1,393,312 usable (test_hw_table.py)."""
    import tilelang_tt.pipeline as pipeline
    from tests.tt.helpers import artifact, one_block_gemm

    monkeypatch.setattr(pipeline, "stream_bands", lambda func, dev: func)
    with pytest.raises(TTVerifyError) as info:
        artifact(one_block_gemm(384, 96))
    assert info.value.rule == "l1-budget"
    assert "CBs need 1474560 B of L1, the kernels can use 1393312 B" in str(info.value)


def _reduce_program(order):
    """A REDUCE_ROW SUM of a Float32 block with a bf16 scaler, the unpacker configured in ``order``."""
    sc = CB("scaler")
    cbs = {"in": _cb("in", 0, ("reader",), ("compute",), "Float32"), "out": _cb("out", 16, ("compute",), ("writer",)),
           "scaler": _cb("scaler", 1, ("reader",), ("compute",))}
    reader = READ + [Call("cb_reserve_back", (sc, 1)), Call("generate_reduce_scaler", (sc,)),
                     Call("cb_push_back", (sc, 1))]
    compute = [Call("cb_wait_front", (IN, 1)), Call("cb_wait_front", (sc, 1)), Call("tile_regs_acquire", ()),
               Call("reconfig_data_format", order(IN, sc)), Call("reduce_init_sum_row", (IN, sc, OUT)),
               Call("reduce_tile_sum_row", (IN, sc, 0, 0, Dst(0)), "T.reduce_sum(x, s, dim=1)"),
               Call("tile_regs_commit", ()), Call("cb_reserve_back", (OUT, 1)), Call("tile_regs_wait", ()),
               Call("pack_tile", (Dst(0), OUT)), Call("tile_regs_release", ()), Call("cb_push_back", (OUT, 1)),
               Call("reduce_uninit", ()), Call("cb_pop_front", (IN, 1)), Call("cb_pop_front", (sc, 1))]
    return _program(reader, compute, WRITE, cbs=cbs, startup=Call("hw_startup", (IN, sc, OUT)))


def test_verifier_knows_the_reduce_operand_order():
    """REDUCE_ROW SUM unpacks the scaler through SrcA and the data through SrcB (the LLK swaps them): the
    src-format rule checks each operand against its own register."""
    _verify(_reduce_program(lambda data, scaler: (scaler, data)))
    with pytest.raises(TTVerifyError) as info:
        _verify(_reduce_program(lambda data, scaler: (data, scaler)))
    # refused at the init, where the LLK asserts (the unpacker must be configured before reduce_init)
    assert info.value.rule == "src-format" and "reduce_init_sum_row" in str(info.value), str(info.value)


def test_verifier_names_the_tilelang_statement():
    with pytest.raises(TTVerifyError, match=r"compute kernel at copy_tile: \[dst-capacity\].*TileLang: T.copy\(A_s, C_s\)"):
        _verify(_program(READ, _copy(slot=8), WRITE))


def test_write_barrier_rule():
    writer = [c for c in WRITE if c.op != "noc_async_write_barrier"]
    with pytest.raises(TTVerifyError, match=r"\[read-barrier\].*noc_async_write_barrier"):
        _verify(_program(READ, _copy(), writer))


def test_virtual_register_must_be_allocated():
    body = _copy()
    body[4] = Call("copy_tile", (IN, 0, Dst(VReg(7))))
    with pytest.raises(TTVerifyError, match=r"\[unlowered\] virtual DST register %7"):
        _verify(_program(READ, body, WRITE))


def test_loop_iteration_must_leave_the_cb_state():
    loop = For(tirx.Var("kk", "int32"), 0, 2, [Call("cb_reserve_back", (IN, 1))])
    with pytest.raises(TTVerifyError, match=r"\[cb-reserve\] an iteration of the loop over kk"):
        _verify(_program(READ + [loop], _copy(), WRITE))


# -- every TIR statement type is handled or refused with our error -------------------------------------

def _stmt_factories():
    v, buf = tirx.Var("v", "int32"), tirx.decl_buffer((32, 32), "float32", "X")
    ev = tirx.Evaluate(tirx.IntImm("int32", 0))
    block = tirx.SBlock([], [], [], "b", ev)
    return {
        "AllocBuffer": lambda: tirx.AllocBuffer(buf),
        "AssertStmt": lambda: tirx.AssertStmt(tirx.IntImm("bool", 1), tirx.StringImm("ValueError"),
                                              [tirx.StringImm("x")]),
        "AttrStmt": lambda: tirx.AttrStmt(v, "pragma_x", tirx.IntImm("int32", 0), ev),
        "Bind": lambda: tirx.Bind(v, tirx.IntImm("int32", 0)),
        "BufferStore": lambda: tirx.BufferStore(buf, tirx.FloatImm("float32", 0.0), [0, 0]),
        "DeclBuffer": lambda: tirx.DeclBuffer(buf),
        "Evaluate": lambda: ev,
        "For": lambda: tirx.For(v, 0, 2, tirx.ForKind.VECTORIZED, ev),
        "IfThenElse": lambda: tirx.IfThenElse(v > 0, ev, None),
        "SBlock": lambda: block,
        "SBlockRealize": lambda: tirx.SBlockRealize([], tirx.IntImm("bool", 0), block),
        "SeqStmt": lambda: tirx.SeqStmt([ev, ev]),
        "While": lambda: tirx.While(v > 0, ev),
    }


def _stmt_types():
    def subs(c):
        for s in c.__subclasses__():
            yield s
            yield from subs(s)
    return sorted({s.__name__ for s in subs(tirx.Stmt)})


def test_every_tir_statement_type_is_handled_or_refused():
    """Both passes that walk statements (MemorySpaceLowerTT over the frontend's body, LowerToTTProgram over
    the tile program) either lower a statement or raise our error naming it; a new statement type in
    TileLang's TVM fails this test until it is given a rule."""
    from tilelang_tt.device import get_device
    from tilelang_tt.transform.lower_to_program import LowerToProgram
    from tilelang_tt.transform.memory_space_lower import _Lowerer

    factories = _stmt_factories()
    assert set(_stmt_types()) <= set(factories), set(_stmt_types()) - set(factories)

    @T.prim_func
    def tiny(A: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            T.clear(A[0:32, 0:32])

    lowerer = _Lowerer(tiny, get_device("wormhole_b0"))
    program = LowerToProgram(tiny, "tiny", {}, {}, NameSupply(), 8, False, "test.py:1")
    handled = {"memory_space_lower": {"SeqStmt", "Bind"},
               "lower_to_program": {"SeqStmt", "Bind"}}
    for name, make in factories.items():
        for walker, fn in (("memory_space_lower", lambda s: lowerer.lower(s, 2)),
                           ("lower_to_program", program.lower_stmt)):
            try:
                fn(make())
            except TTError as e:
                assert str(e), name
                continue
            assert name in handled[walker], f"{walker} silently accepted {name}"


def test_verifier_runs_in_every_compile(monkeypatch, tmp_path):
    """Drop a program pass from the pipeline: the compile stops at the verifier instead of printing bad C++."""
    from examples import kernels as K
    from tilelang_tt import pipeline

    monkeypatch.setenv("TILELANG_TT_DUMP_IR", str(tmp_path))     # also bypasses the compile cache

    original = pipeline.program_passes
    monkeypatch.setattr(pipeline, "program_passes",
                        lambda ctx: [p for p in original(ctx) if p[0] != "PlaceCBPops"])
    with pytest.raises(TTVerifyError, match=r"\[unlowered\] consume has no C\+\+ form"):
        tilelang.compile(K.design_gemm(64, 64, 64), target="tt -max_cores=3")


def test_verifier_refuses_a_matmul_block_unlike_its_init():
    """matmul_block runs the block shape its init configured (the LLK sets the unpack / math loops in the init)."""
    def body(rt):
        init = Call("matmul_block_init", (IN, IN, Lit("0"), 1, rt, 1))
        mm = Call("matmul_block", (IN, IN, 0, 0, Dst(0), Lit("0"), 1, 1, 1), "T.gemm(A_s, B_s, C_l)")
        return ([Call("cb_wait_front", (IN, 1)), Call("cb_reserve_back", (OUT, 1)), Call("tile_regs_acquire", ()),
                 init, mm, Call("tile_regs_commit", ()), Call("tile_regs_wait", ()), Call("pack_tile", (Dst(0), OUT)),
                 Call("tile_regs_release", ()), Call("cb_pop_front", (IN, 1)), Call("cb_push_back", (OUT, 1))])

    startup = Call("hw_startup_matmul", (IN, IN, OUT))
    _verify(_program(READ, body(1), WRITE, startup=startup))
    with pytest.raises(TTVerifyError) as info:
        _verify(_program(READ, body(2), WRITE, startup=startup))
    assert info.value.rule == "init" and "matmul_block with (transpose, ct, rt, kt) = (0, 1, 1, 1) after " \
        "matmul_block_init for (0, 1, 2, 1)" in str(info.value)


def test_a_variable_read_outside_its_loop_is_a_verify_error():
    """The ``scope`` rule: a compute call reading a loop's variable after the loop (what a block's place in its
    tile that named the loop variable produced) is a TTVerifyError naming the variable, not C++ that does not
    compile."""
    from tilelang_tt.transform.verify_program import _check_scope
    from tilelang_tt.ttir import Scalar

    kk = tirx.Var("kk", "int32")
    start = tirx.Var("start_id", "int32")       # a runtime argument: bound by no loop, read anywhere
    loop = For(kk, tirx.IntImm("int32", 0), tirx.IntImm("int32", 4),
               [Call("unary_eq_tile", (0, Scalar(tirx.floormod(kk + start, 32))))])
    ok = Program("k", {"compute": Kernel("compute", [loop])}, {}, 8)
    _check_scope(ok)
    late = Call("unary_eq_tile", (0, Scalar(tirx.floormod(kk, 32))), note="T.Parallel: acc[j] += x[0, j]")
    bad = Program("k", {"compute": Kernel("compute", [loop, late])}, {}, 8)
    with pytest.raises(TTVerifyError, match=r"scope.*kk is read outside the loop or after the let that binds it"):
        _check_scope(bad)
