"""PlaceCBPops: the CB protocol of blocks compute consumes from another stage.

In:  a ``ttir.Program`` whose compute body marks each consumed block with ``consume(cb, pages)`` (a
     reader block, a transposed scratch block).
Out: ``consume`` becomes ``cb_wait_front(cb, pages)`` at the same place, and ``cb_pop_front(cb, pages)``
     is inserted in the same scope right after the last statement that uses the CB (its liveness end), so
     the producer can refill the pages as early as possible.
Errors: none (a program without ``consume`` is unchanged).
"""

from __future__ import annotations

from ..ttir import CB, Call, For, Program, calls


def _uses(node, cb: CB) -> bool:
    nodes = calls(node.body) if isinstance(node, For) else ([node] if isinstance(node, Call) else [])
    return any(isinstance(a, CB) and a == cb for c in nodes for a in c.args)


def place_pops(body: list) -> list:
    out: list = []
    for node in body:
        if isinstance(node, For):
            node = node.rebuilt(place_pops(node.body))
        if isinstance(node, Call) and node.op == "consume":
            node = Call("cb_wait_front", node.args, node.note, node.origin)
            node.consume = True          # the pop is placed below, once the scope is complete
        out.append(node)
    pops: dict[int, list] = {}
    for i, node in enumerate(out):
        if isinstance(node, Call) and getattr(node, "consume", False):
            cb, pages = node.args
            last = max(j for j in range(i, len(out)) if _uses(out[j], cb))
            pops.setdefault(last, []).append(Call("cb_pop_front", (cb, pages), node.note))
    result = []
    for i, node in enumerate(out):
        result += [node] + pops.get(i, [])
    return result


def place_cb_pops(program: Program) -> Program:
    for kernel in program.kernels.values():
        kernel.body = place_pops(kernel.body)
    return program
