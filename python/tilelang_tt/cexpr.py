"""Print TIR index expressions as C++.

The kernels' variables (block indices, loop counters, runtime arguments, symbolic dimensions) are uint32_t and never
negative, and ``+ - *`` in uint32_t give the two's complement bits of the signed result. Where an operation reads
the sign - floor division and modulo, min / max, comparisons - and an operand may be negative (a subtraction:
``(bx * 64 - window) // 64``, the first K block of a sliding window), its operands are printed as int32_t and
division and modulo round toward negative infinity, as TIR's FloorDiv / FloorMod do. The variables that hold a
tensor's elements (``const uint32_t S_value = read_tile_value(...)``) may be negative: the printer names them
(``signed_vars``) while it prints a kernel."""

from __future__ import annotations

import contextlib
import contextvars

from tvm import tirx

from tvm.ir import Op

from .errors import TTLoweringError

# Bit operators TileLang's device passes (LowerIntrin) use for power-of-two division and modulo.
_BIT_OPS = {"tirx.shift_right": ">>", "tirx.shift_left": "<<", "tirx.bitwise_and": "&", "tirx.bitwise_or": "|"}

_BIN = {tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.FloorDiv: "/", tirx.FloorMod: "%", tirx.Div: "/",
        tirx.Mod: "%"}
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}
_CMP = {tirx.EQ: "==", tirx.NE: "!=", tirx.LT: "<", tirx.LE: "<=", tirx.GT: ">", tirx.GE: ">="}


# The variables of the kernel being printed that hold possibly negative values (tensor elements, and values
# computed from them), set by ``signed_vars``.
_SIGNED: contextvars.ContextVar = contextvars.ContextVar("tt_signed_vars", default=())


@contextlib.contextmanager
def signed_vars(variables):
    """Print with ``variables`` (tirx.Var) taken as signed: ``nonneg`` does not assume them >= 0."""
    token = _SIGNED.set(tuple(variables))
    try:
        yield
    finally:
        _SIGNED.reset(token)


def nonneg(e) -> bool:
    """Whether ``e`` is >= 0 for every value of the kernel's (unsigned) variables, by its form."""
    if isinstance(e, int):
        return e >= 0
    if isinstance(e, tirx.IntImm):
        return int(e.value) >= 0
    if isinstance(e, tirx.Var):
        return not any(e.same_as(v) for v in _SIGNED.get())
    if isinstance(e, tirx.Cast):
        return nonneg(e.value)
    if isinstance(e, (tirx.Add, tirx.Mul, tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod, tirx.Min)):
        return nonneg(e.a) and nonneg(e.b)
    if isinstance(e, tirx.Max):
        return nonneg(e.a) or nonneg(e.b)
    if isinstance(e, tirx.Sub):
        return _lowest(e) >= 0
    if isinstance(e, tirx.Select):
        return nonneg(e.true_value) and nonneg(e.false_value)
    if isinstance(e, tirx.Call) and isinstance(e.op, Op) and str(e.op.name) == "tirx.if_then_else":
        return nonneg(e.args[1]) and nonneg(e.args[2])
    if isinstance(e, tirx.Call) and isinstance(e.op, Op) and str(e.op.name) in _BIT_OPS:
        return all(nonneg(a) for a in e.args)
    return isinstance(e, (*_CMP, tirx.And, tirx.Or, tirx.Not))      # a comparison or a logical value is 0 or 1


def _lowest(e) -> int:
    """The least value of ``e`` with every variable in [0, 2^31) (TVM's integer bound analysis)."""
    import tvm

    analyzer = tvm.arith.Analyzer()
    seen = {}
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: seen.setdefault(n.name, n)
                                       if isinstance(n, tirx.Var) else None)
    for var in seen.values():
        low = 0 if nonneg(var) else -2 ** 31
        analyzer.bind(var, tvm.ir.Range.from_min_extent(low, 2 ** 31 - 1 - low))
    return analyzer.const_int_bound(e).min_value


def _signed(e, names) -> str:
    """``e`` as an int32_t expression."""
    if isinstance(e, (int, tirx.IntImm)):
        return str(int(e) if isinstance(e, int) else int(e.value))
    signed = _signed_op(e, names)
    return signed if signed is not None else f"static_cast<int32_t>({cexpr(e, names)})"


def _signed_op(e, names) -> str | None:
    """A sign-reading operation with an operand that may be negative, in int32_t; None when none may be."""
    pairs = [*_CMP.items(), (tirx.Min, "min"), (tirx.Max, "max"), (tirx.FloorDiv, "/"), (tirx.FloorMod, "%"),
             (tirx.Div, "trunc/"), (tirx.Mod, "trunc%")]
    kind = next((sym for cls, sym in pairs if isinstance(e, cls)), None)
    if kind is None or (nonneg(e.a) and nonneg(e.b)):
        return None
    if kind in ("==", "!=") and not any(_negative_constant(x) for x in (e.a, e.b)):
        return None     # == and != read the bits alike: uint32 unless a side is a negative literal
    a, b = _signed(e.a, names), _signed(e.b, names)
    if kind in ("min", "max"):
        return f"({a} {'<' if kind == 'min' else '>'} {b} ? {a} : {b})"
    if kind.startswith("trunc"):     # TIR's Div / Mod truncate toward zero, as C++'s signed / and % do
        return f"({a} {kind[-1]} {b})"
    if kind not in ("/", "%"):
        return f"({a} {kind} {b})"
    if not (isinstance(e.b, tirx.IntImm) and int(e.b.value) > 0):
        raise TTLoweringError(f"cannot print `{e}` as C++: floor division or modulo of a value that may be negative "
                              "by a divisor that is not a positive constant", construct="index expression")
    d = int(e.b.value)
    if kind == "/":     # toward negative infinity
        return f"({a} >= 0 ? {a} / {d} : -(({d - 1} - {a}) / {d}))"
    return f"(({a} % {d} + {d}) % {d})"


def _negative_constant(e) -> bool:
    return isinstance(e, tirx.IntImm) and int(e.value) < 0


def cexpr(e, names: dict | None = None, prec: int = 0) -> str:
    """C++ text of ``e``; ``names`` renames Vars (by object identity) to C++ identifiers."""
    names = names or {}
    if isinstance(e, int):
        return f"{e}u" if e >= 0 else str(e)
    if isinstance(e, tirx.IntImm):
        return f"{int(e.value)}u" if int(e.value) >= 0 else f"({int(e.value)})"
    if isinstance(e, tirx.Var):
        for var, name in names.items():
            if var.same_as(e):
                return name
        return e.name
    if isinstance(e, tirx.Cast):
        return cexpr(e.value, names, prec)
    signed = _signed_op(e, names)
    if signed is not None:
        return signed
    for cls, sym in _BIN.items():
        if isinstance(e, cls):
            p = _PREC[sym]
            text = f"{cexpr(e.a, names, p)} {sym} {cexpr(e.b, names, p + 1)}"
            return f"({text})" if p < prec else text
    if isinstance(e, tirx.Call) and isinstance(e.op, Op) and str(e.op.name) in _BIT_OPS and len(e.args) == 2:
        return f"({cexpr(e.args[0], names, 3)} {_BIT_OPS[str(e.op.name)]} {cexpr(e.args[1], names, 3)})"
    if isinstance(e, (tirx.Min, tirx.Max)):
        a, b = cexpr(e.a, names, 3), cexpr(e.b, names, 3)
        cmp = "<" if isinstance(e, tirx.Min) else ">"
        return f"({a} {cmp} {b} ? {a} : {b})"
    for cls, sym in _CMP.items():
        if isinstance(e, cls):
            return f"({cexpr(e.a, names, 3)} {sym} {cexpr(e.b, names, 3)})"
    if isinstance(e, (tirx.And, tirx.Or)):
        return f"({cexpr(e.a, names, 3)} {'&&' if isinstance(e, tirx.And) else '||'} {cexpr(e.b, names, 3)})"
    if isinstance(e, tirx.Not):
        return f"(!{cexpr(e.a, names, 3)})"
    if isinstance(e, tirx.Call) and isinstance(e.op, Op) and str(e.op.name) == "tirx.if_then_else":
        e = tirx.Select(*e.args)
    if isinstance(e, tirx.Select):
        return f"({cexpr(e.condition, names, 3)} ? {cexpr(e.true_value, names, 3)} : {cexpr(e.false_value, names, 3)})"
    raise TTLoweringError(f"cannot print {type(e).__name__} `{e}` as a C++ index expression",
                          construct="index expression")
