"""Formats of what compute produces that the packer cannot round as the kernel's dtype says (part of
MemorySpaceLowerTT, run on its CB table and lowered body before the CB names are resolved).

* float16 with fp32 DST accumulation: the 0.81 pack configuration packs an fp32 DST into a Float16 CB through
  bfloat16, 8 of float16's 11 significant bits (TT_KERNEL_PATTERNS.md 5b). ``widen_float16`` holds float16
  fragments in Float32 CBs and gives a float16 tensor the kernel only writes Float32 pages, which the host rounds.
* float8 (``device.FLOAT8_DTYPES``): TT has no float8 format; a float8 tile buffer compute writes holds fp32 values,
  which only a store to a float8 tensor rounds (on the host). ``check_float8`` refuses any other compute read.
"""

from __future__ import annotations

from tvm import tirx

from .. import records
from ..compute_config import dst_holds_fp32
from ..device import FLOAT8_DTYPES, TILE_FORMATS
from ..errors import TTUnsupportedError
from ..intrinsics import TTOps, tt_op_of
from .common import buffer_loads, strip_cast
from .dead_values import CB_EFFECTS


def widen_float16(func, table: dict, body, tensors: dict, l1_bytes: int) -> tuple[dict, list[str]]:
    """In a kernel whose DST holds fp32 (``compute_config.dst_holds_fp32``), the 0.81 pack configuration packs
    into a Float16 CB through bfloat16: 8 of float16's 11 significant bits (TT_KERNEL_PATTERNS.md 5b). So

    * float16 fragments compute produces and consumes are held as Float32 (every bit kept; where a matmul or
      the FPU reads one, the unpacker narrows it to FP16, as the kernel has Float16 CBs);
    * a float16 tensor the kernel only writes (never read by the data-movement kernels) gets Float32 pages,
      and so do the CBs its results are packed into: the host rounds the values to float16 when it reads the
      tensor back (nearest-even, as ``torch.Tensor.half()`` and a GPU's store do).

    Only while the CBs still fit ``l1_bytes``, results first. ``tensors``: parameter index -> buffer. Returns the
    table and the names of the tensors whose pages became Float32."""
    if not dst_holds_fp32(table.values(), body, records.compute(func)):
        return table, []
    wide = TILE_FORMATS["Float32"]

    def widened(entries):
        return {name: table[name].replace(format=wide.name, page_size=wide.tile_bytes,
                                          bytes=table[name].num_pages * wide.tile_bytes) for name in entries}

    def fits(t):
        return sum(e.bytes for e in t.values()) <= l1_bytes

    results = _float16_results(body, table, tensors)
    out = {**table, **widened({cb for cbs in results.values() for cb in cbs})}
    if not fits(out):
        out, results = table, {}
    inner = widened(name for name, e in table.items() if e.role == "intermediate" and e.format == "Float16"
                    and e.producer == ["compute"] and e.consumer == ["compute"])
    if fits({**out, **inner}):
        out = {**out, **inner}
    return out, sorted(results)


# The tensor argument positions of the TT ops that name a tensor (a parameter index), and the two that write one
# from the CB in their argument 0.
_TENSOR_ARGS = ((TTOps.read_block, (1,)), (TTOps.write_block, (1,)), (TTOps.gather_rows, (1, 2)),
                (TTOps.im2col_rows, (1,)), (TTOps.offset_rows, (1,)), (TTOps.write_rows, (1,)),
                (TTOps.index_load, (0,)))
_TENSOR_WRITES = (TTOps.write_block, TTOps.write_rows)


def check_float8(body, table: dict, src) -> None:
    """A float8 tile buffer compute writes holds fp32 values (device.FLOAT8_DTYPES: TT cannot round to float8), so
    compute may only copy it on to another float8 tile buffer (T.copy(y_fp32, y_fp8) then T.copy(y_fp8, Y[...])):
    the host rounds when it reads the float8 tensor. Any other compute read of it is refused."""
    held = {name for name, e in table.items() if e.dtype in FLOAT8_DTYPES and "compute" in e.producer}
    if not held:
        return

    bad: list[str] = []     # raised after the walk: an exception leaves a TVM visitor callback as a RuntimeError

    def refuse(name):
        raise TTUnsupportedError(
            f"float8 tile buffer {name} is computed and then read by compute: TT has no float8 format, so it holds "
            "the unrounded float32 values, which only a store to a float8 tensor rounds (on the host)",
            construct=name, source=src,
            fix="compute in float32 / bfloat16 and cast to float8 only in the copy to the float8 tensor")

    def visit(n):
        if isinstance(n, tirx.BufferStore):      # a T.Parallel nest TensorizeTT lowers later
            copy = isinstance(strip_cast(n.value), tirx.BufferLoad) and str(n.buffer.dtype) in FLOAT8_DTYPES
            bad.extend(name for name in ([] if copy else buffer_loads(n.value)) if name in held)
            return
        found = tt_op_of(tirx.Evaluate(n)) if isinstance(n, tirx.Call) else None
        if found is None:
            return
        op, c = found
        for known, reads, _ in CB_EFFECTS:
            if not op.same_as(known):
                continue
            if known.same_as(TTOps.eltwise):
                expr, dst = strip_cast(c.args[1]), c.args[0].value
                copy = isinstance(expr, tirx.BufferLoad) and table[dst].dtype in FLOAT8_DTYPES
                bad.extend([] if copy else [name for name in buffer_loads(c.args[1]) if name in held])
            else:
                bad.extend(c.args[i].value for i in reads if isinstance(c.args[i], tirx.StringImm)
                           and c.args[i].value in held and not (op.same_as(TTOps.write_block)
                                                                or op.same_as(TTOps.write_rows)))

    tirx.stmt_functor.post_order_visit(body, visit)
    if bad:
        refuse(bad[0])


def _float16_results(body, table: dict, tensors: dict) -> dict[str, set]:
    """The float16 tensors (``tensors``: parameter index -> buffer) the lowered ``body`` writes and never reads,
    each with the CBs (names; Float16, produced by compute) its writes drain. A tensor any of whose CBs is not such
    a CB, or whose CB also drains another tensor, is left out."""
    writes, touched = {}, set()

    def visit(n):
        if not isinstance(n, tirx.Call):
            return
        for op, positions in _TENSOR_ARGS:
            if n.op.same_as(op):
                for p in positions:
                    index = int(n.args[p])
                    if any(n.op.same_as(w) for w in _TENSOR_WRITES):
                        writes.setdefault(index, set()).add(n.args[0].value)
                    else:
                        touched.add(index)

    tirx.stmt_functor.post_order_visit(body, visit)
    drains = {}
    for index, names in writes.items():
        for name in names:
            drains.setdefault(name, set()).add(index)
    out = {}
    for index, names in writes.items():
        buf = tensors[index]
        if index in touched or str(buf.dtype) != "float16":
            continue
        if all(name in table and table[name].format == "Float16" and "compute" in table[name].producer
               and drains[name] == {index} for name in names):
            out[buf.name] = names
    return out
