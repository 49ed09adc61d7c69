"""PruneProgram: each kernel keeps what it needs, with its index arithmetic simplified.

In:  a ``ttir.Program`` whose kernels share the tile program's loops and ``Let``s.
Out: per kernel, loops with no call inside are removed and a ``Let`` is kept only when a later node of
     its kernel reads its variable (liveness, backwards); PrimExpr arguments and loop bounds are
     simplified (``0 * 4 + k`` -> ``k``).
Errors: none.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..ttir import Call, Dst, For, Let, Program, Scalar


def _vars(e, out: set):
    if isinstance(e, Scalar):
        _vars(e.expr, out)
        return
    if isinstance(e, Dst):
        e = e.slot
    if isinstance(e, tirx.PrimExpr):
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: out.add(n.name) if isinstance(n, tirx.Var) else None)


def _simplify(e, analyzer):
    if isinstance(e, Dst) and isinstance(e.slot, tirx.PrimExpr):
        return Dst(_simplify(e.slot, analyzer))
    if isinstance(e, tirx.PrimExpr) and not isinstance(e, (tirx.IntImm, tirx.Var)):
        s = analyzer.simplify(e)
        return int(s.value) if isinstance(s, tirx.IntImm) else s
    if isinstance(e, tirx.IntImm):
        return int(e.value)
    return e


def _prune(body: list, live: set, analyzer) -> list:
    """``live``: variables read after this body (updated to those read by it or after it)."""
    out = []
    for node in reversed(body):
        if isinstance(node, For):
            inner = _prune(node.body, set(live), analyzer)
            if not any(isinstance(n, (Call, For)) for n in inner):
                continue
            node = node.rebuilt(inner, _simplify(node.min, analyzer), _simplify(node.extent, analyzer))
            used: set = set()
            _reads(inner, used)
            live |= used
            _vars(node.min, live)
            _vars(node.extent, live)
        elif isinstance(node, Let):
            if node.var.name not in live:
                continue
            _vars(node.value, live)
        elif isinstance(node, Call):
            node = Call(node.op, tuple(_simplify(a, analyzer) for a in node.args), node.note, node.origin)
            for a in node.args:
                _vars(a, live)
        out.append(node)
    return out[::-1]


def _reads(body, out: set):
    for n in body:
        if isinstance(n, For):
            _vars(n.min, out)
            _vars(n.extent, out)
            _reads(n.body, out)
        elif isinstance(n, Let):
            _vars(n.value, out)
        elif isinstance(n, Call):
            for a in n.args:
                _vars(a, out)


def prune_program(program: Program) -> Program:
    analyzer = tvm.arith.Analyzer()
    for kernel in program.kernels.values():
        kernel.body = _prune(kernel.body, set(), analyzer)
    return program


def kernel_reads(body: list) -> set[str]:
    """Names of the variables a kernel body reads (its runtime args to declare)."""
    out: set = set()
    _reads(body, out)
    return out
