"""StreamBandsTT: the circular buffers fit L1, by streaming a matmul's A block in row bands when they do not.

A CB-resident matmul accumulator is updated one DST subblock row after the other (LowerToTTProgram's ``sm``
loop): the rows of A one subblock row needs, ``sh`` tile rows by the block's K tiles, are dead once that row's
subblocks are done. When the whole A block does not fit beside the accumulator (SuperBlockTT's per-core blocks,
whose fp32 partial sums take most of L1), the reader can deliver A band by band into a CB of two bands: compute
waits for a band before its subblock row and pops it after, so the reader (and A's multicast) refills a band
while compute works on the other. Every A tile still reaches the core once; only the CB is smaller.

In:  a PrimFunc after TensorizeTT (``tt.cb`` with residencies and subblocks) or MemorySpaceLowerTT.
Out: when the CBs that take L1 (``residency`` other than "dst") exceed the usable L1, an A operand CB is banded,
     the largest first, until they fit. A CB qualifies when the reader fills it with whole tiles (one
     ``read_block``, no sub-tile window) and compute uses it only as the A operand of one ``matmul`` whose
     accumulator is CB resident, in the same statement sequence as the read, with more than one subblock row.
     Its ``read_block`` moves to just before the ``matmul`` (after the other reads of the sequence: compute waits
     for those blocks before its first band, so the reader must deliver them first).
Attributes written: in ``tt.cb``, the banded CB gets ``band`` = ``{"rows": sh (tile rows per band), "pages": sh x
     K tiles, "depth": 2 (bands the CB holds)}``, ``depth_blocks`` 1, ``num_pages`` and ``bytes`` of two bands.
     LowerToTTProgram reads ``band``: the reader pushes one band per ``read_tiles``, the matmul waits and pops
     per subblock row with A's tile positions relative to the band.
Errors: TTResourceError when the CBs still exceed the usable L1 (the limit, the device, the fix).
"""

from __future__ import annotations

from tvm import tirx

from .. import records
from ..device import DeviceProfile
from ..errors import TTResourceError
from ..intrinsics import TTOps, tt_op_of
from .common import prim_func_pass, source_of, visit

BAND_DEPTH = 2      # bands a banded CB holds: the reader fills one while compute works on the other

# the CB-index arguments of each TT tile op (eltwise reads its operands as BufferLoads, by buffer name)
_CB_ARGS = ((TTOps.read_block, (0,)), (TTOps.write_block, (0,)), (TTOps.fill, (0,)), (TTOps.matmul, (0, 1, 2)),
            (TTOps.eltwise, (0,)), (TTOps.transpose, (0, 1)), (TTOps.insert_window, (0, 1, 2)), (TTOps.reduce, (0, 1, 5)), (TTOps.gather_rows, (0,)), (TTOps.im2col_rows, (0,)),
            (TTOps.offset_rows, (0,)), (TTOps.write_rows, (0,)))


def l1_bytes(table: dict) -> int:
    """L1 the CB table takes: every CB but a DST-resident accumulator."""
    return sum(int(e.bytes) for e in table.values() if e.residency != "dst")


def _uses(func: tirx.PrimFunc, table: dict) -> dict:
    """CB name -> [(op, arg position, call, enclosing SeqStmt or None)] for every TT op argument naming it."""
    by_index = {int(e.index): n for n, e in table.items()}
    uses: dict = {n: [] for n in table}
    seqs: list = []
    visit(func.body, lambda n: seqs.append(n) if isinstance(n, tirx.SeqStmt) else None)

    def parent(stmt):
        return next((s for s in seqs if any(x.same_as(stmt) for x in s.seq)), None)

    def on_stmt(node):
        found = tt_op_of(node)
        if found is None:
            return
        op, c = found
        positions = next((p for o, p in _CB_ARGS if o.same_as(op)), ())
        for i in positions:
            if i < len(c.args) - 1 and isinstance(c.args[i], tirx.IntImm) and int(c.args[i]) in by_index:
                uses[by_index[int(c.args[i])]].append((op, i, c, parent(node), node))
        if op.same_as(TTOps.eltwise):
            loads = []
            tirx.stmt_functor.post_order_visit(c.args[1], lambda n: loads.append(n.buffer.name)
                                               if isinstance(n, tirx.BufferLoad) else None)
            for name in loads:
                if name in uses:
                    uses[name].append((op, -1, c, parent(node), node))

    visit(func.body, on_stmt)
    return uses


def _band_candidate(name: str, table: dict, uses: list):
    """(band rows, read statement, matmul statement, sequence) when ``name`` can stream in bands, else None."""
    e = table[name]
    if e.role != "input" or list(e.producer) != ["reader"] or list(e.consumer) != ["compute"] or \
            e.constant is not None or e.band is not None:
        return None
    reads = [u for u in uses if u[0].same_as(TTOps.read_block)]
    others = [u for u in uses if not u[0].same_as(TTOps.read_block)]
    if len(reads) != 1 or len(others) != 1 or not others[0][0].same_as(TTOps.matmul) or others[0][1] != 0:
        return None
    (_, _, read, seq, read_stmt), (_, _, mm, mm_seq, mm_stmt) = reads[0], others[0]
    window = [int(a) if isinstance(a, tirx.IntImm) else None for a in read.args[6:10]]
    if window != [0, 32, 0, 32] or seq is None or mm_seq is None or not seq.same_as(mm_seq):
        return None
    stmts = list(seq.seq)
    position = [next(i for i, s in enumerate(stmts) if s.same_as(x)) for x in (read_stmt, mm_stmt)]
    if position[0] > position[1]:
        return None
    acc = next((x for x in table.values() if int(x.index) == int(mm.args[2])), None)
    if acc is None or acc.residency != "cb":
        return None
    rows = int(list(acc.subblock)[0])
    mt = int(list(e.shape_tiles)[0])
    if mt <= rows or mt % rows:
        return None
    return rows, read_stmt, mm_stmt, seq


def _reorder(body, seq, read_stmt, mm_stmt):
    """``body`` with ``read_stmt`` moved to just before ``mm_stmt`` in ``seq``."""
    stmts = [s for s in seq.seq if not s.same_as(read_stmt)]
    at = next(i for i, s in enumerate(stmts) if s.same_as(mm_stmt))
    new_seq = tirx.SeqStmt(stmts[:at] + [read_stmt] + stmts[at:])
    return tirx.stmt_functor.ir_transform(body, None, lambda n: new_seq if n.same_as(seq) else None,
                                          ["tirx.SeqStmt"])


def stream_bands(func: tirx.PrimFunc, device: DeviceProfile) -> tirx.PrimFunc:
    usable = device.l1_usable_bytes
    table = records.cbs(func)
    if l1_bytes(table) <= usable:    # the common case
        return func
    body, banded = func.body, False
    while l1_bytes(table) > usable:
        uses = _uses(func.with_body(body), table)
        found = [(name, _band_candidate(name, table, uses[name])) for name in table]
        found = [(name, c) for name, c in found if c is not None]
        if not found:
            break
        name, (rows, read_stmt, mm_stmt, seq) = max(found, key=lambda nc: int(table[nc[0]].bytes))
        e = table[name]
        pages = rows * int(list(e.shape_tiles)[1])
        table[name] = e.replace(band={"rows": rows, "pages": pages, "depth": BAND_DEPTH}, depth_blocks=1,
                                num_pages=BAND_DEPTH * pages, bytes=BAND_DEPTH * pages * int(e.page_size))
        body, banded = _reorder(body, seq, read_stmt, mm_stmt), True
    total = l1_bytes(table)
    if total > usable:
        raise TTResourceError(f"circular buffers need {total} bytes of L1 per core, more than the {usable} bytes a "
                              f"kernel can use on {device.arch}", construct="tile buffers", source=source_of(func),
                              fix="use smaller blocks or fewer pipeline stages")
    return records.put_cbs(func.with_body(body), table) if banded else func


def StreamBandsTT(device: DeviceProfile):
    @prim_func_pass("tt.StreamBandsTT")
    def transform(func, mod, ctx):
        return stream_bands(func, device)

    return transform
