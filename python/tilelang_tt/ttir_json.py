"""``tt.program.json``: the explicit TT program (``ttir``) as data, and read back into the same nodes.

An artifact carries its program twice: ``tt.program.txt`` for people (``ttir.dump``) and ``tt.program.json`` for
tools (the performance model walks it; ``load(dump(...))`` gives back nodes that print the same text). Index
expressions stay expression trees, never C++ text, and ``evaluate`` computes them for one core's values.

Encoding (``FORMAT`` 1)
  program   {"format", "name", "dst_capacity", "fp32_dest_acc", "source", "multicast", "interface", "cbs": [cb], "kernels":
            {role: {"startup": call | null, "body": [node]}}}
  node      {"for": var, "min": e, "extent": e, "body": [node], "note", "persistent", "guard": e | null, "branch": [group, sender] | null} | {"let": var, "value": e}
            | {"call": op, "args": [arg], "note", "origin"}
  arg       e | {"cb": name} | {"tensor": name} | {"dst": e | {"vreg": id}} | {"lit": text}
            | {"scalar": e, "bits": bool, "raw": bool}
  e         int (a Python int) | true / false | {"imm": int, "t": dtype} | {"fimm": float, "t": dtype}
            | {"str": text} | {"var": name, "t": dtype} | {"op": name, "args": [e], "t": dtype}   (``_OPS``; "call:<tvm op>")
"""

from __future__ import annotations

import json
from pathlib import Path

import tvm
from tvm import tirx

from . import ttir

FORMAT = 1

_OPS = {tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.FloorDiv: "floordiv", tirx.FloorMod: "floormod",
        tirx.Div: "div", tirx.Mod: "mod", tirx.Min: "min", tirx.Max: "max", tirx.EQ: "eq", tirx.NE: "ne",
        tirx.LT: "lt", tirx.LE: "le", tirx.GT: "gt", tirx.GE: "ge", tirx.And: "and", tirx.Or: "or"}
_CLASSES = {name: cls for cls, name in _OPS.items()}

# integer semantics of each operator (the kernels compute on uint32 values that are all >= 0)
_INT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "floordiv": lambda a, b: a // b, "div": lambda a, b: a // b, "floormod": lambda a, b: a % b,
        "mod": lambda a, b: a % b, "min": min, "max": max, "eq": lambda a, b: int(a == b),
        "ne": lambda a, b: int(a != b), "lt": lambda a, b: int(a < b), "le": lambda a, b: int(a <= b),
        "gt": lambda a, b: int(a > b), "ge": lambda a, b: int(a >= b), "and": lambda a, b: int(bool(a and b)),
        "or": lambda a, b: int(bool(a or b)), "call:tirx.shift_right": lambda a, b: a >> b,
        "call:tirx.shift_left": lambda a, b: a << b, "call:tirx.bitwise_and": lambda a, b: a & b,
        "call:tirx.bitwise_or": lambda a, b: a | b}


class ProgramFormatError(ValueError):
    """``tt.program.json`` holds something this version cannot read."""


# ---- write --------------------------------------------------------------------------------------------------
def expr_to_json(e):
    if isinstance(e, bool) or isinstance(e, int):
        return e
    if isinstance(e, tirx.IntImm):
        return {"imm": int(e.value), "t": str(e.dtype)}
    if isinstance(e, tirx.FloatImm):
        return {"fimm": float(e.value), "t": str(e.dtype)}
    if isinstance(e, tirx.StringImm):
        return {"str": str(e.value)}
    if isinstance(e, tirx.Var):
        return {"var": e.name, "t": str(e.dtype)}
    if isinstance(e, tirx.Cast):
        return {"op": "cast", "args": [expr_to_json(e.value)], "t": str(e.dtype)}
    if isinstance(e, tirx.Select):
        return {"op": "select", "args": [expr_to_json(x) for x in (e.condition, e.true_value, e.false_value)],
                "t": str(e.dtype)}
    if isinstance(e, tirx.Not):
        return {"op": "not", "args": [expr_to_json(e.a)], "t": str(e.dtype)}
    if isinstance(e, tirx.Call) and isinstance(e.op, tvm.ir.Op):
        return {"op": f"call:{e.op.name}", "args": [expr_to_json(x) for x in e.args], "t": str(e.dtype)}
    name = _OPS.get(type(e))
    if name is None:
        raise ProgramFormatError(f"no JSON form for {type(e).__name__} `{e}`")
    return {"op": name, "args": [expr_to_json(e.a), expr_to_json(e.b)], "t": str(e.dtype)}


def _arg_to_json(a):
    if isinstance(a, ttir.CB):
        return {"cb": a.name}
    if isinstance(a, ttir.Tensor):
        return {"tensor": a.name}
    if isinstance(a, ttir.Dst):
        return {"dst": {"vreg": a.slot.id} if isinstance(a.slot, ttir.VReg) else expr_to_json(a.slot)}
    if isinstance(a, ttir.Lit):
        return {"lit": a.text}
    if isinstance(a, ttir.Scalar):
        return {"scalar": expr_to_json(a.expr), "bits": a.bits, "raw": a.raw}
    return expr_to_json(a)


def _call_to_json(c: ttir.Call) -> dict:
    return {"call": c.op, "args": [_arg_to_json(a) for a in c.args], "note": c.note, "origin": c.origin}


def _body_to_json(body: list) -> list:
    out = []
    for n in body:
        if isinstance(n, ttir.For):
            out.append({"for": expr_to_json(n.var), "min": expr_to_json(n.min), "extent": expr_to_json(n.extent),
                        "body": _body_to_json(n.body), "note": n.note, "persistent": n.persistent,
                        "guard": None if n.guard is None else expr_to_json(n.guard),
                        "branch": None if n.branch is None else list(n.branch)})
        elif isinstance(n, ttir.Let):
            out.append({"let": expr_to_json(n.var), "value": expr_to_json(n.value)})
        else:
            out.append(_call_to_json(n))
    return out


def to_json(program: ttir.Program) -> dict:
    cbs = [{"name": cb.name, "index": cb.index, "fmt": cb.fmt, "block_tiles": cb.block_tiles,
            "num_pages": cb.num_pages, "shape_tiles": list(cb.shape_tiles), "producer": list(cb.producer),
            "consumer": list(cb.consumer), "role": cb.role, "page_size": cb.page_size, "depth": cb.depth,
            "dtype": cb.dtype, "band": cb.band, "accumulate": cb.accumulate, "residency": cb.residency,
            "subblock": None if cb.subblock is None else list(cb.subblock)}
           for cb in sorted(program.cbs.values(), key=lambda c: c.index)]
    kernels = {role: {"startup": _call_to_json(k.startup) if k.startup is not None else None,
                      "body": _body_to_json(k.body)} for role, k in program.kernels.items()}
    return {"format": FORMAT, "name": program.name, "dst_capacity": program.dst_capacity,
            "fp32_dest_acc": program.fp32_dest_acc, "source": program.source, "multicast": program.multicast,
            "interface": program.interface,
            "cbs": cbs, "kernels": kernels}


def dumps(program: ttir.Program) -> str:
    return json.dumps(to_json(program), indent=1) + "\n"


# ---- read ---------------------------------------------------------------------------------------------------
class _Reader:
    """Rebuilds nodes; one ``tirx.Var`` per name, so every use of a loop or let variable is the same object."""

    def __init__(self):
        self.vars: dict[str, tirx.Var] = {}

    def expr(self, d):
        if isinstance(d, (bool, int)):
            return d
        if not isinstance(d, dict):
            raise ProgramFormatError(f"not an expression: {d!r}")
        if "imm" in d:
            return tirx.IntImm(d["t"], d["imm"])
        if "fimm" in d:
            return tirx.FloatImm(d["t"], d["fimm"])
        if "str" in d:
            return tirx.StringImm(d["str"])
        if "var" in d:
            if d["var"] not in self.vars:
                self.vars[d["var"]] = tirx.Var(d["var"], d["t"])
            return self.vars[d["var"]]
        op, args = d.get("op"), [self.expr(a) for a in d.get("args", [])]
        if op == "cast":
            return tirx.Cast(d["t"], args[0])
        if op == "select":
            return tirx.Select(*args)
        if op == "not":
            return tirx.Not(args[0])
        if isinstance(op, str) and op.startswith("call:"):
            return tirx.Call(d["t"], tvm.ir.Op.get(op[len("call:"):]), args)
        if op in _CLASSES:
            return _CLASSES[op](*args)
        raise ProgramFormatError(f"unknown expression operator {op!r}")

    def arg(self, d):
        if isinstance(d, dict):
            if "cb" in d:
                return ttir.CB(d["cb"])
            if "tensor" in d:
                return ttir.Tensor(d["tensor"])
            if "dst" in d:
                slot = d["dst"]
                return ttir.Dst(ttir.VReg(slot["vreg"]) if isinstance(slot, dict) and "vreg" in slot
                                else self.expr(slot))
            if "lit" in d:
                return ttir.Lit(d["lit"])
            if "scalar" in d:
                return ttir.Scalar(self.expr(d["scalar"]), d["bits"], d["raw"])
        return self.expr(d)

    def call(self, d) -> ttir.Call:
        return ttir.Call(d["call"], tuple(self.arg(a) for a in d["args"]), d.get("note", ""), d.get("origin", ""))

    def body(self, items: list) -> list:
        out = []
        for d in items:
            if "for" in d:
                guard, branch = d.get("guard"), d.get("branch")
                out.append(ttir.For(self.expr(d["for"]), self.expr(d["min"]), self.expr(d["extent"]),
                                    self.body(d["body"]), d.get("note", ""), d.get("persistent", False),
                                    None if guard is None else self.expr(guard),
                                    None if branch is None else (str(branch[0]), bool(branch[1]))))
            elif "let" in d:
                out.append(ttir.Let(self.expr(d["let"]), self.expr(d["value"])))
            elif "call" in d:
                out.append(self.call(d))
            else:
                raise ProgramFormatError(f"unknown program node {sorted(d)}")
        return out


def from_json(data: dict) -> ttir.Program:
    if data.get("format") != FORMAT:
        raise ProgramFormatError(f"tt.program.json format {data.get('format')!r}; this version reads {FORMAT}")
    r = _Reader()
    cbs = {c["name"]: ttir.CBInfo(c["name"], c["index"], c["fmt"], c["block_tiles"], c["num_pages"],
                                  tuple(c["shape_tiles"]), tuple(c["producer"]), tuple(c["consumer"]), c["role"],
                                  page_size=c.get("page_size", 0), depth=c.get("depth", 1), dtype=c.get("dtype", ""),
                                  band=c.get("band"), accumulate=c.get("accumulate"), residency=c.get("residency"),
                                  subblock=tuple(c["subblock"]) if c.get("subblock") is not None else None)
           for c in data["cbs"]}
    kernels = {role: ttir.Kernel(role, r.body(k["body"]), r.call(k["startup"]) if k["startup"] else None)
               for role, k in data["kernels"].items()}
    return ttir.Program(data["name"], kernels, cbs, data["dst_capacity"], data.get("source"),
                        data.get("fp32_dest_acc", False), data.get("multicast"), data.get("interface"))


def load(path: Path) -> ttir.Program:
    return from_json(json.loads(Path(path).read_text()))


# ---- evaluate -----------------------------------------------------------------------------------------------
def names(e) -> set[str]:
    """The variables an expression reads."""
    if isinstance(e, (bool, int)):
        return set()
    found: set[str] = set()
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.add(n.name)
                                       if isinstance(n, tirx.Var) else None)
    return found


def evaluate(e, env: dict) -> int:
    """``e`` as an integer, its variables taken from ``env`` (name -> int). LookupError names a variable ``env``
    does not hold; ProgramFormatError an operator with no integer meaning."""
    if isinstance(e, (bool, int)):
        return int(e)
    if isinstance(e, tirx.IntImm):
        return int(e.value)
    if isinstance(e, tirx.Var):
        if e.name not in env:
            raise LookupError(e.name)
        return int(env[e.name])
    if isinstance(e, tirx.Cast):
        return evaluate(e.value, env)
    if isinstance(e, tirx.Select):
        return evaluate(e.true_value, env) if evaluate(e.condition, env) else evaluate(e.false_value, env)
    if isinstance(e, tirx.Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, tirx.Call) and isinstance(e.op, tvm.ir.Op):
        fn = _INT.get(f"call:{e.op.name}")
        if fn is None or len(e.args) != 2:
            raise ProgramFormatError(f"`{e}` has no integer value")
        return fn(evaluate(e.args[0], env), evaluate(e.args[1], env))
    name = _OPS.get(type(e))
    if name is None:
        raise ProgramFormatError(f"`{e}` has no integer value")
    return _INT[name](evaluate(e.a, env), evaluate(e.b, env))
