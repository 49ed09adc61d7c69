"""The printer: a ``ttir`` kernel body as C++ statements. It decides nothing.

Each call is printed from its ``intrinsics.CALLS`` entry; expressions by ``cexpr``; loops as
``for (uint32_t v = min; v < min + extent; ++v)``. A ``// <TileLang statement>`` comment precedes the first
call of each statement.
"""

from __future__ import annotations

from tvm import tirx

from .artifact import comment_text
from .cexpr import cexpr, nonneg, signed_vars
from .errors import TTLoweringError
from .intrinsics import CALLS, TTOps
from .ttir import CB, Call, Dst, For, Let, Lit, Scalar, Tensor, walk

INDENT = "    "


def arg_text(a, cb_vars: dict) -> str:
    if isinstance(a, CB):
        return cb_vars[a.name]
    if isinstance(a, Tensor):
        return a.name
    if isinstance(a, Dst):
        return arg_text(a.slot, cb_vars)
    if isinstance(a, Lit):
        return a.text
    if isinstance(a, Scalar) and a.raw:
        return cexpr(a.expr)
    if isinstance(a, Scalar):    # an integer expression of the kernel's (uint32) variables, signed, as a float
        value = f"static_cast<float>(static_cast<int32_t>({cexpr(a.expr)}))"
        return f"float_bits({value})" if a.bits else value
    if isinstance(a, bool):
        return str(int(a))
    if isinstance(a, int):
        return str(a)
    return cexpr(a)


def value_text(value, cb_vars: dict) -> str:
    """A ``Let`` value: an index expression, or an element the kernel reads from an index CB (TTOps.index_value)."""
    if isinstance(value, tirx.Call) and str(getattr(value.op, "name", "")) == "tilelang_tt.index_value":
        return f"index_value({cb_vars[str(value.args[0].value)]}, {cexpr(value.args[1])})"
    if isinstance(value, tirx.Call) and str(getattr(value.op, "name", "")) == "tilelang_tt.tile_value":
        return f"read_tile_value({cb_vars[str(value.args[0].value)]}, 0, {cexpr(value.args[1])})"
    if is_half_value(value):
        cb, word, shift, fp16 = value.args
        widen = "float16_bits" if int(fp16) else "bfloat16_bits"
        return f"{widen}(read_tile_value({cb_vars[str(cb.value)]}, 0, {cexpr(word)}), {cexpr(shift)})"
    return cexpr(value)


def is_half_value(value) -> bool:
    return isinstance(value, tirx.Call) and str(getattr(value.op, "name", "")) == "tilelang_tt.half_value"


def half_widenings(body: list) -> set[str]:
    """The helpers (``bfloat16_bits``, ``float16_bits``) the kernel's 16-bit scalar elements need."""
    from .ttir import Let, walk

    return {"float16_bits" if int(n.value.args[3]) else "bfloat16_bits"
            for n, _ in walk(body) if isinstance(n, Let) and is_half_value(n.value)}


def call_text(c: Call, cb_vars: dict) -> str:
    spec = CALLS.get(c.op)
    if spec is None:
        raise TTLoweringError(f"{c.op} has no C++ form", construct="printer")
    return spec.cpp.format(*(arg_text(a, cb_vars) for a in c.args)) + ";"


def print_body(body: list, cb_vars: dict, level: int = 1) -> str:
    lines: list[str] = []
    with signed_vars(element_vars(body)):
        _print(body, cb_vars, level, lines, [None])
    return "\n".join(lines)


def element_vars(body: list) -> list:
    """The variables ``Let`` binds to a tensor's elements (read from L1: ``index_value``, ``tile_value``) or to
    values computed from them that may be negative, in program order: signed for the printer (``cexpr``); the
    kernels' own variables stay unsigned."""
    signed: list = []
    for n, _ in walk(body):
        if isinstance(n, Let):
            with signed_vars(signed):
                read = isinstance(n.value, tirx.Call) and n.value.op.same_as(TTOps.index_value) or \
                    isinstance(n.value, tirx.Call) and n.value.op.same_as(TTOps.tile_value)
                derived = isinstance(n.value, tirx.PrimExpr) and not nonneg(n.value) and _reads_any(n.value, signed)
                if read or derived:
                    signed.append(n.var)
    return signed


def _reads_any(e, variables) -> bool:
    found = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.Var) and any(
        n.same_as(v) for v in variables) else None)
    return bool(found)


def _print(body, cb_vars, level, lines, last_note):
    pad = INDENT * level
    for n in body:
        if isinstance(n, For) and n.guard is not None:   # a block-level `if` (a loop of 0 or 1 trip)
            note = f"  // {comment_text(n.note)}" if n.note else ""
            lines.append(f"{pad}if ({_strip_parens(cexpr(n.guard))}) {{{note}")
            _print(n.body, cb_vars, level + 1, lines, last_note)
            lines.append(f"{pad}}}")
        elif isinstance(n, For):
            v, lo = n.var.name, n.min
            start = "0" if _is_zero(lo) else cexpr(lo)
            end = cexpr(n.extent) if _is_zero(lo) else f"{cexpr(lo)} + {cexpr(n.extent)}"
            note = f"  // {comment_text(n.note)}" if n.note else ""
            test = f"{v} < {end}"
            if _is_zero(lo) and not nonneg(n.extent):   # a trip count that may be negative (ceildiv(len - start, 64)) runs 0 trips
                test = f"static_cast<int32_t>({v}) < static_cast<int32_t>({_strip_parens(end)})"
            lines.append(f"{pad}for (uint32_t {v} = {start}; {test}; ++{v}) {{{note}")
            _print(n.body, cb_vars, level + 1, lines, last_note)
            lines.append(f"{pad}}}")
        elif isinstance(n, Let):
            lines.append(f"{pad}const uint32_t {n.var.name} = {value_text(n.value, cb_vars)};")
        else:
            if n.note and n.note != last_note[0]:
                lines.append(f"{pad}// {comment_text(n.note)}")
                last_note[0] = n.note
            lines.append(pad + call_text(n, cb_vars))


def _strip_parens(text: str) -> str:
    """``(a < b)`` -> ``a < b`` (an if's condition has parentheses of its own)."""
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and i < len(text) - 1:
                return text
        return text[1:-1]
    return text


def _is_zero(e) -> bool:
    return (isinstance(e, int) and e == 0) or (isinstance(e, tirx.IntImm) and int(e.value) == 0)


def uses_runtime_scalars(body: list) -> bool:
    from .ttir import calls

    return any(isinstance(a, Scalar) and a.bits and not a.raw for c in calls(body) for a in c.args)


def headers(body: list) -> set[str]:
    from .ttir import calls

    return {CALLS[c.op].header for c in calls(body) if CALLS.get(c.op) and CALLS[c.op].header}
