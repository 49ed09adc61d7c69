"""Which CBs of a tile program hold their block in transposed tile order (LowerToTTProgram's analysis).

``matmul_block`` reads one K step's in1 tiles as adjacent tiles. A row-major [K, N] B has them so; a transposed B
(``T.gemm(..., transpose_B=True)``: TileLang's example GEMM, attention's Q K^T) stored row-major as [N, K] has them
``kt`` apart. A block held in transposed tile order instead (tile (n, k) at ``k * N_tiles + n``: the reader's
``read_tiles_transposed``, as tt-metal's SDPA reader reads K) lets ``matmul_block`` run with its transpose flag,
which transposes within each tile.
"""

from __future__ import annotations

from tvm import tirx

from ..intrinsics import TTOps, tt_op_of
from .common import TILE
from .dead_values import CB_EFFECTS


def transposed_order_cbs(body, cbs: dict) -> set[str]:
    """The CBs that hold their block in transposed tile order (tile (n, k) of an [N, K] block at k * N_tiles + n),
    so that ``matmul_block`` with its transpose flag finds one K step's tiles of B^T adjacent, as for a
    row-major B: CBs the reader fills with whole tiles (``read_tiles_transposed``), and fragments compute writes
    only by element-wise ops over whole blocks of their own shape in that order (the bfloat16 parts of a split
    float16 in1: an element-wise op does not care where a tile sits, as long as all of its blocks agree), each
    used only as the in1 of ``transpose_B`` matmuls or by such element-wise ops."""
    producers, uses = _block_producers_and_uses(body, cbs)

    def placeable(cb: str) -> bool:
        e, made = cbs[cb], producers.get(cb, [])
        if not made or any(kind == "other" for kind, _ in made):
            return False
        if all(kind == "read" for kind, _ in made):
            return e.role == "input" and e.band is None
        return all(kind == "eltwise" for kind, _ in made) and e.role == "intermediate" and \
            tuple(e.subblock or (1, 1)) == (1, 1) and e.residency != "dst"

    chosen = {cb for cb in producers if cb in cbs and placeable(cb)}
    changed = True
    while changed:
        changed = False
        for cb in sorted(chosen):
            ok = all(u == "in1T" or (isinstance(u, tuple) and u[1] in chosen) for u in uses.get(cb, [])) and \
                all(leaf in chosen for kind, leaves in producers[cb] for leaf in leaves)
            if not ok:
                chosen.discard(cb)
                changed = True
    return chosen


def _block_producers_and_uses(body, cbs: dict) -> tuple[dict, dict]:
    """Per CB, how the tile program writes its blocks (``("read", ())``: a whole-tile ``read_block``;
    ``("eltwise", leaves)``: an element-wise op whose operands are whole blocks of its shape; ``("other", ())``)
    and how it reads them (``"in1T"``: the in1 of a ``transpose_B`` matmul; ``("eltwise", dst)``; ``"other"``)."""
    producers: dict[str, list] = {}
    uses: dict[str, list] = {}
    by_index = {e.index: n for n, e in cbs.items()}

    def name(a):     # a CB index, or a name a few ops carry (the index CB of index_load)
        return a.value if isinstance(a, tirx.StringImm) else by_index[int(a)]

    def visit(n):
        found = tt_op_of(tirx.Evaluate(n)) if isinstance(n, tirx.Call) else None
        if found is None:
            return
        op, c = found
        reads, writes = next(((r, w) for known, r, w in CB_EFFECTS if op.same_as(known)), ((), ()))
        touched = {p: [name(c.args[i]) for i in pos if isinstance(c.args[i], tirx.StringImm) or int(c.args[i]) >= 0]
               for p, pos in (("r", reads), ("w", writes))}
        if op.same_as(TTOps.read_block):
            whole = all(isinstance(a, tirx.IntImm) for a in c.args[6:10]) and \
                tuple(int(a) for a in c.args[6:10]) == (0, TILE, 0, TILE)
            for cb in touched["w"]:
                producers.setdefault(cb, []).append(("read" if whole else "other", ()))
        elif op.same_as(TTOps.matmul):
            a, b, out = (name(x) for x in c.args[:3])
            uses.setdefault(b, []).append("in1T" if bool(c.args[4]) else "other")
            for cb in (a, out):
                uses.setdefault(cb, []).append("other")
            producers.setdefault(out, []).append(("other", ()))
        elif op.same_as(TTOps.eltwise):
            dst, leaves = name(c.args[0]), []
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(c.args[1]), lambda e: leaves.append(e)
                                               if isinstance(e, tirx.BufferLoad) else None)
            agnostic = all(e.buffer.name in cbs and not cbs[e.buffer.name].constant and
                           cbs[e.buffer.name].shape_tiles == cbs[dst].shape_tiles and
                           all(isinstance(i, tirx.IntImm) and int(i) == 0 for i in e.indices) for e in leaves)
            names = [e.buffer.name for e in leaves]
            producers.setdefault(dst, []).append(("eltwise" if agnostic else "other", tuple(names)))
            for leaf in names:
                uses.setdefault(leaf, []).append(("eltwise", dst) if agnostic else "other")
        else:
            for cb in touched["r"] + ([name(c.args[3])] if op.same_as(TTOps.index_load) else []):
                uses.setdefault(cb, []).append("other")
            for cb in touched["w"]:
                producers.setdefault(cb, []).append(("other", ()))

    tirx.stmt_functor.post_order_visit(body, visit)
    return producers, uses
