"""Print TIR index expressions as C++ (uint32_t arithmetic; every value the kernels compute is >= 0)."""

from __future__ import annotations

from tvm import tirx

from tvm.ir import Op

from .errors import TTLoweringError

# Bit operators TileLang's device passes (LowerIntrin) use for power-of-two division and modulo.
_BIT_OPS = {"tirx.shift_right": ">>", "tirx.shift_left": "<<", "tirx.bitwise_and": "&", "tirx.bitwise_or": "|"}

_BIN = {tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.FloorDiv: "/", tirx.FloorMod: "%", tirx.Div: "/",
        tirx.Mod: "%"}
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}
_CMP = {tirx.EQ: "==", tirx.NE: "!=", tirx.LT: "<", tirx.LE: "<=", tirx.GT: ">", tirx.GE: ">="}


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
    if isinstance(e, tirx.Call) and isinstance(e.op, Op) and str(e.op.name) == "tirx.if_then_else":
        e = tirx.Select(*e.args)
    if isinstance(e, tirx.Select):
        return f"({cexpr(e.condition, names, 3)} ? {cexpr(e.true_value, names, 3)} : {cexpr(e.false_value, names, 3)})"
    raise TTLoweringError(f"cannot print {type(e).__name__} `{e}` as a C++ index expression",
                          construct="index expression")
