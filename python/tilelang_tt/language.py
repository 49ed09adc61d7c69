"""The TT dialect: ``from tilelang_tt import language as T`` is all of ``tilelang.language`` plus::

    T.annotate_tt_schedule(policy="contiguous", order="row_major", rect=None, stride=None,
                           chunk_k_tiles=None, qk_chunk_tiles=None, multicast=None)
    T.annotate_tt_sharding({A: T.TTShard(axis=0, tiles=("rows", 32), placement="DRAM")})
    T.annotate_tt_mesh(axis="y")

(``import tilelang_tt`` also adds these three names to ``tilelang.language`` itself.)
"""

from tilelang.language import *  # noqa: F401,F403  (the dialect is TileLang plus the TT names)

from .annotations import TTShard, annotate_tt_mesh, annotate_tt_schedule, annotate_tt_sharding  # noqa: F401
