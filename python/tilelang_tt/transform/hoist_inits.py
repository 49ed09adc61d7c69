"""HoistInits: each init and data-format reconfiguration runs once, where it is needed.

In:  a ``ttir.Program`` whose compute body has an init (and, for unpack/pack, a reconfiguration) before
     every tile op, as LowerToTTProgram emits them.
Out: (1) hoisting: when everything in a loop that configures one unit (the unpacker + FPU, the SFPU, the
     packer's format) is the same call with loop-invariant arguments, that call is placed before the loop;
     (2) elimination: a forward pass over the program (loops to a fixpoint) tracks the configured state
     (FPU init, SFPU init, SrcA / SrcB / pack formats) and drops every call that leaves it unchanged. A kept
     unpack reconfiguration invalidates the FPU init, so the init after it is always kept (the LLK requires
     ``reconfig_data_format*`` before the init it affects).
Errors: none.
"""

from __future__ import annotations

from ..intrinsics import CALLS
from ..ttir import CB, Call, For, Program, calls

UNKNOWN = "?"
_UNITS = ("fpu", "sfpu", "srca", "srcb", "pack")


def _key(call: Call):
    return (call.op, tuple(a if isinstance(a, CB) else getattr(a, "text", str(a)) for a in call.args))


class _Formats:
    def __init__(self, program: Program):
        self.fmt = {name: cb.fmt for name, cb in program.cbs.items()}

    def of(self, a):
        return self.fmt[a.name] if isinstance(a, CB) else UNKNOWN


def startup_formats(call: Call) -> dict:
    """The CBs whose formats ``compute_kernel_hw_startup`` configures SrcA, SrcB and the packer for."""
    a, b, out = call.args
    if call.op == "hw_startup_matmul":     # SrcOrder::Reverse: in0 -> SrcB, in1 -> SrcA
        a, b = b, a
    return {"srca": a, "srcb": b, "pack": out}


def _unit(call: Call) -> str | None:
    spec = CALLS.get(call.op)
    if spec is None:
        return None
    if spec.kind == "init":
        return spec.unit
    if spec.kind == "reconfig":
        return "pack" if call.op == "pack_reconfig_data_format" else "unpack"
    return None


def _step(call: Call, state: dict, formats: _Formats) -> bool:
    """Apply ``call`` to ``state``; True when it changes nothing (redundant)."""
    spec = CALLS.get(call.op)
    if spec is None:
        return False
    if spec.kind == "startup":
        state.update(fpu=UNKNOWN, sfpu=UNKNOWN, **{r: formats.of(a) for r, a in startup_formats(call).items()})
        return False
    if spec.kind == "init":
        key = _key(call)
        same = state[spec.unit] == key
        state[spec.unit] = key
        return same
    if call.op == "pack_reconfig_data_format":
        new = formats.of(call.args[0])
        same = new != UNKNOWN and state["pack"] == new
        state["pack"] = new
        return same
    if spec.kind == "reconfig":
        regs = ("srca", "srcb") if call.op == "reconfig_data_format" else ("srca",)
        new = [formats.of(a) for a in call.args]
        same = all(n != UNKNOWN and state[r] == n for r, n in zip(regs, new))
        if not same:
            state.update(dict(zip(regs, new)), fpu=UNKNOWN)
        return same
    return False


def _meet(a: dict, b: dict) -> dict:
    return {u: a[u] if a[u] == b[u] else UNKNOWN for u in _UNITS}


def _eliminate(body: list, state: dict, formats: _Formats) -> list:
    out = []
    for node in body:
        if isinstance(node, For):
            entry = dict(state)
            for _ in range(4):
                trial = dict(entry)
                _eliminate(node.body, trial, formats)
                merged = _meet(entry, trial)
                if merged == entry:
                    break
                entry = merged
            inner_state = dict(entry)
            out.append(node.rebuilt(_eliminate(node.body, inner_state, formats)))
            state.update(_meet(state, inner_state))
            continue
        if isinstance(node, Call) and _step(node, state, formats):
            continue
        out.append(node)
    return out


def _invariant(call: Call, loop: For) -> bool:
    return all(not (hasattr(a, "same_as") and a.same_as(loop.var)) for a in call.args)


def _hoist(body: list) -> list:
    out = []
    for node in body:
        if not isinstance(node, For):
            out.append(node)
            continue
        node = node.rebuilt(_hoist(node.body))
        by_unit: dict[str, list] = {}
        for c in calls(node.body):
            if _unit(c) is not None:
                by_unit.setdefault(_unit(c), []).append(c)
        hoisted = []
        for unit in ("unpack", "fpu", "sfpu", "pack"):
            group = by_unit.get(unit, [])
            if group and len({_key(c) for c in group}) == 1 and _invariant(group[0], node):
                if unit == "fpu" and len({_key(c) for c in by_unit.get("unpack", [])}) > 1:
                    continue   # differing reconfigurations inside: the init must stay after each of them
                hoisted.append(Call(group[0].op, group[0].args, group[0].note, group[0].origin))
        out += hoisted + [node]
    return out


def hoist_inits(program: Program) -> Program:
    formats = _Formats(program)
    k = program.kernels["compute"]
    state = {u: UNKNOWN for u in _UNITS}
    if k.startup is not None:
        _step(k.startup, state, formats)
    k.body = _eliminate(_hoist(k.body), state, formats)
    return program
