"""The TT passes, one per file. The order they run in is in ``tilelang_tt.pipeline``."""

from .column_reads import ColumnReadsTT
from .interleaved_columns import InterleavedColumnsTT
from .dead_values import EliminateDeadValuesTT
from .forward_scalars import ForwardScalarsTT
from .grid_to_persistent import GridToPersistentTT
from .copied_elements import CopiedElementsTT
from .copy_windows import CopyWindowsTT
from .global_order import GlobalOrderTT
from .tile_int_range import TileIntRangeTT
from .inline_index_lets import InlineIndexLetsTT
from .memory_space_lower import MemorySpaceLowerTT
from .merge_branches import MergeBranchesTT
from .parallel_fission import ParallelFissionTT
from .predicate_parallel import PredicateParallelTT
from .row_stream import RowStreamTT
from .sdpa_fusion import SDPAFusionTT
from .shard_to_core_map import TTShardToCoreMap
from .float16_operands import Float16OperandsTT
from .store_copies import StoreCopiesTT
from .stream_bands import StreamBandsTT
from .super_block import SuperBlockTT
from .tensorize import TensorizeTT
from .tile_pad import TilePadTT
from .unpack_weights import UnpackWeightsTT

__all__ = ["ForwardScalarsTT", "InlineIndexLetsTT", "CopiedElementsTT", "CopyWindowsTT", "GlobalOrderTT", "TileIntRangeTT", "MergeBranchesTT", "PredicateParallelTT", "ParallelFissionTT", "ColumnReadsTT", "InterleavedColumnsTT", "UnpackWeightsTT", "SDPAFusionTT", "SuperBlockTT",
           "RowStreamTT", "GridToPersistentTT", "TTShardToCoreMap", "TilePadTT", "StoreCopiesTT", "Float16OperandsTT",
           "MemorySpaceLowerTT", "TensorizeTT",
           "EliminateDeadValuesTT", "StreamBandsTT"]
