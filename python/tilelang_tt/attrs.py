"""The one registry of ``tt.*`` attribute keys.

Every PrimFunc / block attribute the TT backend reads or writes is named here; no other module spells
a ``"tt."`` key (a test enforces it).
"""

# User annotations, attached by tilelang_tt.language as block attributes of "tilelang_root".
SCHEDULE_ANNOTATION = "tt.schedule_annotation"
SHARDING_ANNOTATION = "tt.sharding_annotation"
COMPUTE_ANNOTATION = "tt.compute_annotation"      # T.annotate_tt_compute: math fidelity, fp32 accumulation
MESH_ANNOTATION = "tt.mesh_annotation"            # T.annotate_tt_mesh: the grid axis split across the chips

# PrimFunc attributes written by the passes.
SEQUENCE = "tt.sequence"              # SplitKernelsTT: one stage of a function of several T.Kernel launches
MESH = "tt.mesh"                      # MeshSplitTT: mesh shape, split axis, each tensor's distribution
HOST_UNPACK = "tt.host_unpack"        # UnpackWeightsTT: packed weight tensors the host unpacks (table per position)
TILE_INT_LIMITS = "tt.tile_int_limits"  # TileIntRangeTT: {scalar / dimension name: limit} the call checks
SDPA = "tt.sdpa"                      # SDPAFusionTT: the attention structure and its work split
SUPER_BLOCK = "tt.super_block"        # SuperBlockTT: user blocks fused per core, how multicast was chosen
ROW_STREAM = "tt.row_stream"          # RowStreamTT: a row block wider than L1 swept in column chunks
GRID = "tt.grid"                      # GridToPersistentTT: [grid_y, grid_x]
SCHEDULE = "tt.schedule"              # GridToPersistentTT: policy/order/... and per-core mapping
RUNTIME_ARGS = "tt.runtime_args"      # GridToPersistentTT: names of the per-core schedule args
SHAPE_ARGS = "tt.shape_args"          # GridToPersistentTT: symbolic dimensions (T.dynamic), passed at launch
CORE_RANGES = "tt.core_ranges"        # TTShardToCoreMap: [[[y0, x0], [y1, x1]], ...] inclusive
SHARDS = "tt.shards"                  # TTShardToCoreMap: {buffer: {axis, tiles, placement, ...}}
PADDING = "tt.padding"                # TilePadTT: {buffer: {logical, padded}}
CB = "tt.cb"                          # MemorySpaceLowerTT: {buffer: records.CircularBuffer}
TENSORIZED = "tt.tensorized"          # TensorizeTT: True once every tile op is a TT intrinsic
SOURCE = "tt.source"                  # pipeline: "file:line (kernel name)" of the TileLang function
DEVICE = "tt.device"                  # pipeline: the arch name
COMPUTE = "tt.compute"                # pipeline: the compute configuration (records.Compute); TensorizeTT: DST mode
LOWERED = "tt.lowered"                # pipeline: the function as the TT passes left it, for codegen

# Loop annotations.
PERSISTENT_LOOP = "tt.persistent_loop"   # the per-core outer loop created by GridToPersistentTT
GUARD = "tt.guard"                        # MemorySpaceLowerTT: a block-level `if` as a loop of 0 or 1 trip



def put(func, values: dict):
    """``func`` with the attributes ``values`` (key -> Python or TVM value), in one FFI call that converts the
    values natively. ``BaseFunc.with_attr`` converts each value with ``tvm_ffi.convert``, whose isinstance check
    against TVM's Object / numbers.Number ABCs walks their registered subclasses the first time a Python type is
    seen: ~2 ms per type, ~15 ms of a process's first compile."""
    return func.with_attrs(values)


ALL_KEYS = (
    SCHEDULE_ANNOTATION, SHARDING_ANNOTATION, COMPUTE_ANNOTATION, MESH_ANNOTATION, SEQUENCE, MESH, SDPA, GRID, SCHEDULE, RUNTIME_ARGS, SHAPE_ARGS, CORE_RANGES, SHARDS, PADDING,
    CB, TENSORIZED, SOURCE, DEVICE, COMPUTE, LOWERED, PERSISTENT_LOOP, GUARD, SUPER_BLOCK, HOST_UNPACK,
    TILE_INT_LIMITS,
)
