"""UnpackWeightsTT: packed sub-byte weights (TileLang's int4-in-uint8 dequant form) become a host pre-conversion.

TileLang's dequantize GEMMs read a packed weight tensor (two int4 per byte, ``B: T.Tensor((N, K // 2), "uint8")``)
into a shared tile and unpack it per element in a ``T.Parallel``::

    B_deq[i, j] = ((B_shared[i, j // 2] >> (4 * (j % 2)).astype("uint8")) & 15).astype("bfloat16") * Scale[...]

Tenstorrent has no 4-bit integer datum and no per-element bit extraction across tiles, but the unpack is a pure
function of (packed byte, position in the byte): this pass moves it to the host boundary, as ttnn pre-converts
weights on the host. The device kernel keeps everything else (zero point against a tensor, scale, gemm).

In:  a PrimFunc straight from the frontend (before SDPAFusionTT).
Out: every 8-bit integer tensor parameter ``W`` read as packed, i.e. through (a chain of ``T.copy`` into tile
     buffers, or directly) loads ``X[..., e // P, ...]`` (``P`` = 2, 4 or 8 values per byte) inside expressions
     that depend on nothing but that load, constants and ``e' % P`` with ``e' = e`` modulo ``P`` (the *unpack
     expression* ``U``: shifts, masks, sign extension, ``reinterpret``, casts, a constant zero point), is
     replaced by an int8 tensor of the unpacked shape (that axis ``P`` times longer), stored as Bfp8_b like every
     int8 weight (exact for [-127, 127]). Every buffer of the copy chain is widened the same way (copy windows
     scaled by ``P`` along the axis); a tile buffer that is a whole ``T.copy`` of another one of the chain
     (``T.copy(B_shared, B_local)``) is dropped and read as its source; every ``U`` becomes
     ``Cast(U.dtype, X'[..., e, ...])``.
Attribute written: ``tt.host_unpack`` = ``{tensor: {"shape": packed shape, "dtype": packed dtype, "axis": a,
     "factor": P, "table": [[U(p, byte) for byte in 0..255] for p in 0..P-1], "expr": U as TVMScript}}``;
     codegen copies it into the tensor's plan entry (``host_unpack``) and the runtime converts the packed host
     tensor with it: ``W'[..., x, ...] = table[x % P][W[..., x // P, ...] as uint8]`` (``emulator.unpack_host``).
     The table is ``U`` evaluated with TIR's integer semantics (wrap-around to each node's dtype, arithmetic
     shifts of signed values), so a card's host program needs only the table.
Errors (TTUnsupportedError): a packed tensor whose unpacked values are not integers in [-127, 127] (the table's
     values are named); two different packed loads in one expression; a packed buffer used other than by
     ``T.copy`` into a tile buffer and the unpack expression; the unpacked weight in integer arithmetic with a
     tensor (zero points must follow the cast to float); a packed tensor of symbolic shape.
"""

from __future__ import annotations

import numpy as np
from tvm import tirx
from tvm.ir import Op, structural_equal

from ..errors import TTUnsupportedError
from ..records import HostUnpack, put_host_unpack
from .common import (TileOps, decode_region, describe, is_call_to, is_global, op, prim_func_pass, source_of, transform,
                     tile_op_call)

FACTORS = (2, 4, 8)                  # values per byte: int4, int2, int1
_INT_BITS = {"int8": 8, "uint8": 8}
_FIX = ("write the unpack as a function of the packed byte and the position in it only, e.g. "
        "((B_shared[i, j // 2] >> (4 * (j % 2)).astype('uint8')) & 15).astype('bfloat16') - 8, and apply zero "
        "points and scales after the cast to a float dtype")


# ---- the unpack expression ---------------------------------------------------------------------------------
class _Packed:
    """One packed load site: the buffer chain member, the packed axis, the factor and the element index."""

    def __init__(self, load: tirx.BufferLoad, axis: int, factor: int):
        self.load, self.axis, self.factor = load, axis, factor
        self.element = load.indices[axis].a       # the e of e // P
        self.positions: list = []                 # the e' % P nodes of the unpack with e' = e modulo P


def _packed_axis(load: tirx.BufferLoad):
    hits = [(a, int(ix.b.value)) for a, ix in enumerate(load.indices)
            if isinstance(ix, tirx.FloorDiv) and isinstance(ix.b, tirx.IntImm) and int(ix.b.value) in FACTORS]
    return hits[0] if len(hits) == 1 else None


# The per-element operations an unpack expression may use, by node class and by Op identity.
_INT_OR_FLOAT = {tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.Min: np.minimum,
                 tirx.Max: np.maximum, tirx.EQ: np.equal, tirx.NE: np.not_equal, tirx.LT: np.less,
                 tirx.LE: np.less_equal, tirx.GT: np.greater, tirx.GE: np.greater_equal, tirx.And: np.logical_and,
                 tirx.Or: np.logical_or}
_BIN = (*_INT_OR_FLOAT, tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod)
_BITS = {op("tirx.shift_right"): lambda a, b: a >> b, op("tirx.shift_left"): lambda a, b: a << b,
         op("tirx.bitwise_and"): lambda a, b: a & b, op("tirx.bitwise_or"): lambda a, b: a | b,
         op("tirx.bitwise_xor"): lambda a, b: a ^ b, op("tirx.bitwise_not"): lambda a, b: ~a}
_REINTERPRET, _IF_THEN_ELSE = op("tirx.reinterpret"), op("tirx.if_then_else")


def _is_op(call, ops) -> bool:
    return isinstance(call.op, Op) and any(call.op.same_as(o) for o in ops)


def _children(e):
    """(children, pure): the operands of ``e`` and whether the operation is a per-element function of them."""
    if isinstance(e, _BIN):
        return [e.a, e.b], True
    if isinstance(e, tirx.Cast):
        return [e.value], True
    if isinstance(e, tirx.Not):
        return [e.a], True
    if isinstance(e, tirx.Select):
        return [e.condition, e.true_value, e.false_value], True
    if isinstance(e, tirx.Call):
        return list(e.args), _is_op(e, (*_BITS, _REINTERPRET, _IF_THEN_ELSE))
    return [], False


class _Finder:
    """The maximal sub-expressions of a store's value that depend only on one packed load and its position."""

    def __init__(self, chain: set, src: str):
        self.chain, self.src = chain, src
        self.sites: list = []      # (expr, _Packed)

    def classify(self, e):
        """None: not a function of one packed byte; "const"; ("pos", [e % P, ...]); _Packed."""
        if isinstance(e, (tirx.IntImm, tirx.FloatImm)):
            return "const"
        if isinstance(e, tirx.BufferLoad):
            if e.buffer.data not in self.chain:
                return None
            hit = _packed_axis(e)
            return None if hit is None else _Packed(e, *hit)     # None: an unpacked int8 weight
        if isinstance(e, tirx.FloorMod) and isinstance(e.b, tirx.IntImm):
            return ("pos", [e])
        kids, pure = _children(e)
        kinds = [self.classify(k) for k in kids]
        packed = [k for k in kinds if isinstance(k, _Packed)]
        positions = [m for k in kinds if isinstance(k, tuple) for m in k[1]]
        ok = pure and all(k is not None for k in kinds)
        if ok and packed:
            site = packed[0]
            for other in packed[1:]:
                if not structural_equal(other.load, site.load):
                    raise TTUnsupportedError(f"two packed loads {describe(site.load)} and {describe(other.load)} in "
                                             "one expression", construct=describe(e), source=self.src, fix=_FIX)
            if all(_same_position(m, site) for m in positions):
                site.positions.extend(positions)
                return site
            ok = False      # the position of another element: not a function of this byte alone
        if ok:
            return ("pos", positions) if positions else "const"
        for child, kind in zip(kids, kinds):
            if isinstance(kind, _Packed):
                if not _is_float(child.dtype):
                    raise TTUnsupportedError(
                        f"the unpacked weight {describe(child)} ({child.dtype}) meets {describe(e)} in integer "
                        "arithmetic: the weights are unpacked on the host and the device computes in float",
                        construct=describe(e), source=self.src,
                        fix="cast the unpacked value to the float dtype first and subtract / scale after it, "
                            "e.g. ((B_shared[i, j // 2] >> (4 * (j % 2))) & 15).astype('bfloat16') - Zeros[...]")
                self.sites.append((child, kind))
        return None

    def scan(self, value):
        kind = self.classify(value)
        if isinstance(kind, _Packed):
            self.sites.append((value, kind))


def _same_position(mod, site: _Packed) -> bool:
    """``mod`` (``e' % P``) is the position of the packed element ``e`` in its byte: ``(k * 64 + j) % 2`` and
    ``j % 2`` both are for the element ``k * 64 + j``."""
    from tvm import arith

    return int(mod.b.value) == site.factor and arith.Analyzer().can_prove(
        tirx.floormod(mod.a - site.element, site.factor) == 0)


def _is_float(dtype) -> bool:
    return str(dtype).startswith(("float", "bfloat"))


# ---- evaluation with TIR semantics -------------------------------------------------------------------------
def _wrap(x, dtype: str):
    d = str(dtype)
    if d == "bool":
        return x.astype(bool)
    if d.startswith(("int", "uint")):
        bits = int(d.lstrip("uint") or 32)
        x = np.asarray(x).astype(np.int64) & ((1 << bits) - 1)
        return x - ((x >> (bits - 1)) << bits) if d.startswith("int") else x
    if d == "float32":
        return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)
    if d == "float16":
        return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)
    if d == "bfloat16":   # round to nearest even
        u = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32)
        return u.view(np.float32).astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def evaluate(e, site: _Packed, byte, pos):
    """``e`` over arrays of packed values ``byte`` (of the load's dtype) and positions ``pos``."""
    def ev(n):
        if isinstance(n, (tirx.IntImm, tirx.FloatImm)):
            return np.full(byte.shape, n.value)
        if isinstance(n, tirx.BufferLoad):
            return _wrap(byte, n.dtype)
        if isinstance(n, tirx.FloorMod) and any(n.same_as(m) for m in site.positions):
            return _wrap(pos, n.dtype)
        if isinstance(n, tirx.Cast):
            v = ev(n.value)
            if str(n.dtype).startswith(("int", "uint")) and not str(n.value.dtype).startswith(("int", "uint", "bool")):
                v = np.trunc(v)
            return _wrap(v, n.dtype)
        if isinstance(n, tirx.Select):
            return _wrap(np.where(ev(n.condition), ev(n.true_value), ev(n.false_value)), n.dtype)
        if isinstance(n, tirx.Not):
            return ~ev(n.a).astype(bool)
        if isinstance(n, _BIN):
            a, b = ev(n.a), ev(n.b)
            integer = str(n.a.dtype).startswith(("int", "uint"))
            f = _INT_OR_FLOAT.get(type(n))
            if f is None:
                if isinstance(n, (tirx.FloorDiv, tirx.FloorMod)):
                    f = (np.floor_divide if isinstance(n, tirx.FloorDiv) else np.mod) if integer else \
                        (lambda x, y: np.floor(x / y)) if isinstance(n, tirx.FloorDiv) else np.mod
                elif isinstance(n, tirx.Div):
                    f = (lambda x, y: np.trunc(x / y).astype(np.int64)) if integer else np.divide
                else:
                    f = np.fmod
            return _wrap(f(a, b), n.dtype)
        args = [ev(a) for a in n.args]
        if _is_op(n, (_REINTERPRET,)):
            src, dst = str(n.args[0].dtype), str(n.dtype)
            if not (src.startswith(("int", "uint")) and dst.startswith(("int", "uint"))):
                raise TTUnsupportedError(f"reinterpret from {src} to {dst} in a packed-weight unpack",
                                         construct=describe(n), source=None, fix=_FIX)
            return _wrap(args[0], dst)
        if _is_op(n, (_IF_THEN_ELSE,)):
            return _wrap(np.where(args[0], args[1], args[2]), n.dtype)
        a = args[0].astype(np.int64)
        b = args[1].astype(np.int64) if len(args) > 1 else None
        fn = next(f for o, f in _BITS.items() if n.op.same_as(o))
        return _wrap(fn(a, b), n.dtype)

    return ev(e)


def unpack_table(e, site: _Packed, src: str) -> list:
    """[[U(p, byte) for byte in 0..255] for p in range(P)], integers in [-127, 127], or the error."""
    dtype = str(site.load.dtype)
    raw = np.arange(256, dtype=np.int64)
    byte = raw - 256 * (raw >= 128) if dtype == "int8" else raw
    rows = []
    for p in range(site.factor):
        v = evaluate(e, site, byte, np.full(256, p, dtype=np.int64))
        bad = [x for x in np.unique(v) if not (float(x).is_integer() and -127 <= x <= 127)]
        if bad:
            raise TTUnsupportedError(
                f"the unpacked values of {site.load.buffer.name} ({describe(e)}) include "
                f"{[float(x) for x in bad[:6]]}: packed weights are unpacked on the host into int8 tensors stored "
                "as Bfp8_b, exact for integers in [-127, 127] only", construct=describe(e), source=src,
                fix="unpack to integers (sign extension or an integer / constant zero point) and apply float "
                    "scales after the cast, in the T.Parallel")
        rows.append([int(x) for x in v])
    return rows


# ---- the chain of copies and the rewrite -------------------------------------------------------------------
def _copies(body):
    out = []
    tirx.stmt_functor.post_order_visit(body, lambda n: out.append(tile_op_call(n)) if tile_op_call(n) is not None
                                       and tile_op_call(n).op.same_as(TileOps.copy) else None)
    return out


def _chain(func, param_buf, copies) -> dict:
    """data var -> buffer, for the parameter and every tile buffer T.copy fills (transitively) from it."""
    chain = {param_buf.data: param_buf}
    changed = True
    while changed:
        changed = False
        for c in copies:
            src, dst = decode_region(c.args[0]), decode_region(c.args[1])
            if src.buffer.data in chain and dst.buffer.data not in chain:
                chain[dst.buffer.data] = dst.buffer
                changed = True
    return chain


def _fragment_copies(chain: dict, copies) -> dict:
    """Tile buffers of the chain that are a whole ``T.copy`` of another tile buffer of it (TileLang's
    ``T.copy(B_shared, B_local)`` before the unpack): they are read as their source (the copy is dropped)."""
    out = {}
    for c in copies:
        src, dst = decode_region(c.args[0]), decode_region(c.args[1])
        if src.buffer.data in chain and dst.buffer.data in chain and not is_global(src.buffer) and \
                [int(d) for d in src.buffer.shape] == [int(d) for d in dst.buffer.shape] == list(dst.extents) and \
                sum(1 for x in copies if decode_region(x.args[1]).buffer.same_as(dst.buffer)) == 1:
            out[dst.buffer.data] = src.buffer.data
    return out


def _packing(buf, chain: dict, sites: list, src) -> tuple:
    """(factor, table, axis from the end) of packed tensor ``buf``: one packing, one unpack expression and one
    packed axis (aligned from the last axis through the copies) for all its unpack sites."""
    axes = {}
    for e, site in sites:
        axes.setdefault(site.load.buffer.data, set()).add((site.axis, site.factor))
    factors = {f for s in axes.values() for _, f in s}
    if len(factors) != 1 or any(len(s) != 1 for s in axes.values()):
        raise TTUnsupportedError(f"{buf.name} is unpacked with different packings", construct=f"tensor {buf.name}",
                                 source=src, fix=_FIX)
    factor = factors.pop()
    table = unpack_table(sites[0][0], sites[0][1], src)
    for e, site in sites[1:]:
        if unpack_table(e, site, src) != table:
            raise TTUnsupportedError(f"{buf.name} is unpacked by two different expressions",
                                     construct=describe(e), source=src, fix=_FIX)
    # the packed axis of every chain member, aligned from the last axis through the copies
    rank_axis = {data: next(iter(s))[0] - len(chain[data].shape) for data, s in axes.items()}
    from_end = set(rank_axis.values())
    if len(from_end) != 1:
        raise TTUnsupportedError(f"{buf.name} is packed along different axes", construct=f"tensor {buf.name}",
                                 source=src, fix=_FIX)
    return factor, table, from_end.pop()


def _widen(chain: dict, alias: dict, back: int, factor: int, widen: dict, src) -> None:
    """Adds to ``widen`` each buffer of the copy chain as an int8 buffer ``factor`` times longer along axis
    ``back`` (from the end); a buffer that is a whole copy of another takes its source's (flagged ``True``)."""
    for data, b in chain.items():
        if data in alias:
            continue
        ext = b.shape[back]
        if not all(isinstance(d, tirx.IntImm) for d in b.shape):
            raise TTUnsupportedError(f"{b.name} holds packed weights of symbolic shape {list(b.shape)}",
                                     construct=f"tensor {b.name}", source=src,
                                     fix="give packed weight tensors static shapes (the host unpacks them)")
        shape = list(b.shape)
        shape[back] = tirx.IntImm("int32", int(ext) * factor)
        new = tirx.decl_buffer(shape, "int8", b.name, scope=str(b.scope()))
        widen[data] = (new, len(b.shape) + back, factor)
    for data, source in alias.items():
        while source in alias:
            source = alias[source]
        if source in widen:
            widen[data] = widen[source] + (True,)


def unpack_weights(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its packed weight tensors replaced by unpacked int8 ones (module docstring)."""
    src = source_of(func)
    copies = _copies(func.body)
    stores = []
    tirx.stmt_functor.post_order_visit(func.body, lambda n: stores.append(n) if isinstance(n, tirx.BufferStore)
                                       else None)
    unpacks, replace, widen = {}, [], {}    # name -> plan record; (expr, new load); data -> (buf, axis, P)
    alias = {}                               # data of a tile buffer that is a whole copy of another -> its source
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None or str(buf.dtype) not in _INT_BITS:
            continue
        chain = _chain(func, buf, copies)
        alias.update(_fragment_copies(chain, copies))
        sites = []
        for st in stores:
            finder = _Finder(set(chain), src)
            finder.scan(st.value)
            sites += finder.sites
        if not sites:
            continue
        factor, table, back = _packing(buf, chain, sites, src)
        _widen(chain, alias, back, factor, widen, src)
        for e, site in sites:
            new, axis = widen[site.load.buffer.data][:2]
            idx = list(site.load.indices)
            idx[axis] = site.element
            load = tirx.BufferLoad(new, idx)
            replace.append((e, load if str(e.dtype) == "int8" else tirx.Cast(e.dtype, load)))
        unpacks[buf.name] = HostUnpack(shape=[int(d) for d in buf.shape], dtype=str(buf.dtype),
                                       axis=len(buf.shape) + back, factor=factor, table=table,
                                       expr=describe(sites[0][0]))
    if not unpacks:
        return func
    return put_host_unpack(_rewrite(func, replace, widen, src), unpacks)


def _rewrite(func, replace, widen, src):
    from .common import simplify

    def pre(node):
        for e, new in replace:
            if node.same_as(e):
                return new
        c = tile_op_call(node)
        if c is not None and c.op.same_as(TileOps.copy) and len(widen.get(decode_region(c.args[1]).buffer.data,
                                                                          ())) == 4:
            return tirx.Evaluate(tirx.IntImm("int32", 0))     # the alias copy: its destination reads its source
        if is_call_to(node, TileOps.region) and node.args[0].buffer.data in widen:   # a T.copy window
            load = node.args[0]
            new, axis, factor = widen[load.buffer.data]
            idx = list(load.indices)
            idx[axis] = simplify(idx[axis] * factor)
            ext = list(node.args[2:])
            k = axis - (len(idx) - len(ext))
            if k >= 0:
                ext[k] = tirx.IntImm("int32", int(ext[k]) * factor)
            return tirx.Call(node.dtype, node.op, [tirx.BufferLoad(new, idx), node.args[1], *ext])
        return None

    def post(node):
        if isinstance(node, tirx.BufferLoad) and node.buffer.data in widen:
            raise TTUnsupportedError(f"the packed buffer {node.buffer.name} is read other than by an unpack "
                                     f"expression: {describe(node)}", construct=describe(node), source=src, fix=_FIX)
        if isinstance(node, tirx.BufferStore) and node.buffer.data in widen:
            raise TTUnsupportedError(f"the packed buffer {node.buffer.name} is written by a T.Parallel",
                                     construct=node.buffer.name, source=src, fix="fill it with T.copy")
        if isinstance(node, tirx.SBlock) and any(b.data in widen for b in node.alloc_buffers):
            allocs = [widen[b.data][0] if b.data in widen else b for b in node.alloc_buffers
                      if len(widen.get(b.data, ())) != 4]
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               allocs, node.match_buffers, node.annotations)
        return None

    body = transform(func.body, post, [], pre)
    bmap = {p: (widen[b.data][0] if b.data in widen else b) for p, b in func.buffer_map.items()}
    return tirx.PrimFunc(func.params, body, func.ret_type, bmap, func.attrs)


def UnpackWeightsTT():
    @prim_func_pass("tt.UnpackWeightsTT")
    def run(func, mod, ctx):
        return unpack_weights(func)

    return run
