"""TTMulticastReuse: 2-D multicast of the blocks every core of a lattice row (or column) reads alike.

tt-metal's ``matmul_multicore_reuse_mcast``: in0 (A) is read from DRAM once per core row and multicast along it,
in1 (B) once per core column and multicast down it; a sender/receiver semaphore pair per operand keeps the
sender from overwriting a block before every receiver is ready and every receiver from using it before it has
landed (../shared/reference/TT_KERNEL_PATTERNS.md section 3, TT_METALIUM_API.md 6.4).

In:  the explicit TT program (``ttir.Program``) after LowerToTTProgram, and the lowered PrimFunc: its schedule
     (``tt.schedule``: ``multicast`` from ``T.annotate_tt_schedule``, the per-core ``mapping``) and the schedule
     arguments it takes (``tt.runtime_args``).
Out: when the schedule is a multicast lattice (``rect`` rectangles of equal size, rectangle (r, c) on core
     (y=r, x=c)): every ``read_tiles`` in the reader's persistent loop whose tile indices and enclosing trip
     counts depend on the core's lattice row only (``rect_y``; not ``rect_x``) becomes
     the handshake of a group along the core row (sender: the row's first core), and one that depends on the
     column only of a group down the core column (sender: the column's first core): a branch on the core's role
     per read, one TT-Metalium call per step (``multicast_read``; VerifyTTProgram's ``multicast`` rule).
     Each group is one entry of ``Program.multicast["groups"]`` (``operand`` in0 for a row group, in1 for a
     column group; ``cb``, ``tensor``, ``axis``, and ``cores``: per core of the schedule's mapping, in its order,
     the sender, the rectangle's corners, the number of receivers and whether it sends); the reader ends with
     ``noc_async_atomic_barrier()``. The host program creates the two semaphores of each group and passes each
     core's route, in NoC coordinates, as reader runtime args (codegen, ``templates/host.cpp.j2``); the reader
     starts with each sender holding VALID and ends with ``noc_async_atomic_barrier()``.
     Without such a lattice, or with ``multicast=False``, the program is returned unchanged.
Attributes: none written; ``Program.multicast`` carries the decision to codegen and the plan (``multicast``).
Errors: TTScheduleError when ``multicast=True`` was asked for and no read can be multicast (every read depends
     on both the core's row and column, or the lattice has one core along each multicast axis). Not when
     SuperBlockTT chose multicast itself (``tt.super_block`` ``multicast: "automatic"``): then the program is
     returned unchanged.
"""

from __future__ import annotations

from tvm import tirx

from .. import attrs, records
from ..errors import TTScheduleError
from ..intrinsics import BLOCK_READS
from ..ttir import Call, For, Let, Lit, Program

# The tile-index arguments of read_tiles(cb, tensor, row, col, rows, cols).
_ROW, _COL = 2, 3


def _vars_of(expr) -> list:
    if isinstance(expr, (int, bool)) or expr is None:
        return []
    found: list = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: found.append(n)
                                       if isinstance(n, tirx.Var) else None)
    return found


def _depends(expr, lets: list, targets: list) -> set:
    """Which of ``targets`` (lists of twin Vars, by index) ``expr`` uses, through the ``Let``s in scope."""
    out: set = set()
    todo = _vars_of(expr)
    seen: list = []
    while todo:
        v = todo.pop()
        if any(v.same_as(s) for s in seen):
            continue
        seen.append(v)
        for i, twins in enumerate(targets):
            if any(v.same_as(t) for t in twins):
                out.add(i)
        todo += [x for lv, value in lets if lv.same_as(v) for x in _vars_of(value)]
    return out


def _lattice(schedule: records.Schedule) -> tuple[int, int] | None:
    if schedule.policy != "rect" or not schedule.multicast:
        return None
    cores = schedule.cores
    return max(y for y, _ in cores) + 1, max(x for _, x in cores) + 1


def _route(axis: str, core, rows: int, cols: int) -> dict:
    """What one core of the lattice does in a group along ``axis``, in logical [y, x] coordinates: the group's
    sender (the first core of the core's row or column), the rectangle it multicasts to (low and high corner, the
    sender included), how many cores receive (the sender excluded) and whether this core sends."""
    y, x = (int(c) for c in core)
    if axis == "row":
        sender, last, dests, sends = [y, 0], [y, cols - 1], cols - 1, x == 0
    else:
        sender, last, dests, sends = [0, x], [rows - 1, x], rows - 1, y == 0
    return {"sender": sender, "first": list(sender), "last": last, "num_dests": dests, "is_sender": sends}


def multicast_reuse(program: Program, func: tirx.PrimFunc, names, flush: bool = False) -> Program:
    schedule = records.schedule(func)
    lattice = _lattice(schedule)
    if lattice is None:
        return program
    rows, cols = lattice
    arg_names = [str(n) for n in func.attrs[attrs.RUNTIME_ARGS]]
    params = dict(zip(arg_names, list(func.params)[-len(arg_names):]))
    renames = names.renames()
    # the core's lattice row / column, as the schedule binds them (the Var and its C++-named twin)
    targets = [[params[n]] + [new for old, new in renames.items() if old.same_as(params[n])]
               for n in ("rect_y", "rect_x")]
    reader = program.kernels["reader"]
    groups: list[dict] = []
    lets: list = []
    marked: dict[int, str] = {}     # id of a read_tiles call -> the group that multicasts its block

    def visit(body, loops, persistent):
        for node in body:
            if isinstance(node, Let):
                lets.append((node.var, node.value))
            elif isinstance(node, For):
                inner = persistent or node.persistent
                visit(node.body, loops + ([node] if persistent else []), inner)
            elif persistent and node.op in BLOCK_READS:
                uses = set()
                for e in [node.args[_ROW], node.args[_COL]] + [x for f in loops for x in (f.min, f.extent)]:
                    uses |= _depends(e, lets, targets)
                axis = {frozenset({0}): "row", frozenset({1}): "column"}.get(frozenset(uses))
                if axis is None or (cols if axis == "row" else rows) < 2:
                    continue
                cb, tensor = node.args[0].name, node.args[1].name
                group = next((g for g in groups if g["cb"] == cb and g["axis"] == axis), None)
                if group is None:
                    group = {"name": names.fresh(f"mcast_{cb}"), "operand": "in0" if axis == "row" else "in1",
                             "cb": cb, "tensor": tensor, "axis": axis,
                             "cores": [_route(axis, core, rows, cols) for core in schedule.cores]}
                    groups.append(group)
                marked[id(node)] = group["name"]

    visit(reader.body, [], False)
    if not groups:
        fused = records.super_block(func)
        automatic = fused is not None and fused.multicast == "automatic"
        if schedule.multicast and not automatic:
            raise TTScheduleError("multicast=True, but no block the reader reads is the same for a whole core row or "
                                  f"column of the {rows}x{cols} core lattice",
                                  construct="T.annotate_tt_schedule(multicast=True)", source=program.source,
                                  fix="index one operand by the block row only and the other by the block column only, "
                                      "or use multicast=False")
        return program
    reader.body = [hold_valid(g["name"]) for g in groups] + _expand(reader.body, marked, flush) + [
        Call("noc_async_atomic_barrier", (), "multicast: the semaphore increments have completed")]
    program.multicast = {"lattice": [rows, cols], "groups": groups}
    return program


def _branch(group: str, sender: bool, body: list) -> For:
    """``if (<group>_is_sender)`` (or its negation) around ``body``: the core's role is a reader runtime arg."""
    is_sender = tirx.Var(f"{group}_is_sender", "int32")
    cond = tirx.NE(is_sender, 0) if sender else tirx.EQ(is_sender, 0)
    trips = tirx.Select(cond, tirx.IntImm("int32", 1), tirx.IntImm("int32", 0))
    return For(tirx.Var("role", "int32"), tirx.IntImm("int32", 0), trips, body,
               "multicast sender" if sender else "multicast receiver", False, cond, (group, sender))


def _expand(body: list, marked: dict, flush: bool) -> list:
    """``body`` with each marked ``read_tiles`` (into the reserved back of its CB) as the handshake of its group:
    the sender reads the block, waits until every receiver is ready, multicasts the block and then VALID; a
    receiver clears its flag, signals ready and waits for VALID."""
    out = []
    for i, node in enumerate(body):
        if isinstance(node, Call) and node.op == "noc_async_read_barrier" and i and id(body[i - 1]) in marked:
            continue    # the sender's branch has its own barrier, and a receiver issues no read
        if isinstance(node, For):
            node.body = _expand(node.body, marked, flush)
            out.append(node)
            continue
        if not isinstance(node, Call) or id(node) not in marked:
            out.append(node)
            continue
        out += multicast_read(node, marked[id(node)], flush)
    return out


def multicast_read(read: Call, group: str, flush: bool) -> list:
    """A ``read_tiles`` into the reserved back of its CB as the handshake of ``group``: the sender's branch (read,
    read barrier, wait until every receiver is ready, reset the count, multicast the block, [flush], multicast
    VALID) and the receivers' (clear the flag, signal ready, wait for VALID)."""
    g, note = Lit(group), read.note
    cb, rows, cols = read.args[0], read.args[4], read.args[5]
    sender = [read, Call("noc_async_read_barrier", (), note),
              Call("mcast_wait_ready", (g,), note), Call("mcast_reset_ready", (g,), note),
              Call("mcast_write_block", (g, cb, rows * cols), note)]
    if flush:   # Blackhole issues data and flag from separate command FIFOs: the data must leave first
        sender.append(Call("noc_async_writes_flushed", (), note))
    sender.append(Call("mcast_set_valid", (g,), note))
    receiver = [Call("mcast_clear_valid", (g,), note), Call("mcast_signal_ready", (g,), note),
                Call("mcast_wait_valid", (g,), note)]
    return [_branch(group, True, sender), _branch(group, False, receiver)]


def hold_valid(group: str) -> For:
    """The sender's receiver semaphore holds VALID, the source word of the flag it multicasts (once, first)."""
    return _branch(group, True, [Call("mcast_hold_valid", (Lit(group),),
                                      "multicast: the sender's receiver semaphore holds the VALID it sends")])
