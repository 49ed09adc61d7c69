"""IR helpers shared by the TT passes: operator identities, region decoding, source locations.

Everything here matches IR by structure (``Op`` identity, node types, ``IterVar.thread_tag``), never by
variable names or printed text.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

import tvm
from tvm import tirx
from tvm.ir import Op

from ..device import TILE  # noqa: F401  (re-exported for the passes)
from ..errors import TTError, TTLoweringError
from ..names import generated
from ..ttir import For, Lit


def visit(node, fn) -> None:
    """``post_order_visit`` that lets a TTError raised by ``fn`` reach the caller as itself
    (an exception raised inside a TVM FFI callback would come back as RuntimeError)."""
    errors = []

    def callback(n):
        if not errors:
            try:
                fn(n)
            except TTError as err:
                errors.append(err)

    tirx.stmt_functor.post_order_visit(node, callback)
    if errors:
        raise errors[0]


def stmt_children(stmt) -> list:
    """The statements directly inside ``stmt`` (a SeqStmt's, a block's body, both cases of an ``if``, the body of a
    loop, let or attribute), for walkers that carry their own context (the loops around a statement) down."""
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, tirx.SBlockRealize):
        return [stmt.block.body]
    if isinstance(stmt, tirx.SBlock):
        return [stmt.body]
    if isinstance(stmt, tirx.IfThenElse):
        return [stmt.then_case] + ([stmt.else_case] if stmt.else_case is not None else [])
    body = getattr(stmt, "body", None)     # For, AttrStmt and the other single-body statements
    return [body] if isinstance(body, tirx.Stmt) else []


def transform(node, post, only_enable, pre=None):
    """``ir_transform`` with the same error handling as :func:`visit` (``pre``: as ir_transform's, a node it
    returns is not visited further)."""
    errors = []

    def guarded(fn):
        def callback(n):
            if errors:
                return None
            try:
                return fn(n)
            except TTError as err:
                errors.append(err)
                return None
        return callback

    out = tirx.stmt_functor.ir_transform(node, guarded(pre) if pre is not None else None, guarded(post), only_enable)
    if errors:
        raise errors[0]
    return out


def op(name: str) -> Op:
    return Op.get(name)


@lru_cache(maxsize=None)
def _ops_matching(*words: str) -> tuple:
    from ..intrinsics import registered_op_names

    return tuple(Op.get(n) for n in sorted(registered_op_names()) if any(w in n for w in words))


class UnsupportedOps:
    """TileLang/TIR operators with no meaning on a TT tile program, found by name on first use (one walk of TVM's
    op registry per process) and then matched by Op identity."""

    @classmethod
    def reason(cls, op) -> str | None:
        if any(op.same_as(o) for o in _ops_matching("atomic")):
            return "atomic operations"
        if any(op.same_as(o) for o in _ops_matching("shfl", "warp", "tvm_warp", "ballot")):
            return "warp/thread-level intrinsics"
        return None


class TileOps:
    """Identities of the TileLang operators the TT passes consume (looked up once)."""

    copy = op("tl.tileop.copy")
    fill = op("tl.tileop.fill")
    gemm = op("tl.tileop.gemm")
    reduce = op("tl.tileop.reduce")
    im2col = op("tl.tileop.im2col")
    region = op("tl.region")
    launch_thread_idx = op("tl.launch_thread_idx")


def is_call_to(node, target_op: Op) -> bool:
    return isinstance(node, tirx.Call) and isinstance(node.op, Op) and node.op.same_as(target_op)


def tile_op_call(stmt) -> tirx.Call | None:
    """The ``tl.tileop.*`` call of an ``Evaluate`` statement, else None."""
    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and isinstance(stmt.value.op, Op):
        name = stmt.value.op.name
        if name.startswith("tl.tileop."):
            return stmt.value
    return None


def source_of(func: tirx.PrimFunc) -> str:
    """``file:line (kernel name)`` of the TileLang function, as precise as the frontend recorded it."""
    from .. import attrs

    if func.attrs and attrs.SOURCE in func.attrs:
        return str(func.attrs[attrs.SOURCE])
    name = str(func.attrs.get("global_symbol", "<kernel>")) if func.attrs else "<kernel>"
    span = getattr(func, "span", None)
    if span is not None and span.source_name is not None:
        return f"{span.source_name.name}:{span.line} (kernel '{name}')"
    return f"kernel '{name}'"


_DECL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]* = T\.[A-Za-z0-9_]+\(.*\)$")   # printer's free-var declarations


def describe(node) -> str:
    """A one-line rendering of a statement for error messages."""
    try:
        text = node.script() if hasattr(node, "script") else str(node)
    except Exception:  # printing tilelang IR can fail; the type is still informative
        text = type(node).__name__
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.strip().startswith("#") and not _DECL.match(ln.strip())]
    return lines[0][:160] if lines else type(node).__name__


_REGION = re.compile(r"T\.region\(([A-Za-z_][A-Za-z0-9_]*\[[^\]]*\]), \d+(?:, \d+)*\)")


def tilelang_text(stmt) -> str:
    """The statement as the user wrote it (``T.copy(A[by * 32, k * 32], A_s)``), for comments."""
    text = describe(stmt)
    text = _REGION.sub(lambda m: m.group(1), text)
    return re.sub(r"\[0, 0\]", "", text)


@dataclass(frozen=True)
class Region:
    """A ``tl.region``: a rectangular window of a buffer."""

    buffer: tirx.Buffer
    mins: tuple            # PrimExpr per dimension
    extents: tuple         # int per dimension
    access: int            # 1 = read, 2 = write, 3 = read-write

    @property
    def scope(self) -> str:
        return buffer_scope(self.buffer)


def int_value(expr, what: str, source: str | None = None) -> int:
    if isinstance(expr, (int,)):
        return int(expr)
    if isinstance(expr, tirx.PrimExpr) and not isinstance(expr, tirx.IntImm):
        expr = _simplifier().simplify(expr)     # a slice's extent `g * 16 + 16 - g * 16` is 16
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    raise TTLoweringError(f"{what} must be a compile-time constant, got {expr}", construct=what, source=source,
                          fix="use static shapes (symbolic shapes are not supported yet)")


@lru_cache(maxsize=1)
def _simplifier():
    from tvm import arith

    return arith.Analyzer()


def decode_region(expr, source: str | None = None) -> Region:
    if is_call_to(expr, TileOps.region):
        load = expr.args[0]
        access = int_value(expr.args[1], "region access")
        extents = tuple(int_value(e, "region extent", source) for e in expr.args[2:])
        mins = tuple(load.indices)
        if len(extents) < len(mins):  # leading unit dimensions are implicit
            extents = (1,) * (len(mins) - len(extents)) + extents
        return Region(load.buffer, mins, extents, access)
    if isinstance(expr, tirx.BufferLoad):
        return Region(expr.buffer, tuple(expr.indices), tuple(1 for _ in expr.indices), 1)
    raise TTLoweringError(f"expected a buffer region, got {describe(expr)}", construct="tile operator argument",
                          source=source)


def shape_vars(func: tirx.PrimFunc) -> list:
    """The symbolic dimensions (``T.dynamic``) of the tensor parameters, in order of first appearance. Each must
    be a whole dimension of the tensor as the user declared it (after TilePadTT: its logical shape, the view
    being an expression of it); a dimension that is an expression of them is rejected."""
    from .. import records
    from ..errors import TTUnsupportedError

    found = []
    for p in func.params:
        if p not in func.buffer_map:
            continue
        buf = func.buffer_map[p]
        pad = records.padding(func, buf.name)
        for dim in (pad.logical if pad is not None else buf.shape):
            if isinstance(dim, (int, tirx.IntImm)):
                continue
            if not isinstance(dim, tirx.Var):
                raise TTUnsupportedError(f"dimension {dim} of {buf.name} is an expression of symbolic shapes",
                                         construct=f"tensor {buf.name}", source=source_of(func),
                                         fix="give every symbolic dimension its own T.dynamic variable")
            if not any(v.same_as(dim) for v in found):
                found.append(dim)
    return found


def free_vars(expr) -> list:
    out = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: out.append(n) if isinstance(n, tirx.Var) else None)
    return out


def affine_offset(index, var, analyzer):
    """``index - var`` when ``index`` is ``offset + var`` with ``offset`` free of ``var``, else None."""
    offset = analyzer.simplify(index - var)
    return None if uses_var(offset, var) else offset


def uses_var(node, var) -> bool:
    """Whether ``var`` occurs in ``node`` (a PrimExpr or a statement)."""
    hits = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(node) if isinstance(node, tirx.PrimExpr) else node,
                                       lambda n: hits.append(1) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(hits)


def buffer_scope(buf: tirx.Buffer) -> str:
    return str(buf.scope())


def is_global(buf: tirx.Buffer) -> bool:
    return buffer_scope(buf) == "global"


def static_shape(buf: tirx.Buffer, source: str | None = None) -> tuple[int, ...]:
    return tuple(int_value(s, f"shape of {buf.name}", source) for s in buf.shape)


def tile_shape_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, cols) in tiles of a 2-D-or-more shape (leading dims fold into rows); a partial tile counts as one."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return -(-rows // TILE), -(-shape[-1] // TILE)


_ARITH = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
          "Div": lambda a, b: a / b if b else None}


def const_value(expr) -> float | None:
    """The value of a constant expression (``T.float32(1.0) / D``, ``-T.infinity("float")``), else None."""
    import math

    if isinstance(expr, (tirx.IntImm, tirx.FloatImm)):
        return float(expr.value)
    if isinstance(expr, tirx.Cast):     # the cast's rounding: to nearest even, toward zero for an integer
        value = const_value(expr.value)
        if value is None or not math.isfinite(value) or str(expr.dtype) in ("float32", "float64", "bool"):
            return value
        if str(expr.dtype) in ("bfloat16", "float16"):
            import torch
            kind = torch.bfloat16 if str(expr.dtype) == "bfloat16" else torch.float16
            return float(torch.tensor(value, dtype=torch.float64).to(torch.float32).to(kind).item())
        return float(math.trunc(value)) if str(expr.dtype).startswith(("int", "uint")) else value
    if isinstance(expr, tirx.Call) and isinstance(expr.op, Op) and str(expr.op.name) in ("tl.infinity", "tirx.infinity"):
        return math.inf
    kind = type(expr).__name__
    if kind in _ARITH:
        a, b = const_value(expr.a), const_value(expr.b)
        if a is None or b is None:
            return None
        return _ARITH[kind](a, b)
    return None


def simplify(expr):
    return tvm.arith.Analyzer().simplify(expr)


def prim_func_pass(name: str):
    """Decorator: a module pass over every PrimFunc, named for the IR dump."""
    return tirx.transform.prim_func_pass(opt_level=0, name=name)


# ---- shared by TensorizeTT, LowerToTTProgram and the element-wise lowering (lower_eltwise.py) -----------------
SCALER = "reduce_scaler"     # the CB of the reduce scaler tile (TensorizeTT adds it; the reader fills it once)
BINARY = {tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.Div: "div"}   # TIR node -> the TT binary op


SCOPE_SHARED = "shared.dyn"          # T.alloc_shared
SCOPE_FRAGMENT = "local.fragment"    # T.alloc_fragment


def has_load(expr) -> bool:
    """True when ``expr`` reads a buffer."""
    found = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: found.append(n)
                                       if isinstance(n, tirx.BufferLoad) else None)
    return bool(found)


def buffer_loads(expr) -> list:
    """The names of the buffers ``expr`` loads, in visit order."""
    found = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: found.append(n.buffer.name)
                                       if isinstance(n, tirx.BufferLoad) else None)
    return found


def strip_cast(e):
    while isinstance(e, tirx.Cast):
        e = e.value
    return e


def is_scalar(e) -> bool:
    """True for a value the same for every element: a constant, or an integer expression of the kernel's
    variables (``bx * 64 + past_len``), known at run time."""
    e = strip_cast(e)
    if isinstance(e, (tirx.FloatImm, tirx.IntImm)) or _element_load(e):
        return True
    found, floats = [], []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(
        n, (tirx.BufferLoad, tirx.Call)) else floats.append(n) if isinstance(n, tirx.PrimExpr) and str(
            n.dtype).startswith(("float", "bfloat")) else None)
    # integer elements of tensors (index_load) may take part: the RISC-V computes with them in int32; a float value
    # (a float element or parameter, a float constant) only as a scalar of its own, never inside an expression
    integer_elements = all(_element_load(n) and str(n.dtype).startswith(("int", "uint")) for n in found)
    return integer_elements and not floats and not e.dtype.startswith(("float", "bfloat")) or \
        isinstance(e, tirx.Var)


def _element_load(e) -> bool:
    """A tensor element read through an index CB (``index_load``, MemorySpaceLowerTT): a scalar at run time."""
    from ..intrinsics import TTOps

    return isinstance(e, tirx.Call) and e.op.same_as(TTOps.index_load)


def has_index_load(e) -> bool:
    """Whether ``e`` reads a tensor element (``index_load``): a value only the kernel that reads it knows."""
    found = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if _element_load(n) else None)
    return bool(found)


def float_bits(value: float) -> Lit:
    return Lit(f"0x{struct.unpack('<I', struct.pack('<f', float(value)))[0]:08x}u")


def float_lit(value: float) -> Lit:
    if value in (float("inf"), float("-inf")):
        return Lit(("-" if value < 0 else "") + "__builtin_inff()")
    text = repr(float(value))
    return Lit(text + ("f" if "e" in text or "." in text else ".0f"))


def loop(name: str, extent: int, body_fn) -> list:
    """``for name in [0, extent)``: body_fn(index expr) -> nodes; an extent-1 loop is its body at 0."""
    if extent == 1:
        return body_fn(tirx.IntImm("int32", 0))
    var = generated(name)
    return [For(var, tirx.IntImm("int32", 0), tirx.IntImm("int32", extent), body_fn(var))]


class ParallelNestRewriter:
    """Walks a kernel block's statements (not into nested blocks) and hands each ``T.Parallel`` nest to ``nest``,
    which returns the statement (or sequence) that replaces it; ``allocs``: the buffers the rewrite adds
    (``new_buffer``, named apart from ``taken``: the names already in use)."""

    def __init__(self, taken=()):
        self.allocs: list[tirx.Buffer] = []
        self.taken = set(taken)

    def new_buffer(self, shape, dtype, name: str, scope: str) -> tirx.Buffer:
        """A tile buffer the rewrite adds: ``name``, or ``name_2``, ``name_3``... when that is taken."""
        unique, n = name, 1
        while unique in self.taken:
            n += 1
            unique = f"{name}_{n}"
        self.taken.add(unique)
        buf = tirx.decl_buffer(shape, dtype, unique, scope=scope)
        self.allocs.append(buf)
        return buf

    def nest(self, loop: tirx.For):
        raise NotImplementedError

    def stmt(self, s):
        if isinstance(s, tirx.SeqStmt):
            return tirx.SeqStmt([x for part in s.seq for x in self.flat(self.stmt(part))])
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.PARALLEL:
            return self.nest(s)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, self.stmt(s.body), s.thread_binding, s.annotations)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, self.stmt(s.body))
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, self.stmt(s.then_case),
                                   None if s.else_case is None else self.stmt(s.else_case))
        return s

    @staticmethod
    def flat(s) -> list:
        return list(s.seq) if isinstance(s, tirx.SeqStmt) else [s]


def tile_buffer_names(stmt) -> set:
    """The names of the buffers the blocks of ``stmt`` allocate."""
    names: set = set()
    tirx.stmt_functor.post_order_visit(stmt, lambda n: names.update(b.name for b in n.alloc_buffers)
                                       if isinstance(n, tirx.SBlock) else None)
    return names


def read_in_parallel(stmt) -> set:
    """The names of the tile buffers a ``T.Parallel`` nest of ``stmt`` reads."""
    names: set = set()

    def visit(node):
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
            tirx.stmt_functor.post_order_visit(node.body, lambda n: names.add(n.buffer.name) if isinstance(
                n, tirx.BufferLoad) and not is_global(n.buffer) else None)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return names


def with_buffers(stmt, bmap: dict):
    """``stmt`` with every load and store of a buffer ``bmap`` maps (tile-op regions included: they hold
    BufferLoads) on its replacement."""
    def post(node):
        if isinstance(node, tirx.BufferLoad) and node.buffer in bmap:
            return tirx.BufferLoad(bmap[node.buffer], node.indices)
        if isinstance(node, tirx.BufferStore) and node.buffer in bmap:
            return tirx.BufferStore(bmap[node.buffer], node.value, node.indices)
        return None

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.BufferLoad", "tirx.BufferStore"])


def rewrite_kernel_blocks(func: tirx.PrimFunc, make_rewriter) -> tirx.PrimFunc:
    """``func`` with the body of each block that allocates tile buffers (the kernel's block) rewritten by a fresh
    ``make_rewriter()``'s ``stmt``; the buffers the rewriter adds (``allocs``) join the block's."""
    def post(node: tirx.SBlock):
        if not node.alloc_buffers:
            return None
        rewriter = make_rewriter()
        body = rewriter.stmt(node.body)
        if not rewriter.allocs:
            return None
        return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, body, node.init,
                           list(node.alloc_buffers) + rewriter.allocs, node.match_buffers, node.annotations)

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlock"])
    return func if body.same_as(func.body) else func.with_body(body)


def region_call(buf: tirx.Buffer, mins, extents, access: int) -> tirx.Call:
    """A ``tl.region`` of ``buf`` (``access``: 1 read, 2 write, 3 read-write), as the frontend writes one."""
    return tirx.Call("handle", TileOps.region, [tirx.BufferLoad(buf, list(mins)), tirx.IntImm("int32", access),
                                                 *[tirx.IntImm("int32", int(e)) for e in extents]])


def strip_attrs(stmt):
    """(AttrStmt wrappers, inner statement list)."""
    wrappers = []
    while isinstance(stmt, tirx.AttrStmt):
        wrappers.append(stmt)
        stmt = stmt.body
    return wrappers, (list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt])


def rewrap(wrappers, stmts):
    """``strip_attrs`` undone: ``stmts`` inside the same AttrStmt wrappers."""
    body = stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)
    for w in reversed(wrappers):
        body = tirx.AttrStmt(w.node, w.attr_key, w.value, body)
    return body


def renew_vars(stmt, vmap: dict | None = None):
    """``stmt`` with every variable it defines (loop, Bind) replaced by a fresh one, uses substituted (and the
    substitutions of ``vmap``): a statement repeated in a function defines its own variables each time."""
    defined = []

    def collect(node):
        if isinstance(node, tirx.For):
            defined.append(node.loop_var)
        elif isinstance(node, tirx.Bind):
            defined.append(node.var)

    tirx.stmt_functor.post_order_visit(stmt, collect)
    vmap = dict(vmap or {})
    for v in defined:
        vmap[v] = tirx.Var(v.name, v.dtype)
    stmt = tirx.stmt_functor.substitute(stmt, vmap)

    def post(node):
        if isinstance(node, tirx.For) and node.loop_var in vmap:
            return tirx.For(vmap[node.loop_var], node.min, node.extent, node.kind, node.body, node.thread_binding,
                            node.annotations)
        if isinstance(node, tirx.Bind) and node.var in vmap:
            return tirx.Bind(vmap[node.var], node.value)
        return None

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.For", "tirx.Bind"])


# ---- the T.Kernel grid nest ---------------------------------------------------------------------------------------
GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def grid_loops(func: tirx.PrimFunc) -> tuple[list, tirx.Stmt]:
    """The loops of the ``T.Kernel`` nest (every loop bound to a thread tag from the top of the body, through the
    frontend's root block realize when it allocates nothing), outermost first, and the statement inside them.
    The passes that read the grid check the tags and extents they accept."""
    body = func.body
    if isinstance(body, tirx.SBlockRealize) and not body.block.alloc_buffers:
        body = body.block.body
    loops = []
    while isinstance(body, tirx.For) and body.thread_binding is not None:
        loops.append(body)
        body = body.body
    return loops, body


def static_grid(func: tirx.PrimFunc, tags=GRID_TAGS) -> dict | None:
    """``{tag: (var, extent)}`` of a nest whose loops are all bound to ``tags`` with constant extents, else None."""
    loops, _ = grid_loops(func)
    grid = {}
    for loop in loops:
        tag = str(loop.thread_binding.thread_tag)
        if tag not in tags or not isinstance(loop.extent, tirx.IntImm):
            return None
        grid[tag] = (loop.loop_var, int(loop.extent.value))
    return grid or None


def with_grid_extent(stmt, tag: str, extent: int):
    """``stmt`` with the grid loop bound to ``tag`` running ``extent`` blocks (its binding's range too)."""
    def post(node):
        if node.thread_binding is None or str(node.thread_binding.thread_tag) != tag:
            return None
        iv = node.thread_binding
        binding = tirx.IterVar(tvm.ir.Range(0, extent), iv.var, iv.iter_type, iv.thread_tag)
        return tirx.For(node.loop_var, node.min, tirx.IntImm(node.extent.dtype, extent), node.kind, node.body,
                        binding, node.annotations)

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.For"])

