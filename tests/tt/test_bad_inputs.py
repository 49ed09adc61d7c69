"""A corpus of bad inputs: malformed annotations, impossible configurations, unsupported kernels, hostile names.

Every case must raise one of our exception types with the key words of its message, through the public
entry point (``tilelang.compile``), within a time bound, and leave no artifact directory (or half of one)
behind. Hostile names must compile into C++, file names and commands where they appear only sanitized.
"""

import re
import signal

import pytest
import tilelang
import tilelang.language as T
import torch
from tvm import tirx

from examples import kernels as K
from tilelang_tt.errors import (TTAnnotationError, TTError, TTScheduleError, TTShapeError, TTTargetError,
                                TTUnsupportedError, TTLoweringError)


# ---- kernel builders ----------------------------------------------------------------------------------
def eltwise(body=None, M=64, N=64, dtype="float32", grid=(2, 2), annotate=None, threads=128):
    fn = body if body is not None else (lambda a, b: a + b)

    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(grid[0], grid[1], threads=threads) as (bx, by):
            if annotate is not None:
                annotate(A, B, C)
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = fn(A[by * 32 + i, bx * 32 + j], B[by * 32 + i, bx * 32 + j])
    return k


def gemm(block=32, M=64, N=64, K_=64, fp="bfloat16", n_shared=0, gemm_kwargs=None):
    @T.prim_func
    def g(A: T.Tensor((M, K_), fp), B: T.Tensor((K_, N), fp), C: T.Tensor((M, N), fp)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block), fp)
            B_s = T.alloc_shared((block, block), fp)
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K_, block)):
                T.copy(A[by * block, k * block], A_s)
                T.copy(B[k * block, bx * block], B_s)
                T.gemm(A_s, B_s, C_l, **(gemm_kwargs or {}))
            T.copy(C_l, C[by * block, bx * block])
    return g


def many_buffers(n, tmp_dir):
    """A kernel copying a tile through n shared buffers (TileLang needs real source, so it is written to a file)."""
    import importlib.util

    lines = ["import tilelang.language as T", "@T.prim_func",
             "def k(A: T.Tensor((32, 32), 'float32'), C: T.Tensor((32, 32), 'float32')):",
             "    with T.Kernel(1, 1, threads=128) as (bx, by):"]
    lines += [f"        S{i} = T.alloc_shared((32, 32), 'float32')" for i in range(n)]
    lines.append("        T.copy(A[0, 0], S0)")
    lines += [f"        T.copy(S{i - 1}, S{i})" for i in range(1, n)]
    lines.append(f"        T.copy(S{n - 1}, C[0, 0])")
    path = tmp_dir / f"many_buffers_{n}.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


def schedule(**kw):
    return eltwise(annotate=lambda A, B, C: T.annotate_tt_schedule(**kw), M=128, N=128, grid=(4, 4))


def sharding(fn):
    return eltwise(annotate=lambda A, B, C: T.annotate_tt_sharding(fn(A, B, C)))


def no_grid():
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float32")):
        for i in T.serial(32):
            A[i, 0] = 1.0
    return k


def cumsum():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "float32")
            T.copy(A[by * 32, bx * 32], A_s)
            T.cumsum(A_s, dim=1)
            T.copy(A_s, C[by * 32, bx * 32])
    return k


def thread_dependent():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=32) as (bx, by):
            tx = T.get_thread_binding(0)
            A[by * 32 + tx, bx * 32] = 0.0
    return k


def atomic():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                T.atomic_max(C[by * 32 + i, bx * 32 + j], A[by * 32 + i, bx * 32 + j])
    return k


def data_dependent_if():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            if A[by * 32, bx * 32] > 0:
                for i, j in T.Parallel(32, 32):
                    C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j]
    return k


def indirect():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), I: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[T.Cast("int32", I[by * 32 + i, 0]), bx * 32 + j]
    return k


def scalar_store():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            s = T.alloc_fragment((32, 32), "float32")
            T.clear(s)
            s[3, 4] = 1.0
            T.copy(s, A[by * 32, bx * 32])
    return k


def vector_both_ways():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), v: T.Tensor((64,), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] + v[by * 32 + i] * v[bx * 32 + j]
    return k


def dynamic_shape(schedule=None):
    M = T.dynamic("M")

    @T.prim_func
    def k(A: T.Tensor((M, 64), "float32"), C: T.Tensor((M, 64), "float32")):
        with T.Kernel(2, T.ceildiv(M, 32), threads=128) as (bx, by):
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j]
    return k


def dynamic_expression_dim():
    M = T.dynamic("M")

    @T.prim_func
    def k(A: T.Tensor((M * 2, 64), "float32"), C: T.Tensor((M * 2, 64), "float32")):
        with T.Kernel(2, T.ceildiv(M * 2, 32), threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j]
    return k


def transposed_index():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            for i, j in T.Parallel(16, 16):
                C[by * 16 + i, bx * 16 + j] = A[bx * 16 + j, by * 16 + i]
    return k


def misplaced_rows():
    """Two one-row blocks from different rows of their tiles combined element-wise."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(63, threads=128) as bx:
            a = T.alloc_shared((1, 64), "float32")
            b = T.alloc_shared((1, 64), "float32")
            c = T.alloc_fragment((1, 64), "float32")
            T.copy(A[bx, 0], a)
            T.copy(A[bx + 1, 0], b)
            for i, j in T.Parallel(1, 64):
                c[i, j] = a[i, j] + b[i, j]
            T.copy(c, C[bx, 0])
    return k


def debug_print():
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((32, 32), "float32")
            T.copy(A[0, 0], a)
            T.print(a)
            T.copy(a, C[0, 0])
    return k


def thread_indexed_store():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            C[tx] = A[tx] * 2.0
    return k


def fragment_written_past_its_end():
    """TileLang's attention-sink backward examples fill ``sinks = T.alloc_fragment([heads])`` over block_M rows."""
    @T.prim_func
    def k(S: T.Tensor((8,), "float32"), A: T.Tensor((64, 64), "float32"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 8, threads=128) as (bx, by):
            a = T.alloc_fragment((64, 64), "float32")
            sinks = T.alloc_fragment([8], "float32")
            T.copy(A[0, 0], a)
            for i in T.Parallel(64):
                sinks[i] = S[by]
            for i, j in T.Parallel(64, 64):
                a[i, j] = a[i, j] + sinks[i]
            T.copy(a, O[0, 0])
    return k


# (id, make kernel (called inside pytest.raises when it must fail at build time), target, exception, message)
CASES = [
    # GPU-thread constructs: named, never reported as something else
    ("t_print", debug_print, {}, TTUnsupportedError,
     r"T.print: T.print has no TT lowering.*fix: remove the T.print; to look at a buffer, T.copy it to an extra output"),
    ("thread_indexed_store", thread_indexed_store, {}, TTUnsupportedError,
     r"C\[tx\] = A\[tx\] \* T.float32\(2.0\): the kernel body reads threadIdx"),
    # malformed annotations
    ("schedule_bad_policy", lambda: schedule(policy="zigzag"), {}, TTAnnotationError,
     r"policy='zigzag' is not one of \['contiguous', 'strided', 'rect'\]"),
    ("schedule_bad_order", lambda: schedule(order="col_major"), {}, TTAnnotationError,
     r"order='col_major' is not 'row_major' or 'block_linear\(k\)'"),
    ("schedule_block_linear_zero", lambda: schedule(order="block_linear(0)"), {}, TTAnnotationError,
     r"block_linear\(k\) needs k >= 1"),
    ("schedule_rect_arity", lambda: schedule(policy="rect", rect=(0, 0, 2)), {}, TTAnnotationError,
     r"rect must be a tuple of 4 integers"),
    ("schedule_rect_zero", lambda: schedule(policy="rect", rect=(0, 0, 0, 2)), {}, TTAnnotationError,
     r"rect\[2\] must be positive, got 0"),
    ("schedule_stride_zero", lambda: schedule(policy="strided", stride=(0, 0)), {}, TTAnnotationError,
     r"stride\[1\] must be positive, got 0"),
    ("schedule_rect_without_policy", lambda: schedule(rect=(0, 0, 2, 2)), {}, TTAnnotationError,
     r"rect= is only meaningful with policy='rect'"),
    ("schedule_stride_without_policy", lambda: schedule(stride=(0, 2)), {}, TTAnnotationError,
     r"stride= is only meaningful with policy='strided'"),
    ("schedule_chunk_negative", lambda: schedule(chunk_k_tiles=-1), {}, TTAnnotationError,
     r"chunk_k_tiles must be a positive integer or None, got -1"),
    ("schedule_qk_chunk_type", lambda: schedule(qk_chunk_tiles=2.5), {}, TTAnnotationError,
     r"qk_chunk_tiles must be a positive integer or None, got 2.5"),
    ("shard_bad_placement", lambda: sharding(lambda A, B, C: {A: T.TTShard(placement="HBM")}), {},
     TTAnnotationError, r"placement='HBM' is not one of \['DRAM', 'L1'\]"),
    ("shard_bad_tiles", lambda: sharding(lambda A, B, C: {A: T.TTShard(tiles=("rows", 16))}), {},
     TTAnnotationError, r"tiles=\('rows', 16\) must look like"),
    ("shard_negative_axis", lambda: sharding(lambda A, B, C: {A: T.TTShard(axis=-1)}), {}, TTAnnotationError,
     r"axis=-1 must be a non-negative int"),
    ("shard_bad_faces", lambda: sharding(lambda A, B, C: {A: T.TTShard(faces="8x8")}), {}, TTAnnotationError,
     r"faces='8x8' is not one of \['16x16'\]"),
    ("shard_not_a_dict", lambda: sharding(lambda A, B, C: [T.TTShard()]), {}, TTAnnotationError,
     r"expected a dict \{buffer: T.TTShard\(...\)\}, got list"),
    ("shard_key_not_buffer", lambda: sharding(lambda A, B, C: {"A": T.TTShard()}), {}, TTAnnotationError,
     r"key 'A' is not a buffer"),
    ("shard_value_not_ttshard", lambda: sharding(lambda A, B, C: {A: "DRAM"}), {}, TTAnnotationError,
     r"value for A is str, not T.TTShard"),
    ("shard_axis_out_of_range", lambda: sharding(lambda A, B, C: {A: T.TTShard(axis=(0, 2))}), {},
     TTAnnotationError, r"axis \[0, 2\] is out of range for A of rank 2"),
    ("shard_col_major", lambda: sharding(lambda A, B, C: {B: T.TTShard(order="col_major")}), {},
     TTUnsupportedError, r"tile order 'col_major' for B"),
    ("shard_l1_too_big", lambda: eltwise(annotate=lambda A, B, C: T.annotate_tt_sharding(
        {A: T.TTShard(placement="L1")}), M=1024, N=1024, grid=(1, 1)), {}, TTAnnotationError,
     r"A \(4194304 bytes\) placed in L1 does not fit half the L1 of the 1 cores"),
    # impossible configurations
    ("strided_leaves_blocks", lambda: schedule(policy="strided", stride=(3, 16)), {}, TTScheduleError,
     r"blocks are never visited, e.g. \(by=0, bx=0\)"),
    ("strided_gaps", lambda: schedule(policy="strided", stride=(0, 20)), {"max_cores": 4}, TTScheduleError,
     r"12 of 16 blocks are never visited"),   # 4 cores, step 20 > 16 blocks: one block each
    ("rect_origin_outside", lambda: schedule(policy="rect", rect=(9, 0, 2, 2)), {}, TTScheduleError,
     r"rect origin \(9, 0\) lies outside the 4x4 block grid"),
    ("rect_too_many", lambda: schedule(policy="rect", rect=(0, 0, 1, 1)), {"max_cores": 8}, TTScheduleError,
     r"16 rectangles of 1x1 blocks are needed but only 8 cores are usable"),
    ("l1_budget", lambda: gemm(block=512, M=1024, N=1024, K_=1024, fp="float32"), {}, TTUnsupportedError,
     r"circular buffers need \d+ bytes of L1 per core, more than the 1393312 bytes a kernel can use on wormhole_b0"),
    ("too_many_cbs", lambda tmp: many_buffers(40, tmp), {}, TTUnsupportedError,
     r"more than 32 circular buffers are needed.*wormhole_b0 has 32 CBs"),
    ("block_not_whole_tiles", lambda: gemm(block=48, M=96, N=96, K_=96), {}, TTShapeError,
     r"tile buffer A_s has shape \[48, 48\]: an extent above 32 that is not a multiple of 32 makes blocks straddle "
     r"32x32 tiles.*fix: use 32 or 64"),
    ("max_cores_zero", lambda: K.elementwise_add(64, 64), {"max_cores": 0}, TTTargetError,
     r"max_cores must be a positive integer, got 0"),
    ("max_cores_beyond_device", lambda: K.elementwise_add(64, 64), {"max_cores": 65}, TTTargetError,
     r"max_cores=65 exceeds the 64 cores of wormhole_b0 \(8x8\)"),
    ("unknown_arch", lambda: K.elementwise_add(64, 64), {"arch": "grayskull"}, TTTargetError,
     r"unknown arch 'grayskull'"),
    ("unknown_option", lambda: K.elementwise_add(64, 64), {"cores": 4}, TTTargetError, r"unknown option 'cores'"),
    ("bad_fidelity", lambda: K.elementwise_add(64, 64), {"math_fidelity": "HiFi5"}, TTTargetError,
     r"unknown math fidelity 'HiFi5'"),
    # unsupported kernels
    ("no_grid", no_grid, {}, TTLoweringError, r"no T.Kernel grid \(no loop bound to blockIdx.x/y\) found"),
    ("cumsum", cumsum, {}, TTUnsupportedError, r"tile operator tl.tileop.cumsum has no TT lowering"),
    ("thread_index", thread_dependent, {}, TTUnsupportedError, r"the kernel body reads threadIdx"),
    ("atomics", atomic, {}, TTUnsupportedError,
     r"tl\.atomic_max_elem_op: of the atomic operations only T\.atomic_add has a TT lowering"),
    ("data_dependent_if", data_dependent_if, {}, TTUnsupportedError,
     r"an if on the values of A \(float32, tensor\).*fix: branch on elements of int32 tensors"),
    ("indirect_indexing", indirect, {}, TTUnsupportedError, r"indirect \(data-dependent\) indexing of A through I"),
    ("scalar_store", scalar_store, {}, TTUnsupportedError, r"a scalar store outside T.Parallel"),
    ("fragment_written_past_its_end", fragment_written_past_its_end, {}, TTUnsupportedError,
     r"sinks\[i, 0\] reaches index 63 of an axis of 8 elements \(the T.Parallel loop over i runs 64 times; sinks is "
     r"declared \[8, 1\]\): out of bounds.*fix: declare sinks with the loop's extent \(64 along that axis\)"),
    ("misplaced_sub_tile_operands", misplaced_rows, {}, TTUnsupportedError,
     r"b sits at row \(bx \+ 1\) % 32 of its tiles but c at bx % 32: element-wise operands smaller than a tile "
     r"must share their place in the tile"),
    ("transposed_sub_tile", transposed_index, {}, TTUnsupportedError,
     r"A\[.*\] is indexed transposed over a block smaller than whole tiles"),
    ("unsupported_function", lambda: eltwise(lambda a, b: T.floor(a)), {}, TTUnsupportedError,
     r"elementwise function tirx.floor has no TT tile intrinsic"),
    ("float64", lambda: K.elementwise_add(64, 64, "float64"), {}, TTUnsupportedError,
     r"dtype 'float64' has no supported TT data format"),
    ("int32", lambda: K.elementwise_add(64, 64, "int32"), {}, TTUnsupportedError,
     r"the integer `A\[by \* 32 \+ i, bx \* 32 \+ j\] \+ B\[by \* 32 \+ i, bx \* 32 \+ j\]` is computed on tiles in "
     r"float32, and may reach 33554430 in magnitude: exact only below 2\^24.*fix: keep integer values"),
    ("vector_both_orientations", vector_both_ways, {}, TTUnsupportedError,
     r"1-D buffer v is used both as a per-row vector and as a per-column vector"),
    ("symbolic_grid_with_rect", lambda: dynamic_shape(dict(policy="rect")), {}, TTScheduleError,
     r"policy 'rect' needs a grid known at compile time; this grid depends on symbolic shapes \(M\)"),
    ("symbolic_dim_expression", dynamic_expression_dim, {}, TTUnsupportedError,
     r"dimension M \* 2 of A is an expression of symbolic shapes"),
    ("tensorize_off", lambda: K.design_gemm(64, 64, 64), {"tensorize": False}, TTUnsupportedError,
     r"was not tensorized \(tensorize=False\) and the TT backend has no scalar fallback"),
]


@pytest.fixture(autouse=True)
def time_bound():
    def alarm(signum, frame):
        raise TimeoutError("a bad input took more than 120 s: it must fail fast")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_corpus_is_large_enough():
    assert len(CASES) + len(HOSTILE) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, artifact_root, tmp_path):
    name, make, target, exc, message = case
    with pytest.raises(exc, match="(?s)" + message) as info:
        func = make(tmp_path) if make.__code__.co_argcount == 1 else make()
        tilelang.compile(func, target={"kind": "tt", **target})
    assert isinstance(info.value, TTError)
    assert "Traceback" not in str(info.value)
    assert not artifact_root.exists() or not any(artifact_root.iterdir()), "an artifact was left behind"


# ---- hostile names -----------------------------------------------------------------------------------
def rename(func, names: dict[str, str], symbol: str | None = None):
    """The same kernel with its buffers (and global symbol) renamed."""
    new = {}

    def renamed(buf):
        if buf.name not in names:
            return buf
        if buf.name not in new:
            new[buf.name] = tirx.decl_buffer(buf.shape, buf.dtype, names[buf.name], data=buf.data, strides=buf.strides,
                                             elem_offset=buf.elem_offset, scope=buf.scope(),
                                             data_alignment=buf.data_alignment, offset_factor=buf.offset_factor,
                                             axis_separators=buf.axis_separators)
        return new[buf.name]

    def post(node):
        if isinstance(node, tirx.BufferLoad):
            return tirx.BufferLoad(renamed(node.buffer), node.indices)
        if isinstance(node, tirx.BufferStore):
            return tirx.BufferStore(renamed(node.buffer), node.value, node.indices)
        if isinstance(node, tirx.SBlock):
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               [renamed(b) for b in node.alloc_buffers], node.match_buffers, node.annotations)
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.BufferLoad", "tirx.BufferStore", "tirx.SBlock"])
    buffer_map = {p: renamed(b) for p, b in func.buffer_map.items()}
    out = tirx.PrimFunc(func.params, body, func.ret_type, buffer_map, func.attrs, func.span)
    return out.with_attr("global_symbol", symbol) if symbol else out


HOSTILE = [
    'quote"name', "new\nline", "semi;colon", "$(rm -rf /)", "../../etc/passwd", "back\\slash",
    "sp ace", "uni\u00e9code", "count", "int",
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=[repr(h) for h in HOSTILE])
def test_hostile_names_never_reach_cpp_paths_or_shells(hostile, artifact_root):
    func = rename(K.fused_chain(64, 64), {"A": hostile, "A_s": hostile + "_s", "C_l": hostile}, symbol=hostile)
    kernel = tilelang.compile(func, target="tt")
    art = kernel.artifact_dir
    assert art.parent == artifact_root and re.fullmatch(r"[A-Za-z0-9_]+-[0-9a-f]{16}", art.name)
    for path in art.rglob("*"):
        assert re.fullmatch(r"[A-Za-z0-9_.]+", path.name), path
    for rel in ("kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp", "host.cpp"):
        text = (art / rel).read_text()
        code = re.sub(r"//[^\n]*", "", text)
        for bad in ('"name', "\nline", ";colon", "$(", "../", "\\slash", "sp ace", "\u00e9"):
            if bad in hostile or bad.strip() in hostile:
                assert bad not in re.sub(r'#include "[^"]*"', "", code), (rel, bad)
        for line in text.splitlines():   # comments stay one line, ASCII, with no line-continuation backslash
            assert line.isascii() and not line.rstrip().endswith("\\"), (rel, line)
    a = torch.randn(64, 64, dtype=torch.bfloat16)
    b = torch.randn(64, 64, dtype=torch.bfloat16)
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = torch.exp(a.float()) * b.float() + 1
    assert (c.float() - ref).abs().max() <= 4 * 2**-8 * ref.abs().max()
