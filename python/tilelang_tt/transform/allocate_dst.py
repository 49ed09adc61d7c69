"""AllocateDST: virtual DST registers become DST slots.

In:  a ``ttir.Program`` whose compute calls name DST tiles as ``Dst(VReg)`` (elementwise values) or
     ``Dst(int | PrimExpr)`` (matmul accumulators, fills: already physical).
Out: every ``VReg`` replaced by the lowest free slot, per DST acquire (``tile_regs_acquire`` ..
     ``tile_regs_release``, loops inside it included): a register is live from its first to its last mention, so an SFPU binary
     op's second operand frees its slot as soon as it is consumed.
Errors: TTUnsupportedError when one acquire needs more slots than DST holds in the kernel's accumulation
     mode (the expression is too deep: split it over two T.Parallel loops).
"""

from __future__ import annotations

from ..errors import TTUnsupportedError
from ..ttir import Call, Dst, For, Program, VReg, calls


def _regs(call: Call) -> list:
    return [a.slot for a in call.args if isinstance(a, Dst) and isinstance(a.slot, VReg)]


def _allocate(window: list, capacity: int, source) -> dict:
    last = {}
    for i, c in enumerate(window):
        for r in _regs(c):
            last[r] = i
    slots, free = {}, list(range(capacity))
    for i, c in enumerate(window):
        for r in _regs(c):
            if r not in slots:
                if not free:
                    raise TTUnsupportedError(f"the expression needs more than the {capacity} DST tiles of this "
                                             "kernel's accumulation mode", construct=c.note, source=source,
                                             fix="split the expression over two T.Parallel loops")
                slots[r] = free.pop(0)
        for r in set(_regs(c)):
            if last[r] == i:
                free.append(slots[r])
                free.sort()
    return slots


def _rewrite(body: list, capacity: int, source) -> list:
    out, window = [], None
    for node in body:
        if isinstance(node, For) and window is not None:
            window += list(calls(node.body))     # a loop inside one acquire (a reduction over tiles)
            out.append(node)
            continue
        if isinstance(node, For):
            node = node.rebuilt(_rewrite(node.body, capacity, source))
        elif isinstance(node, Call) and node.op == "tile_regs_acquire":
            window = []
        if isinstance(node, Call) and window is not None:
            window.append(node)
            if node.op == "tile_regs_release":
                slots = _allocate(window, capacity, source)
                for c in window:
                    c.args = tuple(Dst(slots[a.slot]) if isinstance(a, Dst) and isinstance(a.slot, VReg) else a
                                   for a in c.args)
                window = None
        out.append(node)
    return out


def allocate_dst(program: Program) -> Program:
    k = program.kernels["compute"]
    k.body = _rewrite(k.body, program.dst_capacity, program.source)
    return program
