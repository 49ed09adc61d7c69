"""TTMulticastReuse: 2-D multicast GEMMs (A along core rows, B down core columns) on tt-sim.

Each multicast GEMM must give bit-for-bit the result of the same kernel without multicast (the data each core
computes with is the same; only who reads it from DRAM changes) and match torch; its DRAM and multicast counters
must equal the counts derived from the plan; the plan names which operand moves along which axis; the emulator's
sanitizer must stop the seeded handshake bugs below; every generated multicast artifact passes the real-header
check (``TILELANG_TT_REAL_CHECK=0`` skips that test).
"""

import json
import os
from pathlib import Path

import pytest
import tilelang
import tilelang.language as T
import torch

import tilelang_tt  # noqa: F401
from tilelang_tt import emulator
from tilelang_tt.emulator import TTSimError
from tilelang_tt.errors import TTScheduleError
from tilelang_tt.program_interface import MCAST_ARGS

from .helpers import broken_copy

ARCHS = ("wormhole_b0", "blackhole")
TILE_BYTES = 32 * 32 * 2   # a bf16 tile


def mcast_gemm(M, N, K, block=32, multicast=True, dtype="bfloat16"):
    """The design GEMM with the multicast choice annotated."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_blk = T.alloc_shared((block, block), dtype)
            B_blk = T.alloc_shared((block, block), dtype)
            C_acc = T.alloc_fragment((block, block), dtype)
            T.annotate_tt_schedule(multicast=multicast)
            T.clear(C_acc)
            for kk in T.serial(T.ceildiv(K, block)):
                T.copy(A[by * block, kk * block], A_blk)
                T.copy(B[kk * block, bx * block], B_blk)
                T.gemm(A_blk, B_blk, C_acc)
            T.copy(C_acc, C[by * block, bx * block])

    return gemm


def _run(kernel, M, N, K, seed=0):
    torch.manual_seed(seed)
    a, b = torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)
    c = torch.zeros(M, N, dtype=torch.bfloat16)
    kernel(a, b, c)
    return a, b, c


# (M, N, K): whole blocks; tensor edges and a K tail inside blocks (5x3 blocks); a 10x9 block grid, which the
# 8x8 wormhole grid holds only as a 5x3 lattice of 2x3-block rectangles (blackhole 11x10: one block per core)
SHAPES = [(128, 128, 128), (160, 96, 100), (320, 288, 64)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_mcast_gemm_matches_torch_and_unicast(arch, shape):
    M, N, K = shape
    mc = tilelang.compile(mcast_gemm(M, N, K), target=f"tt -arch={arch}")
    uc = tilelang.compile(mcast_gemm(M, N, K, multicast=False), target=f"tt -arch={arch}")
    assert "multicast" in mc.plan and "multicast" not in uc.plan
    a, b, c = _run(mc, M, N, K)
    _, _, c_uc = _run(uc, M, N, K)
    assert torch.equal(c, c_uc)
    ref = a.float() @ b.float()
    assert (c.float() - ref).abs().max() <= (-(-K // 32)) * 2**-8 * ref.abs().max()
    assert mc.report["total"]["noc_multicast_bytes"] > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_plan_names_operands_and_axes(arch):
    kernel = tilelang.compile(mcast_gemm(256, 256, 64), target=f"tt -arch={arch}")
    m = kernel.plan["multicast"]
    groups = {g["tensor"]: g for g in m["groups"]}
    assert (groups["A"]["operand"], groups["A"]["axis"]) == ("in0", "row")
    assert (groups["B"]["operand"], groups["B"]["axis"]) == ("in1", "column")
    rows, cols = m["lattice"]
    assert sorted(tuple(x["core"]) for x in kernel.plan["mapping"]) == [(y, x) for y in range(rows) for x in range(cols)]
    assert kernel.plan["schedule"]["multicast"] is True


def test_routes_are_computed_by_the_pass_and_only_printed_by_the_host():
    """TTMulticastReuse gives every core of the lattice its route in each group (logical [y, x]): along a core row
    the sender and low corner are the row's first core, the high corner its last, cols - 1 receivers; down a column
    likewise. The reader's runtime args name each route field by group and field, and host.cpp takes the values from
    the plan: a plan with another sender renders a host program with that sender, and no lattice arithmetic."""
    from tilelang_tt import codegen

    kernel = tilelang.compile(mcast_gemm(256, 256, 64), target="tt -arch=wormhole_b0")
    plan = kernel.plan
    rows, cols = plan["multicast"]["lattice"]
    groups = {g["tensor"]: g for g in plan["multicast"]["groups"]}
    for i, m in enumerate(plan["mapping"]):
        y, x = m["core"]
        assert groups["A"]["cores"][i] == {"sender": [y, 0], "first": [y, 0], "last": [y, cols - 1],
                                           "num_dests": cols - 1, "is_sender": x == 0}
        assert groups["B"]["cores"][i] == {"sender": [0, x], "first": [0, x], "last": [rows - 1, x],
                                           "num_dests": rows - 1, "is_sender": y == 0}
    layout = [a for a in plan["kernels"]["reader"]["runtime_args"]["layout"] if a["kind"] == "multicast"]
    assert [(a["group"], a["field"]) for a in layout] == [(g, f) for g in range(2) for f in MCAST_ARGS]
    host = kernel.get_host_source()
    assert "kLattice" not in host and "work.x == 0" not in host and "work.y == 0" not in host
    moved = json.loads(json.dumps(plan))
    moved["multicast"]["groups"][0]["cores"][0] = {"sender": [0, 3], "first": [0, 1], "last": [0, 5], "num_dests": 4,
                                                   "is_sender": False}
    text = codegen._ENV.get_template("host.cpp.j2").render(plan=moved, exe="x")
    assert "{0, 0, {0, 0, 1, 1}, {{{3, 0}, {1, 0}, {5, 0}, 4, 0}, {{0, 0}, {0, 0}, {0, 7}, 7, 1}}}," in text


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape", [(256, 256, 128), (512, 256, 96)], ids=["256x256x128", "512x256x96"])
def test_dram_and_multicast_counters_equal_the_formula(arch, shape):
    """Per lattice row the sender reads A[by, :] once per block column of its rectangle (rect_w times); per lattice
    column B once per block row (rect_h times); C is written once. Each A block goes to cols - 1 receivers."""
    M, N, K = shape
    kernel = tilelang.compile(mcast_gemm(M, N, K), target=f"tt -arch={arch}")
    kernel.emulate(*[torch.zeros(*b["shape"], dtype=torch.bfloat16) for b in kernel.plan["buffers"]],
                   protocol_only=True)
    total = kernel.report["total"]
    rows, cols = kernel.plan["multicast"]["lattice"]
    rect_h, rect_w = kernel.plan["mapping"][0]["rect_h"], kernel.plan["mapping"][0]["rect_w"]
    mt, nt, kt = M // 32, N // 32, K // 32
    a_bytes, b_bytes = mt * kt * TILE_BYTES * rect_w, kt * nt * TILE_BYTES * rect_h
    assert total["dram_read_bytes"] == a_bytes + b_bytes
    assert total["dram_write_bytes"] == mt * nt * TILE_BYTES
    assert total["noc_multicast_bytes"] == a_bytes + b_bytes
    assert total["noc_multicast_dest_bytes"] == a_bytes * (cols - 1) + b_bytes * (rows - 1)
    # only lattice column 0 reads A, only lattice row 0 reads B
    for core in kernel.report["cores"]:
        y, x = core["core"]
        expect = (a_bytes // rows if x == 0 else 0) + (b_bytes // cols if y == 0 else 0)
        assert core["dram_read_bytes"] == expect, core["core"]


def _parallel_add(multicast):
    @T.prim_func
    def add(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            T.annotate_tt_schedule(multicast=multicast)
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] + B[by * 32 + i, bx * 32 + j]

    return add


def test_multicast_true_without_shared_operand_is_an_error():
    """Every block an elementwise kernel reads depends on both the core's lattice row and column: multicast=True is
    refused with the construct, the lattice and the fix; the same kernel with multicast=False compiles and runs."""
    with pytest.raises(TTScheduleError) as info:
        tilelang.compile(_parallel_add(True), target="tt")
    err = info.value
    assert "multicast=True, but no block the reader reads is the same for a whole core row or column of the 2x2 " \
           "core lattice" in str(err)
    assert err.construct == "T.annotate_tt_schedule(multicast=True)" and "multicast=False" in err.fix
    kernel = tilelang.compile(_parallel_add(False), target="tt")
    assert "multicast" not in kernel.plan
    a, b, c = torch.randn(64, 64).bfloat16(), torch.randn(64, 64).bfloat16(), torch.zeros(64, 64).bfloat16()
    kernel(a, b, c)
    assert torch.equal(c, (a.float() + b.float()).bfloat16())


# ---- the sanitizer on broken handshakes (tests/tt/test_sanitizer.py's corpus form) --------------------------
# (id, file, text to replace, replacement, expected message regex)
CORPUS = [
    ("receiver_reads_before_valid", "kernels/reader.cpp",
     "noc_semaphore_wait(semaphore_ptr(mcast_A_blk.receiver_sem_addr), kSemValid);", "",
     r"reader \(RISCV_1\) kernel \S*kernels/reader.cpp:\d+: cb_push_back\(\d+, \d+\) publishes page \d+, which no NoC "
     r"transfer has written since cb_reserve_back: a multicast receiver must wait for the sender's VALID"),
    ("sender_overwrites_before_ready", "kernels/reader.cpp",
     "noc_semaphore_wait(semaphore_ptr(mcast_A_blk.sender_sem_addr), mcast_A_blk.num_dests);", "",
     r"noc_async_write_multicast from core \(x=\d+, y=\d+\) lands in L1 \[0x[0-9a-f]+, 0x[0-9a-f]+\) of core "
     r"\(x=\d+, y=\d+\), which that core has not reserved with cb_reserve_back: the sender overwrites it before the "
     r"receiver is ready"),
    ("reversed_corners", "kernels/dataflow_helpers.h", "return noc_index == 0 ?", "return noc_index != 0 ?",
     r"multicast rectangle start \(\d+, \d+\) end \(\d+, \d+\) on NOC\d: the corners are reversed for this NoC"),
    ("wrong_num_dests", "kernels/reader.cpp", "get_tile_size(cb_A_blk), mcast_A_blk.num_dests);",
     "get_tile_size(cb_A_blk), mcast_A_blk.num_dests + 1);",
     r"noc_async_write_multicast with num_dests = \d+, but the rectangle .* holds \d+ cores besides the sender"),
]


@pytest.fixture(scope="module")
def mcast_kernel():
    return tilelang.compile(mcast_gemm(128, 128, 128), target="tt -arch=wormhole_b0")


def _inputs(kernel):
    torch.manual_seed(0)
    return {b["param_index"]: torch.randn(*b["shape"]).to(torch.bfloat16) for b in kernel.plan["buffers"]}


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_sanitizer_catches_broken_handshake(case, tmp_path, mcast_kernel):
    name, rel, old, new, message = case
    broken = broken_copy(mcast_kernel.artifact_dir, tmp_path / "artifact", rel, old, new)
    with pytest.raises(TTSimError, match=message):
        emulator.run(broken, mcast_kernel.plan, _inputs(mcast_kernel), timeout_s=120)


def test_unbroken_mcast_artifact_runs_clean(mcast_kernel):
    """The corpus's artifact as generated: the sanitizer stays silent and C is the unicast kernel's, bit for bit."""
    tensors = _inputs(mcast_kernel)
    emulator.run(mcast_kernel.artifact_dir, mcast_kernel.plan, tensors)
    unicast = tilelang.compile(mcast_gemm(128, 128, 128, multicast=False), target="tt -arch=wormhole_b0")
    c_uc = torch.zeros(128, 128, dtype=torch.bfloat16)
    unicast(tensors[0], tensors[1], c_uc)
    assert torch.equal(tensors[2], c_uc)


@pytest.mark.skipif(os.environ.get("TILELANG_TT_REAL_CHECK") == "0", reason="real-header check disabled")
@pytest.mark.parametrize("arch", ARCHS)
def test_mcast_artifacts_pass_the_real_header_check(arch):
    from tilelang_tt.realcheck import check_artifact

    kernel = tilelang.compile(mcast_gemm(160, 96, 100), target=f"tt -arch={arch}")
    result = check_artifact(Path(kernel.artifact_dir))
    assert result.ok, result


def test_static_model_counts_equal_the_counters():
    """perf_model's static walk of tt.program.txt knows that only a group's sender reads from DRAM."""
    from tilelang_tt import perf_model as pm

    kernel = tilelang.compile(mcast_gemm(256, 256, 128), target="tt -arch=wormhole_b0")
    kernel.emulate(*[torch.zeros(*b["shape"], dtype=torch.bfloat16) for b in kernel.plan["buffers"]],
                   protocol_only=True)
    static = {w.core: w for w in pm.static_work(Path(kernel.artifact_dir), kernel.plan)}
    for core in kernel.report["cores"]:
        w = static[tuple(core["core"])]
        assert (w.dram_read_bytes, w.dram_write_bytes) == (core["dram_read_bytes"], core["dram_write_bytes"])
        assert w.ops["matmul_tiles"] == core["matmul_tiles"]


# ---- the verifier's multicast rule: the handshake is TT program operations it reads ----------------------------
def _mcast_program(arch):
    from tilelang_tt.kernel_context import KernelContext
    from tilelang_tt.pipeline import build_program

    from .helpers import lower

    func, opts = lower(mcast_gemm(128, 128, 128), arch=arch)
    return build_program(func, KernelContext(func, opts), opts)


def _branches(body):
    """The reader's role branches (For nodes with a guard), in program order."""
    from tilelang_tt.ttir import For, walk

    return [n for n, _ in walk(body) if isinstance(n, For) and n.guard is not None]


def _drop(body, node):
    from tilelang_tt.ttir import For

    for i, n in enumerate(body):
        if n is node:
            del body[i]
            return True
        if isinstance(n, For) and _drop(n.body, node):
            return True
    return False


def _swap_wait_and_write(p):
    ops = _branches(p.kernels["reader"].body)[2].body      # the first multicast read's sender branch
    i, j = [k for k, c in enumerate(ops) if c.op in ("mcast_wait_ready", "mcast_write_block")]
    ops[i], ops[j] = ops[j], ops[i]


def _drop_receivers(p):
    _drop(p.kernels["reader"].body, _branches(p.kernels["reader"].body)[3])


def _drop_hold(p):
    _drop(p.kernels["reader"].body, _branches(p.kernels["reader"].body)[0])


def _drop_flush(p):
    ops = _branches(p.kernels["reader"].body)[2].body
    ops.remove(next(c for c in ops if c.op == "noc_async_writes_flushed"))


def _more_tiles(p):
    from tilelang_tt.ttir import Call

    ops = _branches(p.kernels["reader"].body)[2].body
    k = next(k for k, c in enumerate(ops) if c.op == "mcast_write_block")
    ops[k] = Call("mcast_write_block", (ops[k].args[0], ops[k].args[1], ops[k].args[2] + 1), ops[k].note)


def _receiver_as_sender(p):
    """The receivers' branch marked as the sender's (the guard's text unchanged): the verifier reads the branch's
    role from the program's structure (For.branch), never from a runtime argument's name."""
    from tilelang_tt.ttir import For

    body = p.kernels["reader"].body
    receiver = _branches(body)[3]
    group, _ = receiver.branch
    swapped = For(receiver.var, receiver.min, receiver.extent, receiver.body, receiver.note, receiver.persistent,
                  receiver.guard, (group, True))

    def replace(nodes):
        for i, n in enumerate(nodes):
            if n is receiver:
                nodes[i] = swapped
                return True
            if isinstance(n, For) and replace(n.body):
                return True
        return False

    assert replace(body)


def _drop_atomic_barrier(p):
    p.kernels["reader"].body.pop()


@pytest.mark.parametrize("arch, breaks, message", [
    ("wormhole_b0", _swap_wait_and_write, r"mcast_A_blk's sender runs \['read_tiles', 'noc_async_read_barrier', "
                                          r"'mcast_write_block', 'mcast_reset_ready', 'mcast_wait_ready'"),
    ("wormhole_b0", _drop_receivers, r"a multicast by the sender of mcast_A_blk is not followed by its receivers'"),
    ("wormhole_b0", _drop_hold, r"mcast_A_blk's sender does not hold VALID before its first multicast"),
    ("blackhole", _drop_flush, r"'mcast_write_block', 'mcast_set_valid'\], not \[.*'mcast_write_block', "
                               r"'noc_async_writes_flushed', 'mcast_set_valid'\]"),
    ("wormhole_b0", _more_tiles, r"mcast_A_blk's sender multicasts .* tile\(s\) of A_blk, not the"),
    ("wormhole_b0", _drop_atomic_barrier, r"the reader does not end with noc_async_atomic_barrier"),
    ("wormhole_b0", _receiver_as_sender, r"a multicast by the sender of mcast_A_blk is not followed by its receivers'"),
], ids=["wait_after_write", "no_receivers", "no_hold", "no_flush_on_blackhole", "wrong_tile_count",
        "no_atomic_barrier", "receiver_marked_sender"])
def test_verifier_checks_the_multicast_handshake(arch, breaks, message):
    """Each seeded break of the generated handshake is refused by VerifyTTProgram's multicast rule, naming it; the
    program as generated passes (it was verified when it was built)."""
    from tilelang_tt.device import get_device
    from tilelang_tt.errors import TTVerifyError
    from tilelang_tt.transform.verify_program import verify_program

    program, dev = _mcast_program(arch), get_device(arch)
    verify_program(program, dev.l1_usable_bytes, dev.num_cbs, dev.mcast_flush_before_flag)
    breaks(program)
    with pytest.raises(TTVerifyError, match=message) as info:
        verify_program(program, dev.l1_usable_bytes, dev.num_cbs, dev.mcast_flush_before_flag)
    assert info.value.rule == "multicast"
