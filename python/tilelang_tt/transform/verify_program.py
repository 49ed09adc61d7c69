"""VerifyTTProgram: the rules every generated TT program obeys, checked on every compile.

In:  a ``ttir.Program`` after the program passes.
Out: the program, unchanged.
Errors: TTVerifyError naming the rule, the kernel, the op and the TileLang statement. Rules:
  cb-reserve    every ``cb_push_back`` is covered by a ``cb_reserve_back``; a loop iteration leaves the
                reservation as it found it; nothing stays reserved at kernel end
  cb-front      every ``cb_pop_front`` is covered by a ``cb_wait_front``; a compute-internal CB is never
                waited for more pages than compute pushed (a deadlock); loop iterations leave the front as
                they found it; nothing stays at the front at kernel end
  cb-pages      per persistent iteration, the pages the producer kernel pushes into a CB equal the pages
                its consumer kernel pops
  dst-capacity  every DST index is below the capacity of the kernel's accumulation mode
  dst-phase     math between ``tile_regs_acquire``/``commit``, packs between ``tile_regs_wait``/``release``
  init          every tile op runs after its own init (same operands; matmul_block: the same block shape) on
                its unit (FPU or SFPU)
  reconfig-order a data-format reconfiguration of the unpacker is followed by a new FPU init before the
                next FPU op (the LLK asserts this order)
  src-format    SrcA / SrcB / the packer are configured for the format of the CB an op reads or packs, and
                every FPU init finds SrcA / SrcB already configured for its CBs (the LLK asserts this in the
                init: reconfig_data_format* comes before the init it affects)
  read-barrier  a reader pushes a block only after ``noc_async_read_barrier``; a writer pops a block only
                after ``noc_async_write_barrier``
  multicast     each multicast group's handshake (TTMulticastReuse) in the reader: the sender first holds VALID;
                each multicast read is a sender branch (read, read barrier, wait for every receiver, reset the
                count, multicast the block it read, [flush on Blackhole], multicast VALID) followed by a receiver
                branch (clear the flag, signal ready, wait for VALID), each under the core's role; no handshake
                call outside them; the reader ends with noc_async_atomic_barrier
  unlowered     no pseudo op (``consume``) or virtual DST register survives
  scope         a variable a loop or ``Let`` of the kernel binds is read only where it is bound: inside that
                loop, after that ``Let`` in the same or an enclosing body (a block's place in its tile that names
                a loop's variable after the loop would not compile)
  l1-budget     the CBs fit the L1 a kernel can use; CB indices exist on the device
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..errors import TTVerifyError
from ..intrinsics import BLOCK_READS, CALLS
from ..ttir import CB, Call, Dst, For, Let, Lit, Program, Scalar, VReg
from .common import free_vars
from .hoist_inits import startup_formats

_PHASES = {"tile_regs_acquire": ("idle", "math"), "tile_regs_commit": ("math", "committed"),
           "tile_regs_wait": ("committed", "packing"), "tile_regs_release": ("packing", "idle")}


class _Verifier:
    def __init__(self, program: Program, role: str):
        self.p, self.role = program, role
        self.analyzer = tvm.arith.Analyzer()
        self.reserved: dict[str, int] = {}
        self.front: dict[str, int] = {}
        self.pending_noc: set[str] = set()
        self.phase = "idle"
        self.state = {"fpu": None, "sfpu": None, "srca": None, "srcb": None, "pack": None}

    def fail(self, rule: str, msg: str, call: Call | None):
        raise TTVerifyError(rule, msg, kernel=self.role, op=call.op if call else "kernel end",
                            source=self.p.source, note=(call.note or None) if call else None)

    def internal(self, cb: CB) -> bool:
        info = self.p.cbs[cb.name]
        return info.producer == ("compute",) and "compute" in info.consumer

    # -- walk ------------------------------------------------------------------------------------------
    def run(self, kernel):
        if kernel.startup is not None:
            for reg, cb in startup_formats(kernel.startup).items():
                self.state[reg] = self.p.cbs[cb.name].fmt if isinstance(cb, CB) else None
        self.body(kernel.body)
        for cb, n in self.reserved.items():
            if n:
                self.fail("cb-reserve", f"{n} page(s) of {cb} stay reserved at kernel end", None)
        for cb, n in self.front.items():
            if n:
                self.fail("cb-front", f"{n} page(s) of {cb} stay at the front at kernel end", None)
        if self.phase != "idle":
            self.fail("dst-phase", f"DST is left in phase {self.phase} at kernel end", None)

    def body(self, nodes):
        for n in nodes:
            if isinstance(n, For):
                self.analyzer.bind(n.var, tvm.ir.Range.from_min_extent(n.min, n.extent)) \
                    if _static(n.extent) else None
                front_in = dict(self.front)
                before = (_norm(self.reserved), self.cross(self.front), self.phase)
                self.body(n.body)
                after = (_norm(self.reserved), self.cross(self.front), self.phase)
                if after != before:
                    what = ("cb-reserve", "cb-front", "dst-phase")[[a != b for a, b in zip(after, before)].index(True)]
                    self.fail(what, f"an iteration of the loop over {n.var.name} changes the CB / DST state "
                                    f"({before} -> {after})", _first_call(n.body))
                self.repeat_internal(n, front_in)
            elif isinstance(n, Call):
                self.call(n)

    def call(self, c: Call):
        spec = CALLS.get(c.op)
        if spec is None:
            self.fail("unlowered", f"{c.op} has no C++ form (a pass did not lower it)", c)
        for a in c.args:
            if isinstance(a, Dst):
                self.dst_index(a, c)
        if spec.pages is not None:
            self.cb_call(c, c.args[spec.pages[0]], c.args[spec.pages[1]])
        elif spec.kind == "noc":
            self.noc(c)
        elif spec.kind == "dst":
            want, nxt = _PHASES[c.op]
            if self.phase != want:
                self.fail("dst-phase", f"{c.op} in phase {self.phase} (expected {want})", c)
            self.phase = nxt
        elif spec.kind in ("init", "reconfig", "op", "pack", "startup"):
            self.compute(c, spec)

    def cross(self, front: dict) -> dict:
        """The front counts of CBs another kernel produces (a loop iteration must leave them unchanged)."""
        return {k: v for k, v in front.items() if v and not self.internal(CB(k))}

    def repeat_internal(self, loop: For, front_in: dict):
        """A compute-internal CB's front grows by the same number of pages every iteration (compute pushes
        and pops it itself): apply the remaining iterations; it must never go negative."""
        for name, n in list(self.front.items()):
            delta = n - front_in.get(name, 0)
            if not delta or not self.internal(CB(name)):
                continue
            if not _static(loop.extent):
                self.fail("cb-front", f"{name} changes by {delta} page(s) per iteration of a loop over "
                                      f"{loop.var.name} with a runtime trip count", _first_call(loop.body))
            self.front[name] = front_in.get(name, 0) + delta * int(loop.extent)
            if self.front[name] < 0:
                self.fail("cb-front", f"the loop over {loop.var.name} pops more pages of {name} than compute pushed",
                          _first_call(loop.body))

    # -- CB protocol -----------------------------------------------------------------------------------
    def cb_call(self, c: Call, cb: CB, n):
        if not isinstance(n, int):
            self.fail("cb-pages", f"page count {n} of {c.op} is not a constant", c)
        name = cb.name
        if c.op == "cb_reserve_back":
            self.reserved[name] = max(self.reserved.get(name, 0), n)
        elif c.op == "cb_push_back":
            if self.reserved.get(name, 0) < n:
                self.fail("cb-reserve", f"cb_push_back({name}, {n}) with {self.reserved.get(name, 0)} page(s) "
                                        "reserved", c)
            if name in self.pending_noc and self.role == "reader":
                self.fail("read-barrier", f"{name} is pushed before its NoC reads completed "
                                          "(no noc_async_read_barrier)", c)
            self.reserved[name] -= n
            if self.internal(cb):
                self.front[name] = self.front.get(name, 0) + n
        elif c.op == "cb_wait_front":
            if self.internal(cb):
                if self.front.get(name, 0) < n:
                    self.fail("cb-front", f"cb_wait_front({name}, {n}) but compute pushed only "
                                          f"{self.front.get(name, 0)} page(s): it would wait forever", c)
            else:
                self.front[name] = max(self.front.get(name, 0), n)
        else:   # cb_pop_front
            if self.front.get(name, 0) < n:
                self.fail("cb-front", f"cb_pop_front({name}, {n}) with {self.front.get(name, 0)} page(s) "
                                      "waited for", c)
            if name in self.pending_noc and self.role == "writer":
                self.fail("read-barrier", f"{name} is popped before its NoC writes completed "
                                          "(no noc_async_write_barrier)", c)
            self.front[name] -= n

    def noc(self, c: Call):
        if c.op in (*BLOCK_READS, "write_tiles", "read_tiles_window", "write_tiles_window"):
            self.pending_noc.add(c.args[0].name)
        elif not c.op.startswith("mcast_") and c.op != "noc_async_writes_flushed":   # semaphores complete no read
            self.pending_noc.clear()

    # -- compute ---------------------------------------------------------------------------------------
    def dst_index(self, d: Dst, c: Call):
        if isinstance(d.slot, VReg):
            self.fail("unlowered", f"virtual DST register %{d.slot.id} was not allocated", c)
        top = d.slot if isinstance(d.slot, int) else self.analyzer.const_int_bound(d.slot).max_value
        if top >= self.p.dst_capacity:
            self.fail("dst-capacity", f"DST index {d.slot} reaches {top}; DST holds {self.p.dst_capacity} tiles "
                                      f"in this accumulation mode", c)

    def fmt(self, a) -> str | None:
        return self.p.cbs[a.name].fmt if isinstance(a, CB) else None

    def compute(self, c: Call, spec):
        if spec.kind == "startup":
            self.fail("init", "compute_kernel_hw_startup inside the kernel body", c)
        if spec.kind == "init":
            for reg, a in zip(_init_sources(c.op) if spec.unit == "fpu" else (), c.args):
                if isinstance(a, CB) and self.state[reg] != self.fmt(a):
                    self.fail("src-format", f"{c.op} for {a.name} ({self.fmt(a)}) while {reg} is configured for "
                                                f"{self.state[reg]}: reconfig_data_format must come before the init it "
                                                "affects", c)
            self.state[spec.unit] = (c.op, c.args)
        elif c.op == "pack_reconfig_data_format":
            self.state["pack"] = self.fmt(c.args[0])
        elif spec.kind == "reconfig":
            regs = ("srca", "srcb") if c.op == "reconfig_data_format" else ("srca",)
            for r, a in zip(regs, c.args):
                self.state[r] = self.fmt(a)
            if self.state["fpu"] is not None:
                self.state["fpu"] = ("stale", self.state["fpu"][0])
        elif spec.kind == "pack":
            if self.phase != "packing":
                self.fail("dst-phase", f"pack_tile in phase {self.phase}", c)
            if self.state["pack"] != self.fmt(c.args[1]):
                self.fail("src-format", f"pack_tile into {c.args[1].name} ({self.fmt(c.args[1])}) with the packer "
                                        f"configured for {self.state['pack']}", c)
        else:
            self.tile_op(c, spec)

    def tile_op(self, c: Call, spec):
        if self.phase != "math":
            self.fail("dst-phase", f"{c.op} outside tile_regs_acquire/commit (phase {self.phase})", c)
        have = self.state[spec.unit]
        if have is not None and have[0] == "stale":
            self.fail("reconfig-order", f"{c.op} after a data-format reconfiguration that followed {have[1]}; "
                                        f"call {spec.init} after the reconfiguration", c)
        if have is None or have[0] != spec.init or any(have[1][i] != c.args[i] for i in spec.init_args):
            self.fail("init", f"{c.op} without {spec.init} for its operands (last init: "
                              f"{have[0] if have else 'none'})", c)
        if c.op == "matmul_block":
            shape, init_shape = (", ".join(getattr(a, "text", str(a)) for a in args)
                                 for args in (c.args[5:9], have[1][2:6]))
            if shape != init_shape:
                self.fail("init", f"matmul_block with (transpose, ct, rt, kt) = ({shape}) after matmul_block_init "
                                  f"for ({init_shape})", c)
        srcs = _SOURCES.get(c.op, ("srca", "srcb") if spec.unit == "fpu" else ())
        for reg, a in zip(srcs, c.args):
            if self.state[reg] != self.fmt(a):
                self.fail("src-format", f"{c.op} reads {a.name} ({self.fmt(a)}) through {reg} configured for "
                                        f"{self.state[reg]}", c)


# The source registers an FPU op unpacks its CB operands through (in argument order); default SrcA, SrcB.
_SOURCES = {"copy_tile": ("srca",), "transpose_tile": ("srca",), "matmul_tiles": ("srcb", "srca"),
            "matmul_block": ("srcb", "srca"),
            "reduce_tile_sum_row": ("srcb", "srca"),   # REDUCE_ROW SUM: the scaler in SrcA, the data in SrcB
            **{f"unary_bcast_{d}": ("srcb",) for d in ("rows", "cols", "scalar")}}


def _init_sources(op: str) -> tuple:
    """The source registers an FPU init configures its CB operands for, in argument order."""
    if op in ("copy_init", "transpose_init"):
        return ("srca",)
    if op in ("matmul_init", "matmul_block_init"):   # in0 -> SrcB, in1 -> SrcA
        return ("srcb", "srca")
    if op.startswith("unary_bcast_init_"):        # the broadcast modes unpack through SrcB
        return ("srcb",)
    if op.startswith("unary_bcast_uninit_"):
        return ()
    if op == "reduce_init_sum_row":               # REDUCE_ROW SUM: the data in SrcB, the scaler in SrcA
        return ("srcb", "srca")
    return ("srca", "srcb")                       # binary, broadcast and the other reduce inits


def _norm(counts: dict) -> dict:
    return {k: v for k, v in counts.items() if v}


def _static(e) -> bool:
    return isinstance(e, (int, tirx.IntImm))


def _first_call(body):
    for n in body:
        if isinstance(n, Call):
            return n
        if isinstance(n, For):
            found = _first_call(n.body)
            if found:
                return found
    return None


def _pages(body, op: str, cb: str, analyzer, mult=1):
    total = 0
    for n in body:
        if isinstance(n, For):
            total = total + _pages(n.body, op, cb, analyzer, mult if n.persistent else mult * n.extent)
        elif isinstance(n, Call) and n.op == op and isinstance(n.args[0], CB) and n.args[0].name == cb:
            total = total + mult * n.args[1]
    return analyzer.simplify(total) if isinstance(total, tirx.PrimExpr) else total


def _check_pages(program: Program):
    analyzer = tvm.arith.Analyzer()
    for name, info in program.cbs.items():
        if info.producer == ("compute",) and info.consumer == ("compute",):
            continue
        pushed = sum(_pages(program.kernels[r].body, "cb_push_back", name, analyzer) for r in info.producer)
        popped = sum(_pages(program.kernels[r].body, "cb_pop_front", name, analyzer) for r in info.consumer)
        if not analyzer.can_prove_equal(tirx.const(0, "int64") + pushed, tirx.const(0, "int64") + popped):
            raise TTVerifyError("cb-pages", f"{'+'.join(info.producer)} pushes {pushed} page(s) of {name} per block, "
                                f"{'+'.join(info.consumer)} pops {popped}", kernel="+".join(info.consumer),
                                op=name, source=program.source)


_SENDER = ("read_tiles", "noc_async_read_barrier", "mcast_wait_ready", "mcast_reset_ready", "mcast_write_block",
           "mcast_set_valid")
_RECEIVER = ("mcast_clear_valid", "mcast_signal_ready", "mcast_wait_valid")


def _role_branch(n) -> tuple[str, bool] | None:
    """(group, sender?) of a branch on a multicast core's role (``For.branch``, set by TTMulticastReuse)."""
    return tuple(n.branch) if isinstance(n, For) and n.branch is not None else None


def _check_multicast(program: Program, flush: bool) -> None:
    groups = {g["name"] for g in (program.multicast or {}).get("groups", [])}
    body = program.kernels["reader"].body

    def fail(msg, call=None):
        raise TTVerifyError("multicast", msg, kernel="reader", op=call.op if call else "kernel end",
                            source=program.source, note=(call.note or None) if call else None)

    held, expect_receiver = set(), None

    def walk(nodes):
        nonlocal expect_receiver
        for n in nodes:
            branch = _role_branch(n) if isinstance(n, For) else None
            if expect_receiver is not None and (branch is None or branch != (expect_receiver, False)):
                fail(f"a multicast by the sender of {expect_receiver} is not followed by its receivers' branch",
                     n if isinstance(n, Call) else None)
            expect_receiver = None
            if branch is not None and branch[0] in groups:
                _branch(n, *branch)
            elif isinstance(n, For):
                walk(n.body)
            elif isinstance(n, Call) and (n.op.startswith("mcast_") or n.op == "noc_async_writes_flushed"):
                fail(f"{n.op} outside a branch on the core's multicast role", n)

    def _branch(n, group, sender):
        nonlocal expect_receiver
        calls = [c for c in n.body if isinstance(c, Call)]
        if any(isinstance(a, Lit) and a.text in groups and a.text != group for c in calls for a in c.args):
            fail(f"the branch on {group}'s role runs another group's handshake", calls[0])
        ops = tuple(c.op for c in calls)
        if sender and ops == ("mcast_hold_valid",):
            held.add(group)
            return
        if group not in held:
            fail(f"{group}'s sender does not hold VALID before its first multicast", calls[0] if calls else None)
        want = _SENDER[:-1] + (("noc_async_writes_flushed",) if flush else ()) + _SENDER[-1:] if sender else _RECEIVER
        if sender and ops and ops[0] in BLOCK_READS:     # the block's read, in either tile order
            want = ops[:1] + want[1:]
        if ops != want:
            fail(f"{group}'s {'sender' if sender else 'receiver'} runs {list(ops)}, not {list(want)}",
                 calls[0] if calls else None)
        if sender:
            read, write = calls[0], calls[4]
            tiles = read.args[4] * read.args[5]
            if write.args[1] != read.args[0] or not _same(write.args[2], tiles):
                fail(f"{group}'s sender multicasts {write.args[2]} tile(s) of {write.args[1].name}, not the "
                     f"{tiles} it read into {read.args[0].name}", write)
            expect_receiver = group

    walk(body)
    if expect_receiver is not None:
        fail(f"a multicast by the sender of {expect_receiver} is not followed by its receivers' branch")
    if groups and (not body or not isinstance(body[-1], Call) or body[-1].op != "noc_async_atomic_barrier"):
        fail("the reader does not end with noc_async_atomic_barrier (its semaphore increments may be in flight)")


def _same(a, b) -> bool:
    return tvm.arith.Analyzer().can_prove_equal(tirx.const(0, "int64") + a, tirx.const(0, "int64") + b)


def _vars(x) -> list:
    """The variables an argument, bound or guard reads."""
    x = x.expr if isinstance(x, Scalar) else x
    return free_vars(x) if isinstance(x, tirx.PrimExpr) else []


def _check_scope(program: Program) -> None:
    """The ``scope`` rule, by name as the C++ binds them: a variable some loop or ``Let`` of the kernel binds is read
    only inside that loop or after that ``Let`` (the kernel's other variables are its runtime arguments)."""
    def declared(nodes, out: set) -> set:
        for n in nodes:
            if isinstance(n, (For, Let)):
                out.add(n.var.name)
            if isinstance(n, For):
                declared(n.body, out)
        return out

    def walk(nodes, bound: set, local: set, role: str):
        bound = set(bound)
        for n in nodes:
            reads = ([n.min, n.extent, n.guard] if isinstance(n, For) else [n.value] if isinstance(n, Let)
                     else list(n.args) if isinstance(n, Call) else [])
            for var in (v for x in reads for v in _vars(x)):
                if var.name in local and var.name not in bound:
                    raise TTVerifyError("scope", f"{var.name} is read outside the loop or after the let that binds "
                                        "it", kernel=role, op=n.op if isinstance(n, Call) else
                                        f"loop over {n.var.name}" if isinstance(n, For) else f"let {n.var.name}",
                                        source=program.source,
                                        note=(n.note or None) if isinstance(n, (Call, For)) else None)
            if isinstance(n, For):
                walk(n.body, bound | {n.var.name}, local, role)
            elif isinstance(n, Let):
                bound.add(n.var.name)

    for role, kernel in program.kernels.items():
        walk(kernel.body, set(), declared(kernel.body, set()), role)


def verify_program(program: Program, l1_budget: int, num_cbs: int, mcast_flush: bool = False) -> Program:
    total = sum(cb.bytes for cb in program.cbs.values())
    if total > l1_budget:
        raise TTVerifyError("l1-budget", f"CBs need {total} B of L1, the kernels can use {l1_budget} B",
                            kernel="host", op="CreateCircularBuffer", source=program.source)
    for info in program.cbs.values():
        if not 0 <= info.index < num_cbs:
            raise TTVerifyError("l1-budget", f"CB index {info.index} of {info.name} does not exist ({num_cbs} CBs)",
                                kernel="host", op="CreateCircularBuffer", source=program.source)
    for role, kernel in program.kernels.items():
        _Verifier(program, role).run(kernel)
    _check_pages(program)
    _check_multicast(program, mcast_flush)
    _check_scope(program)
    return program
