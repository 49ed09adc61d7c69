"""The IR after each TT pass, for the GEMM and the elementwise kernel: structure and attributes."""

import pytest
import tvm
from tvm import tirx

from examples import kernels as K
from tilelang_tt import attrs, compute_config, records
from tilelang_tt.intrinsics import TTOps
from tilelang_tt.pipeline import passes
from tilelang_tt.target import make_options


def _stages(func, **options):
    opts = make_options(**options)
    mod = tvm.IRModule({"main": func})
    out = {}
    func = records.put_compute(mod["main"], records.Compute(**compute_config.resolve(mod["main"], opts)))
    for name, fn in passes(opts):
        func = fn(func)
        out[name] = func
    return out


def _collect(func, pred):
    found = []
    tirx.stmt_functor.post_order_visit(func.body, lambda n: found.append(n) if pred(n) else None)
    return found


def _tt_ops(func, op):
    return [c for c in _collect(func, lambda n: isinstance(n, tirx.Call) and n.op.same_as(op))]


def test_gemm_pipeline_stages():
    st = _stages(K.design_gemm(96, 64, 64), multicast=False)   # the contiguous split (no multicast lattice)
    g = st["GridToPersistentTT"]
    assert [p.name for p in g.params][-2:] == ["start_id", "count"]
    assert list(g.attrs[attrs.GRID]) == [3, 2]
    assert list(g.attrs[attrs.RUNTIME_ARGS]) == ["start_id", "count"]
    assert not _collect(g, lambda n: isinstance(n, tirx.For) and n.thread_binding is not None)
    loops = _collect(g, lambda n: isinstance(n, tirx.For) and attrs.PERSISTENT_LOOP in n.annotations)
    assert len(loops) == 1 and loops[0].extent.name == "count"
    binds = {b.var.name: b.value for b in _collect(g, lambda n: isinstance(n, tirx.Bind))}
    assert set(binds) == {"by", "bx"}
    # by/bx recovered from start_id + n (row-major over the 3x2 grid)
    for bid in range(6):
        vmap = {v: tirx.IntImm("int32", 0 if v.name == "n" else bid) for v in _collect(g, lambda n: isinstance(n, tirx.Var))}
        by = tvm.arith.Analyzer().simplify(tirx.stmt_functor.substitute(binds["by"], vmap))
        bx = tvm.arith.Analyzer().simplify(tirx.stmt_functor.substitute(binds["bx"], vmap))
        assert (int(by), int(bx)) == divmod(bid, 2)

    s = st["TTShardToCoreMap"]
    assert [[list(c) for c in r] for r in s.attrs[attrs.CORE_RANGES]] == [[[0, 0], [0, 5]]]
    assert str(s.attrs[attrs.SHARDS]["A"]["placement"]) == "DRAM"

    m = st["MemorySpaceLowerTT"]
    cb = records.cbs(m)
    assert {k: v.index for k, v in cb.items()} == {"A_blk": 0, "B_blk": 1, "C_acc": 24, "C_acc_out": 16}
    assert cb["A_blk"].num_pages == 2 and cb["A_blk"].page_size == 2048
    assert not _collect(m, lambda n: isinstance(n, tirx.SBlock))
    reads = _tt_ops(m, TTOps.read_block)
    assert [int(c.args[0]) for c in reads] == [0, 1]
    writes = _tt_ops(m, TTOps.write_block)
    assert [int(c.args[0]) for c in writes] == [16]

    t = st["TensorizeTT"]
    assert bool(t.attrs[attrs.TENSORIZED])
    mm = _tt_ops(t, TTOps.matmul)
    assert len(mm) == 1 and [int(a) for a in mm[0].args[:3]] == [0, 1, 24]
    assert records.cbs(t)["C_acc"].residency == "dst"
    assert not _collect(t, lambda n: isinstance(n, tirx.Call) and str(n.op.name).startswith("tl.tileop."))


def test_tilelang_example_gemm_uses_subblocked_accumulator():
    t = _stages(K.tilelang_example_gemm(256, 256, 64), multicast=False)["TensorizeTT"]   # the user's blocks
    cb = records.cbs(t)
    assert cb["C_local"].residency == "cb"
    sh, sw = cb["C_local"].subblock
    assert sh * sw <= 4 and 4 % sh == 0 and 4 % sw == 0        # fp32 accumulation: DST holds 4 tiles
    assert cb["A_shared"].depth_blocks == 3                      # num_stages=3
    mm = _tt_ops(t, TTOps.matmul)
    assert bool(mm[0].args[4])                                   # transpose_B


def test_elementwise_staging_and_tensorize():
    st = _stages(K.elementwise_add(64, 96, "float32"))
    m = st["MemorySpaceLowerTT"]
    assert sorted(records.cbs(m)) == ["A_tile", "B_tile", "C_out"]
    assert [int(c.args[1]) for c in _tt_ops(m, TTOps.read_block)] == [0, 1]
    assert [int(c.args[1]) for c in _tt_ops(m, TTOps.write_block)] == [2]
    t = st["TensorizeTT"]
    elt = _tt_ops(t, TTOps.eltwise)
    assert len(elt) == 1 and isinstance(elt[0].args[1], tirx.Add)
    assert not _collect(t, lambda n: isinstance(n, tirx.For) and n.kind == tirx.ForKind.PARALLEL)


def test_tensorize_disabled_keeps_tile_ops():
    st = _stages(K.design_gemm(64, 64, 64), tensorize=False)
    assert "TensorizeTT" not in st
    assert _collect(st["MemorySpaceLowerTT"], lambda n: isinstance(n, tirx.Call) and n.op.name == "tl.tileop.gemm")


def test_dump_ir_env(tmp_path, monkeypatch):
    from tilelang_tt.pipeline import lower_module

    monkeypatch.setenv("TILELANG_TT_DUMP_IR", str(tmp_path))
    lower_module(tvm.IRModule({"main": K.elementwise_add(64, 64)}), make_options())
    names = sorted(p.name for p in (tmp_path / "main").iterdir())
    assert names == ["00_Input.py", "01_ForwardScalarsTT.py", "02_InlineIndexLetsTT.py", "03_CopiedElementsTT.py",
                     "04_CopyWindowsTT.py", "05_GlobalOrderTT.py", "06_TileIntRangeTT.py", "07_MergeBranchesTT.py",
                     "08_PredicateParallelTT.py", "09_ParallelFissionTT.py", "10_ColumnReadsTT.py",
                     "11_InterleavedColumnsTT.py", "12_UnpackWeightsTT.py", "13_SDPAFusionTT.py", "14_SuperBlockTT.py",
                     "15_RowStreamTT.py", "16_GridToPersistentTT.py", "17_TTShardToCoreMap.py", "18_TilePadTT.py",
                     "19_StoreCopiesTT.py", "20_Float16OperandsTT.py", "21_MemorySpaceLowerTT.py",
                     "22_TensorizeTT.py", "23_EliminateDeadValuesTT.py", "24_StreamBandsTT.py"]
    assert "tt_eltwise" in (tmp_path / "main" / "22_TensorizeTT.py").read_text()


def _gemm_in1s(func) -> list:
    calls = _collect(func, lambda n: isinstance(n, tirx.Call) and n.op.name == "tl.tileop.gemm")
    return [(c.args[1].args[0].buffer.name, str(c.args[1].args[0].buffer.dtype), bool(c.args[9])) for c in calls]


@pytest.mark.parametrize("dtype,options,want", [
    ("float16", {}, [("B_shared_hi", "bfloat16", False), ("B_shared_lo", "bfloat16", False)]),
    ("float16", {"allow_fp16_reduced": True}, [("B_shared", "float16", False)]),
    ("float16", {"math_fidelity": "HiFi2"}, [("B_shared", "float16", False)]),
    ("bfloat16", {}, [("B_shared", "bfloat16", False)])])
def test_float16_in1_is_split_into_two_gemms(dtype, options, want):
    """Float16OperandsTT: a float16 in1 at HiFi4 becomes two gemms on its bfloat16 parts, the second accumulating;
    an accepted 10-bit in1, a fidelity the user lowered and a bfloat16 in1 are left alone."""
    st = _stages(K.tilelang_example_gemm(128, 128, 64, dtype=dtype), **options)
    assert _gemm_in1s(st["Float16OperandsTT"]) == want
    split = records.compute(st["Float16OperandsTT"]).fp16_in1_split
    assert split == (["B_shared"] if len(want) == 2 else None)


def test_passes_also_run_under_tvm_pass_manager():
    from tilelang_tt.transform import GridToPersistentTT, MemorySpaceLowerTT, TilePadTT, TTShardToCoreMap

    opts = make_options(max_cores=3)
    mod = tvm.IRModule({"main": K.elementwise_add(64, 64)})
    seq = tvm.transform.Sequential([GridToPersistentTT(opts), TTShardToCoreMap(opts.device.grid_x, opts.device.l1_usable_bytes), TilePadTT(),
                                    MemorySpaceLowerTT(opts.device)])
    out = seq(mod)["main"]
    assert [int(m["count"]) for m in out.attrs[attrs.SCHEDULE]["mapping"]] == [2, 1, 1]
    assert sorted(records.cbs(out)) == ["A_tile", "B_tile", "C_out"]
