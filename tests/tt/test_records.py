"""The typed records the TIR passes hand on (records.py): what a pass wrote is what later passes, the codegen and
the plan read, field by field; a record refuses fields it does not have and needs the ones it has."""

import pytest

from examples import kernels as K
from tilelang_tt import records
from tilelang_tt.codegen import generate

from .helpers import lower


def test_schedule_and_super_block_read_back_as_the_plan_prints_them():
    lowered, opts = lower(K.tilelang_example_gemm(512, 512, 512))
    plan = generate(lowered, opts).plan
    sched = records.schedule(lowered)
    assert sched.policy == plan["policy"] == "rect" and sched.multicast is True
    assert sched.num_cores == len(plan["mapping"]) == len(sched.cores)
    assert [list(c) for c in sched.cores] == [m["core"] for m in plan["mapping"]]
    fused = records.super_block(lowered)
    assert fused.as_dict() == plan["super_block"]
    assert fused.multicast in ("annotation", "target", "automatic")
    assert records.sdpa(lowered) is None and "sdpa" not in plan


def test_cb_table_reads_back_as_the_plan_prints_it():
    """Each CB's record (MemorySpaceLowerTT, TensorizeTT, StreamBandsTT) is what the plan's CB list says."""
    lowered, opts = lower(K.tilelang_example_gemm(512, 512, 512))
    table = records.cbs(lowered)
    plan = {c["name"]: c for c in generate(lowered, opts).plan["cbs"]}
    assert set(plan) <= set(table)
    for name, c in plan.items():
        cb = table[name]
        assert (cb.index, cb.format, cb.page_size, cb.num_pages, cb.role) == \
            (c["index"], c["format"], c["page_size"], c["num_pages"], c["role"])
        assert cb.bytes == cb.num_pages * cb.page_size and cb.num_pages == cb.depth_blocks * cb.block_tiles
    acc = next(cb for cb in table.values() if cb.accumulate is not None)
    assert acc.role == "intermediate" and acc.residency in ("dst", "cb") and len(acc.subblock) == 2
    assert records.cbs(K.tilelang_example_gemm(64, 64, 64)) == {}      # not lowered: no table
    with pytest.raises(TypeError, match="band"):
        records.CircularBuffer(**{**acc.as_dict(), "bands": 2})


def test_padding_and_shards_of_a_tensor_that_is_not_whole_tiles():
    lowered, opts = lower(K.elementwise_add(M=48, N=80, block_M=32, block_N=32))
    pad = records.padding(lowered, "A")
    assert pad.logical == [48, 80] and pad.view == [48, 80] and pad.padded == [64, 96]
    assert not pad.is_whole_tiles and pad.row_pad is None
    assert records.padding(lowered, "no_such_tensor") is None
    shard = records.shard(lowered, "A")
    assert (shard.placement, shard.layout, shard.format) == ("DRAM", "interleaved", None)
    buf = next(b for b in generate(lowered, opts).plan["buffers"] if b["name"] == "A")
    assert buf["padded_shape"] == pad.padded and buf["shard"]["placement"] == shard.placement


def test_sdpa_record_carries_the_attention_split():
    lowered, _ = lower(K.flash_attention(seq_q=256, seq_kv=256))
    rec = records.sdpa(lowered)
    assert rec.head_dim_tiles == 2 and rec.mask == "none" and rec.causal is False
    assert records.schedule(lowered).num_cores >= 1


def test_a_record_refuses_unknown_and_missing_fields():
    with pytest.raises(TypeError, match=r"SuperBlock has no field\(s\) \['factors'\]"):
        records.SuperBlock(factors=[1, 1], k_steps=1, block=[64, 64], grid=[4, 4], multicast="target")
    with pytest.raises(TypeError, match=r"Padding needs \['padded'\]"):
        records.Padding(logical=[32, 32], view=[32, 32])
    assert records.Padding(logical=[32, 32], view=[32, 32], padded=[32, 32]).is_whole_tiles


def test_compute_record_is_resolved_once_and_completed_by_tensorize():
    """The compute configuration (annotation > target option > ttnn default) is one record: the pipeline writes it,
    TensorizeTT fills in the DST mode, the plan reads it."""
    import tilelang.language as T

    @T.prim_func
    def scale(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, threads=128) as by:
            T.annotate_tt_compute(math_fidelity="HiFi3")
            for i, j in T.Parallel(32, 64):
                C[by * 32 + i, j] = A[by * 32 + i, j] * 2.0

    lowered, opts = lower(scale, max_cores=2)
    config = records.compute(lowered)
    assert (config.math_fidelity, config.math_fidelity_source) == ("HiFi3", "T.annotate_tt_compute")
    assert config.fp32_dest_acc in (True, False) and config.allow_tf32 is False
    plan = generate(lowered, opts).plan
    assert plan["kernels"]["compute"]["math_fidelity"] == "HiFi3"
    assert plan["kernels"]["compute"]["fp32_dest_acc_en"] == config.fp32_dest_acc
    assert records.compute(lower(K.elementwise_add(), math_fidelity="LoFi")[0]).math_fidelity_source == "target option"


def test_row_stream_record_is_the_plans():
    lowered, opts = lower(K.softmax(64, 32768, 32, "float32"))
    stream = records.row_stream(lowered)
    assert stream.width == 32768 and stream.sweeps == 3
    assert generate(lowered, opts).plan["row_stream"] == stream.as_dict()


def test_mesh_and_host_unpack_records_are_the_plans():
    """MeshSplitTT's split and UnpackWeightsTT's tables reach the plan through their records."""
    from tilelang_tt.target import make_options

    lowered, _ = lower(K.design_gemm(256, 128, 128), mesh="1x2")
    split = records.mesh(lowered)
    assert (split.shape, split.chips, split.per_chip * split.chips) == ([1, 2], 2, split.grid_extent)
    assert split.chip_blocks == [[0, split.per_chip], [split.per_chip, split.per_chip]]
    assert make_options(mesh="1x2").mesh == (1, 2)

    from examples import dequant_kernels as D

    lowered, opts = lower(D.dequant_gemm_int4(128, 128, 128, "uint", True, storage_dtype="uint8"))
    unpack = records.host_unpack(lowered, "B")
    assert (unpack.shape, unpack.dtype, unpack.factor) == ([128, 64], "uint8", 2)
    buf = next(b for b in generate(lowered, opts).plan["buffers"] if b["name"] == "B")
    assert buf["host_unpack"] == unpack.as_dict()
