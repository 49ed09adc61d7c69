"""ForwardScalarsTT: scalar locals (``T.alloc_var``, ``T.alloc_local`` of a few elements) become the expressions
they hold.

TileLang kernels keep per-block scalars in registers: ``s = T.alloc_var(...); s = Scale[by]``, a batch index found
by a loop over an offsets table (``for i in range(n): idx = T.if_then_else(start >= offs[i], i, idx)``), a
log-sum-exp combined over a few splits. A Tenstorrent core has no register file shared by its reader, compute and
writer kernels; every kernel that needs the value must compute it. So the value is made explicit: each load of a
scalar local is replaced by the expression last stored to it, and later passes place that expression where it is
used (an offset read by the data-movement kernels, a scalar of a compute expression) as if the user had written
it there.

In:  the frontend's PrimFunc.
Out: every buffer of scope ``local`` / ``local.var`` with at most MAX_ELEMS elements, indexed by constants,
     allocated in a block, is gone: its stores are removed, its loads are replaced by the expression stored last
     (symbolic execution in program order):
     * a loop whose body only stores scalar locals (``for i in range(n)``, constant ``n`` <= MAX_UNROLL) is unrolled
       symbolically; an ``if`` that only stores scalar locals becomes ``T.if_then_else`` on each stored value;
       a trip count bounded by the grid (``for i in T.serial(bz): off += sizes[i]``, the prefix sum of TileLang's
       grouped examples) is unrolled to its bound with each iteration guarded by ``i < extent`` (a running sum
       ``v + d`` becomes ``v + T.if_then_else(i < extent, d, 0)``, so the expression grows linearly);
     * in any other loop, a scalar stored before it is read in the body (per iteration) is forwarded inside the
       body; after the loop it holds its last iteration's value (constant trip count); a scalar read in an
       iteration of a loop that also moves tiles before that iteration stores it (a running sum next to T.copy)
       has no expression: it becomes a one-element ``T.alloc_fragment`` the compute kernel updates;
     * stores inside ``T.Parallel`` are per-element code, not block scalars: such a buffer is left alone (later
       passes refuse it with their own message).
Attributes written: none.
Errors: TTUnsupportedError for a scalar read before any store, an index that is not a constant, or an expression of
     more than MAX_NODES nodes.
"""

from __future__ import annotations

import itertools

import tvm
from tvm import arith, tirx

from ..errors import TTUnsupportedError
from .common import (TileOps, decode_region, describe, grid_loops, prim_func_pass, source_of, tile_op_call,
                     transform, with_buffers)

MAX_ELEMS = 16       # local arrays up to this many elements are scalars (T.alloc_local((4,), ...) of a few values)
MAX_UNROLL = 512     # trip count of a scalar-only loop unrolled at compile time
MAX_NODES = 4096     # size of a forwarded expression


_ANALYZER = arith.Analyzer()


class _Unknown:
    """A scalar with no value here: never stored, or carried into a loop iteration from the previous one
    (``carried``: its data var)."""

    def __init__(self, why: str, carried=None):
        self.why, self.carried = why, carried




def _const(expr):
    expr = _ANALYZER.simplify(expr)
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _stores(stmt, scalars) -> set:
    """The scalar-local buffers (data vars) ``stmt`` stores to."""
    out = set()
    tirx.stmt_functor.post_order_visit(stmt, lambda n: out.add(n.buffer.data) if isinstance(
        n, tirx.BufferStore) and n.buffer.data in scalars else None)
    return out


def _only_scalar_code(stmt, scalars) -> bool:
    """Stores to scalar locals, in ifs and serial loops, and nothing else."""
    if isinstance(stmt, tirx.SeqStmt):
        return all(_only_scalar_code(s, scalars) for s in stmt.seq)
    if isinstance(stmt, tirx.BufferStore):
        return stmt.buffer.data in scalars
    if isinstance(stmt, tirx.For):
        return stmt.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED) and _only_scalar_code(stmt.body, scalars)
    if isinstance(stmt, tirx.IfThenElse):
        return _only_scalar_code(stmt.then_case, scalars) and (
            stmt.else_case is None or _only_scalar_code(stmt.else_case, scalars))
    if isinstance(stmt, tirx.Evaluate):
        return isinstance(stmt.value, tirx.IntImm)
    return False


def _size(expr) -> int:
    count = [0]
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: count.__setitem__(0, count[0] + 1))
    return count[0]


class _Forward:
    def __init__(self, scalars: dict, src: str, bounds: arith.Analyzer):
        self.scalars = scalars       # data var -> Buffer
        self.src = src
        self.bounds = bounds         # the grid variables' ranges: a trip count's largest value
        self.carried: set = set()    # scalars read while carried from one iteration of a tile loop into the next

    # ---- values ---------------------------------------------------------------------------------------------
    def key(self, node, stmt):
        idx = [_const(i) for i in node.indices]
        if any(i is None for i in idx):
            raise TTUnsupportedError(
                f"scalar local {node.buffer.name} is indexed by {list(node.indices)}, not by constants",
                construct=describe(stmt), source=self.src,
                fix=f"index {node.buffer.name} with constants, or make it a T.alloc_fragment tile buffer")
        return (node.buffer.data, tuple(idx))

    def value(self, expr, env, stmt):
        """``expr`` with every scalar-local load replaced by its value in ``env``."""
        def post(n):
            if not (isinstance(n, tirx.BufferLoad) and n.buffer.data in self.scalars):
                return None
            v = env.get(self.key(n, stmt))
            if isinstance(v, _Unknown) and v.carried is not None:
                self.carried.add(v.carried)      # it becomes a one-element fragment: the run is redone
                return n
            if v is None or isinstance(v, _Unknown):
                why = v.why if isinstance(v, _Unknown) else "it is read before any statement stores to it"
                raise TTUnsupportedError(
                    f"scalar local {n.buffer.name} has no value here: {why}", construct=describe(stmt),
                    source=self.src,
                    fix=("keep a running value in a T.alloc_fragment of one element per row, or compute it in "
                         "a loop that does only scalar work" if isinstance(v, _Unknown) else
                         f"store to {n.buffer.name} before reading it"))
            return v

        out = transform(tirx.Evaluate(expr), post, ["tirx.BufferLoad"]).value
        if _size(out) > MAX_NODES:
            raise TTUnsupportedError(
                f"a scalar local's value grows to {_size(out)} expression nodes (more than {MAX_NODES})",
                construct=describe(stmt), source=self.src,
                fix="shorten the scalar loop (fewer iterations) or pass the value as a tensor")
        return out

    def subst(self, stmt, env):
        """``stmt`` (which stores no scalar local) with its scalar-local loads replaced."""
        if not any(isinstance(n, tirx.BufferLoad) and n.buffer.data in self.scalars for n in _nodes(stmt)):
            return stmt

        def post(n):
            if isinstance(n, tirx.BufferLoad) and n.buffer.data in self.scalars:
                return self.value(n, env, stmt)
            return None

        return transform(stmt, post, ["tirx.BufferLoad"])

    # ---- statements -----------------------------------------------------------------------------------------
    def run(self, stmt, env: dict):
        """``stmt`` rewritten (None when nothing is left of it); ``env`` updated to the values after it."""
        if isinstance(stmt, tirx.SeqStmt):
            out = [s for s in (self.run(s, env) for s in stmt.seq) if s is not None]
            return None if not out else out[0] if len(out) == 1 else tirx.SeqStmt(out)
        if not _stores(stmt, self.scalars):
            return self.subst(stmt, env)
        if isinstance(stmt, tirx.BufferStore):
            env[self.key(stmt, stmt)] = self.value(stmt.value, env, stmt)
            return None
        if isinstance(stmt, tirx.IfThenElse):
            return self.branch(stmt, env)
        if isinstance(stmt, tirx.For):
            return self.loop(stmt, env)
        if isinstance(stmt, tirx.AttrStmt):     # an annotation around statements (T.use_swizzle): look inside
            body = self.run(stmt.body, env)
            return None if body is None else tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body)
        raise TTUnsupportedError(
            f"a scalar local is stored inside {type(stmt).__name__}", construct=describe(stmt), source=self.src,
            fix="store block scalars at the kernel's top level, in loops or in ifs")

    def branch(self, stmt, env):
        """An if that only stores scalar locals: each stored value becomes ``T.if_then_else(cond, then, else)``; a
        value the then-branch adds to (``v + d``, no else) becomes ``v + T.if_then_else(cond, d, 0)``, and a running
        extremum (``if x > v: v = x``) ``T.max(x, v)``."""
        cond = self.value(stmt.condition, env, stmt)
        if not _only_scalar_code(stmt, self.scalars):
            raise TTUnsupportedError(
                "an if that both stores a scalar local and does tile work", construct=describe(stmt),
                source=self.src, fix="compute the scalar with T.if_then_else before the if")
        then_env, else_env = dict(env), dict(env)
        self.run(stmt.then_case, then_env)
        if stmt.else_case is not None:
            self.run(stmt.else_case, else_env)
        for key in set(then_env) | set(else_env):
            a, b = then_env.get(key), else_env.get(key)
            if a is b:
                continue
            if a is None or b is None or isinstance(a, _Unknown) or isinstance(b, _Unknown):
                env[key] = _Unknown("it is stored in only one branch of an if and has no value before it")
            elif isinstance(a, tirx.Add) and a.a.same_as(b):
                env[key] = b + tirx.if_then_else(cond, a.b, tirx.const(0, a.b.dtype))
            elif (extremum := _extremum(cond, a, b)) is not None:    # a running max / min: not a tree of selects
                env[key] = extremum
            else:
                env[key] = tirx.if_then_else(cond, a, b)
        return None

    def loop(self, stmt, env):
        extent, start = _const(stmt.extent), _const(stmt.min)
        if _only_scalar_code(stmt.body, self.scalars) and stmt.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            bound = extent if extent is not None else self.bounds.const_int_bound(stmt.extent).max_value
            if start is None or bound > MAX_UNROLL:
                raise TTUnsupportedError(
                    f"a loop of scalar work over {stmt.extent} iterations (at most {MAX_UNROLL} iterations, a "
                    "constant or bounded by the grid, are computed at compile time)", construct=describe(stmt),
                    source=self.src, fix="give the loop a constant trip count")
            for i in range(start, start + bound):
                body = tirx.stmt_functor.substitute(stmt.body, {stmt.loop_var: tirx.IntImm(stmt.loop_var.dtype, i)})
                if extent is None:      # iteration i runs when i < min + extent: scalar code under an if
                    body = tirx.IfThenElse(tirx.IntImm(stmt.loop_var.dtype, i) < stmt.min + stmt.extent, body, None)
                self.run(body, env)
            return None
        if stmt.kind == tirx.ForKind.PARALLEL:
            raise TTUnsupportedError(
                "a scalar local stored inside T.Parallel", construct=describe(stmt), source=self.src,
                fix="per-element values belong in a T.alloc_fragment buffer")
        stored = _stores(stmt.body, self.scalars)
        inner = {k: (_Unknown(f"{self.scalars[k[0]].name} is carried from one iteration of a loop that also moves "
                              "tiles into the next", k[0]) if k[0] in stored else v) for k, v in env.items()}
        for var in stored:
            buf = self.scalars[var]
            for key in _keys(buf):
                inner.setdefault(key, _Unknown(f"{buf.name} is carried from one iteration of a loop that also "
                                               "moves tiles into the next", var))
        body = self.run(stmt.body, inner)
        last = {stmt.loop_var: tirx.IntImm(stmt.loop_var.dtype, start + extent - 1)} if (
            extent is not None and start is not None and extent > 0) else None
        for key, v in inner.items():
            if key[0] not in stored:
                continue
            if last is None or isinstance(v, _Unknown):
                env[key] = _Unknown(f"{self.scalars[key[0]].name} was last stored in a loop without a constant trip "
                                    "count" if last is None else v.why)
            else:
                env[key] = tirx.stmt_functor.substitute(tirx.Evaluate(v), last).value
        body = body if body is not None else tirx.Evaluate(0)
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations)


def _extremum(cond, a, b):
    """``max(a, b)`` for ``if a > b: v = a`` (else ``v`` keeps ``b``), ``min(a, b)`` for ``if a < b``; else None."""
    if not (isinstance(cond, (tirx.GT, tirx.GE, tirx.LT, tirx.LE)) and cond.b.same_as(b) and
            tvm.ir.structural_equal(cond.a, a)):
        return None
    return tirx.Max(a, b) if isinstance(cond, (tirx.GT, tirx.GE)) else tirx.Min(a, b)


def _keys(buf):
    """Every (data var, index) of a scalar local."""
    return [(buf.data, idx) for idx in itertools.product(*(range(int(d)) for d in buf.shape))]


def _nodes(stmt):
    out = []
    tirx.stmt_functor.post_order_visit(stmt, out.append)
    return out


def _scalar_locals(block) -> dict:
    out = {}
    for buf in block.alloc_buffers:
        if str(buf.scope()) not in ("local", "local.var"):
            continue
        if not all(isinstance(d, tirx.IntImm) for d in buf.shape):
            continue
        n = 1
        for d in buf.shape:
            n *= int(d)
        if n <= MAX_ELEMS:
            out[buf.data] = buf
    return out


def _fills_as_stores(body, scalars):
    """``T.fill(x, v)`` / ``T.clear(x)`` of a scalar local (``T.alloc_local((1,), ...)`` zeroed before a loop, as
    TileLang's examples write it): a store of ``v`` to each element of the filled region."""
    def post(node):
        c = tile_op_call(node)
        if c is None or not c.op.same_as(TileOps.fill):
            return None
        region = decode_region(c.args[0])
        if region.buffer.data not in scalars:
            return None
        value = c.args[1]
        if value.dtype != region.buffer.dtype:
            value = tirx.Cast(region.buffer.dtype, value)
        stores = [tirx.BufferStore(region.buffer, value, [m + k for m, k in zip(region.mins, offset)])
                  for offset in itertools.product(*(range(int(e)) for e in region.extents))]
        return stores[0] if len(stores) == 1 else tirx.SeqStmt(stores)

    return transform(body, post, ["tirx.Evaluate"])


def forward_scalars(func: tirx.PrimFunc) -> tirx.PrimFunc:
    src = source_of(func)
    bounds = arith.Analyzer()
    for loop in grid_loops(func)[0]:
        bounds.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))

    def post(node):
        scalars = _scalar_locals(node)
        # stores inside T.Parallel are per-element code: those buffers stay for later passes to refuse
        for n in _nodes(node.body):
            if isinstance(n, tirx.For) and n.kind == tirx.ForKind.PARALLEL:
                for var in _stores(n.body, scalars):
                    scalars.pop(var, None)
        if not scalars:
            return None
        fragments: dict = {}      # a scalar carried across tile-loop iterations -> its one-element fragment
        while True:
            forward = _Forward(scalars, src, bounds)
            body = forward.run(_fills_as_stores(node.body, scalars), {})
            if not forward.carried:
                break
            for var in forward.carried:
                old = scalars.pop(var)
                fragments[old] = tirx.decl_buffer(old.shape, old.dtype, old.name, scope="local.fragment")
            node = tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint,
                               with_buffers(node.body, fragments), node.init, node.alloc_buffers, node.match_buffers,
                               node.annotations)
        allocs = [fragments.get(b, b) for b in node.alloc_buffers if b.data not in scalars]
        return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint,
                           body if body is not None else tirx.Evaluate(0), node.init, allocs, node.match_buffers,
                           node.annotations)

    body = transform(func.body, post, ["tirx.SBlock"])
    return func if body.same_as(func.body) else func.with_body(body)


def ForwardScalarsTT():
    @prim_func_pass("tt.ForwardScalarsTT")
    def transform(func, mod, ctx):
        return forward_scalars(func)

    return transform
