"""LowerToTTProgram: the tile program becomes the explicit TT program (``ttir.Program``).

In:  a PrimFunc after TensorizeTT: the persistent loop, ``Bind``s, serial loops and the TT tile ops
     (``read_block``, ``write_block``, ``fill``, ``matmul``, ``eltwise``, ``transpose``); ``tt.cb``.
Out: one body per core role, made of ``ttir`` nodes:
     * reader: per ``read_block``: ``cb_reserve_back``, ``read_tiles``, ``noc_async_read_barrier``,
       ``cb_push_back``;
     * writer: per ``write_block``: ``cb_wait_front``, ``write_tiles``, ``noc_async_write_barrier``,
       ``cb_pop_front``;
     * compute: every tile op as TT calls with its inits and data-format reconfigurations, DST ownership
       (``tile_regs_*``), packs and the CB protocol of fragments. Elementwise values live in virtual DST
       registers (``ttir.VReg``) until AllocateDST; a block the reader delivers is marked by the pseudo call
       ``consume(cb, pages)`` until PlaceCBPops turns it into a wait and a pop after its last use.
     Loops keep their ``min`` and ``extent``; user variables are renamed through the one ``NameSupply``;
     ``Let`` expressions are inlined. Loops of extent 1 the generator would introduce are not emitted.
     A matmul whose operands are row-major and B not transposed runs ``matmul_block`` over each DST block
     (``rt x ct`` output tiles per K tile), and so does one with ``transpose_B`` whose B the reader fills and
     only such matmuls read: the reader stores that block in transposed tile order (``read_tiles_transposed``)
     and ``matmul_block``'s transpose flag transposes within each tile; any other ``matmul_tiles`` per output
     tile and K tile.
     A CB-resident matmul accumulator (TensorizeTT's ``accumulate``) is updated per DST subblock: "reload"
     copies the subblock's partial sums into DST before the matmuls; "packer_l1" pops them and packs the
     matmuls' products onto the same pages between ``pack_reconfig_l1_acc(1)`` and ``(0)`` around the op, so
     the packer adds them in L1 (the value T.clear / T.fill packed is the first partial sum, packed without
     accumulation: correct in every persistent iteration and for K loops of any trip count).
     A CB StreamBandsTT banded (``band``) is read one band of rows per ``read_tiles`` / push, and the matmul that
     reads it as A waits for a band before each subblock row and pops it after, A's tile positions relative to it.
Errors: TTUnsupportedError for tile-program shapes the TT lowering cannot express (a fragment initialised in
     a loop and used after it, a read before a write, an elementwise update of a subblocked accumulator,
     a loop with a step); TTLoweringError for any TIR node no rule handles (named, never dropped).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import attrs, records
from ..compute_config import exact_reduce
from ..errors import TTLoweringError, TTUnsupportedError
from ..intrinsics import BLOCK_READS, TTOps, tt_op_of
from ..names import NameSupply
from ..ttir import CB, Call, Dst, For, Kernel, Let, Lit, Program, Tensor, vreg, walk
from .common import SCALER, TILE, TileOps, buffer_loads, describe, float_lit, loop, tile_op_call
from .lower_eltwise import lower_eltwise
from .tile_order import transposed_order_cbs

def _tag_origin(part: dict, kind: str) -> dict:
    """Marks every call of one tile operation's lowering with that operation's kind (``Call.origin``)."""
    for body in part.values():
        for n, _ in walk(body):
            if isinstance(n, Call) and not n.origin:
                n.origin = kind
    return part


_KINDS = ("read_block", "write_block", "fill", "matmul", "eltwise", "transpose", "insert_window", "reduce",
          "gather_rows", "im2col_rows", "offset_rows", "write_rows")
def _index_loads(exprs) -> list:
    """The distinct ``index_load`` calls (int32 tensor elements, MemorySpaceLowerTT) in ``exprs``, in order."""
    loads = []

    def find(node):
        if isinstance(node, tirx.Call) and node.op.same_as(TTOps.index_load) and not any(
                tvm.ir.structural_equal(node, x) for x in loads):
            loads.append(node)

    for e in exprs:
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), find)
    return loads


def _is_zero(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 0


def _substitute(expr, vmap):
    """``expr`` with each ``index_load`` of ``vmap`` replaced by the variable its element was read into."""
    def subst(node):
        for load, var in vmap:
            if isinstance(node, tirx.Call) and tvm.ir.structural_equal(node, load):
                return var
        return None

    return tirx.stmt_functor.ir_transform(tirx.Evaluate(expr), None, subst, ["tirx.Call"]).value


class LowerToProgram:
    def __init__(self, func: tirx.PrimFunc, name: str, cbs: dict, tensor_names: dict, names: NameSupply,
                 dst_capacity: int, fp32_acc: bool, source: str | None):
        self.func, self.name, self.cbs, self.src = func, name, cbs, source
        self.by_index = {e.index: n for n, e in cbs.items()}
        self.tensor_names = tensor_names
        self.names = names
        self.cap = dst_capacity
        self.fp32_acc = fp32_acc
        config = records.compute(func)
        self.allow_tf32 = bool(config.allow_tf32) if config is not None else False   # float32 reductions / eltwise on the FPU (TF32)
        self.full = {n: False for n, e in cbs.items() if e.role == "intermediate" and e.residency != "dst"}
        self.dst_frag = next((n for n, e in cbs.items() if e.residency == "dst"), None)
        self.dst_frag_out = None
        self.startup: tuple[int, Call] | None = None
        self.transposed_in1 = transposed_order_cbs(func.body, cbs)

    # -- structure -------------------------------------------------------------------------------------
    def run(self) -> Program:
        self._find_dst_frag_out(self.func.body)
        self._number(self.func.body)
        roles = self.lower(self.func.body)
        # constant tiles: built once by the reader, kept at compute's front for the whole kernel
        constants = [(SCALER, Call("generate_reduce_scaler", (CB(SCALER),)), "the reduce scaler: 1.0 in row 0 of "
                      "every face")] if SCALER in self.cbs else []
        constants += [(n, Call("generate_index_tile", (CB(n), int(e.constant[-1]))),
                       f"each element's {('row', 'column')[int(e.constant[-1])]} index within the tile")
                      for n, e in self.cbs.items() if str(e.constant or "").startswith("index")]
        for name, make, why in reversed(constants):
            cb = CB(name)
            make.note = why
            roles["reader"] = [Call("cb_reserve_back", (cb, 1), why), make, Call("cb_push_back", (cb, 1), why)] + \
                roles["reader"]
            roles["compute"] = [Call("cb_wait_front", (cb, 1), why)] + roles["compute"] + \
                [Call("cb_pop_front", (cb, 1), why)]
        kernels = {r: Kernel(r, roles[r]) for r in ("reader", "compute", "writer")}
        kernels["compute"].startup = self.startup[1] if self.startup else Call("hw_startup", (0, 0, 0))
        return Program(self.name, kernels, {}, self.cap, self.src, self.fp32_acc)

    def lower(self, stmt) -> dict:
        out = {"reader": [], "compute": [], "writer": []}
        for s in (stmt.seq if isinstance(stmt, tirx.SeqStmt) else [stmt]):
            part = self.lower_stmt(s)
            for role in out:
                out[role] += part.get(role, [])
        return out

    def lower_stmt(self, stmt) -> dict:
        if isinstance(stmt, tirx.SeqStmt):
            return self.lower(stmt)
        if isinstance(stmt, tirx.For):
            return self.lower_for(stmt)
        if isinstance(stmt, tirx.Bind):
            let = Let(self.names.var(stmt.var), self.expr(stmt.value))
            return {r: [let] for r in ("reader", "compute", "writer")}
        found = tt_op_of(stmt)
        if found is not None:
            op, c = found
            kind = next((k for k in _KINDS if op.same_as(getattr(TTOps, k))), None)
            if kind is not None:
                note = c.args[-1].value if isinstance(c.args[-1], tirx.StringImm) else describe(stmt)
                return _tag_origin(getattr(self, "op_" + kind)(list(c.args[:-1]), note), kind)
        c = tile_op_call(stmt)
        if c is not None and (c.op.same_as(TileOps.gemm) or c.op.same_as(TileOps.fill)):
            raise TTUnsupportedError(f"{c.op.name} was not tensorized (tensorize=False) and the TT backend has no "
                                     "scalar fallback for it", construct=describe(stmt), source=self.src,
                                     fix="compile with tensorize enabled (the default)")
        raise TTLoweringError(f"no TT lowering handles {type(stmt).__name__} here", construct=describe(stmt),
                              source=self.src)

    def lower_for(self, stmt: tirx.For) -> dict:
        if stmt.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED) or stmt.thread_binding is not None:
            raise TTUnsupportedError(f"loop kind {stmt.kind} after lowering", construct=describe(stmt),
                                     source=self.src, fix="T.Parallel bodies must be tensorizable (see TensorizeTT)")
        if stmt.step is not None and not (isinstance(stmt.step, tirx.IntImm) and int(stmt.step) == 1):
            raise TTUnsupportedError(f"a loop with step {stmt.step}", construct=describe(stmt), source=self.src,
                                     fix="write the loop with unit step and compute the index from it")
        persistent = any(str(k) == attrs.PERSISTENT_LOOP for k in stmt.annotations.keys())
        if persistent:   # the loop and the schedule's binds are the generator's, named by it
            var = self.names.keep(stmt.loop_var)
            for s in (stmt.body.seq if isinstance(stmt.body, tirx.SeqStmt) else []):
                if isinstance(s, tirx.Bind):
                    self.names.keep(s.var)
        else:
            var = self.names.var(stmt.loop_var)
        before = dict(self.full)
        body = self.lower(stmt.body)
        if persistent:
            for name, full in self.full.items():
                if full:   # the fragment's last value is dead after this block
                    n = self.cbs[name].block_tiles
                    body["compute"] += [Call("cb_wait_front", (CB(name), n), f"{name} is dead after this block"),
                                        Call("cb_pop_front", (CB(name), n), f"{name} is dead after this block")]
                    self.full[name] = False
        changed = [n for n in before if before[n] != self.full[n]]
        end = self.position.get(stmt.__chandle__(), (0, 0))[1]
        for name in list(changed):
            if not before[name] and self.dead_after(name, end):
                # written afresh in every iteration and dead after the loop: drop it at the end of the iteration
                n = self.cbs[name].block_tiles
                why = f"{name} is dead after this iteration"
                body["compute"] += [Call("cb_wait_front", (CB(name), n), why), Call("cb_pop_front", (CB(name), n), why)]
                self.full[name] = False
                changed.remove(name)
        guard = attrs.GUARD in stmt.annotations
        if changed and guard:
            raise TTUnsupportedError(f"fragment {changed[0]} is written inside an if and read after it",
                                     construct=f"if {stmt.extent.condition}", source=self.src,
                                     fix="initialise (T.clear) the fragment before the if, or read it only inside")
        if changed:
            raise TTUnsupportedError(f"fragment {changed[0]} is initialised inside a loop and used after it",
                                     construct=f"loop over {stmt.loop_var.name}", source=self.src,
                                     fix="initialise (T.clear) the fragment before the loop")
        note = "persistent loop over this core's blocks" if persistent else ""
        if guard:
            return self.guarded(var, stmt.extent.condition, body, str(stmt.annotations[attrs.GUARD].value))
        if _index_loads([stmt.min, stmt.extent]):    # a trip count read from a tensor: every kernel reads it first
            return self.guarded(var, None, body, f"loop over {stmt.loop_var.name}", bounds=(stmt.min, stmt.extent))
        lo, ext = self.expr(stmt.min), self.expr(stmt.extent)
        return {r: [For(var, lo, ext, b, note, persistent)] for r, b in body.items() if b}

    def guarded(self, var, condition, body: dict, why: str, bounds=None) -> dict:
        """Each kernel's ``if`` (or, with ``bounds``, a loop whose bounds read tensor elements): the condition with
        every int32 tensor element it reads (``index_load``) as a variable the kernel loads first. The reader reads
        the element into the ``_cidx`` CB, takes its own copy and pushes the page; compute waits for it and reads the
        value from L1 (``read_tile_value``, every compute thread gets it); a writer with stores under the ``if``
        reads the element through its own index CB."""
        loads = _index_loads([condition] if bounds is None else list(bounds))
        # one variable per element, the same in every kernel: the verifier compares the pages pushed and popped
        # under the condition kernel against kernel
        values = [tirx.Var(self.names.fresh(f"{self.tensor_names[int(ld.args[0])]}_value"), "int32") for ld in loads]
        out: dict = {}
        for role in ("reader", "compute", "writer"):
            if role != "reader" and not body.get(role) and not (role == "compute" and loads):
                continue
            pre = []
            for load, value in zip(loads, values):
                cidx = CB(str(load.args[3].value))
                if role == "reader":     # the reader keeps its copy and hands the page on to compute
                    pre += self._read_index(load, cidx, value, why, keep=False)
                elif role == "compute":
                    pre += self._take_element(load, cidx, value, why)
                else:
                    pre += self._read_index(load, CB(f"{cidx.name[:-len('_cidx')]}_idx_w"), value, why)
            inner = body.get(role, [])
            if bounds is None:
                cond = self.expr(_substitute(condition, list(zip(loads, values))))
                trips = tirx.Select(cond, tirx.IntImm("int32", 1), tirx.IntImm("int32", 0))
                loop_ = For(var, tirx.IntImm("int32", 0), trips, inner, "", False, cond)
            else:
                lo, ext = (self.expr(_substitute(b, list(zip(loads, values)))) for b in bounds)
                loop_ = For(var, lo, ext, inner, "")
            out[role] = _tag_origin({role: pre}, "guard")[role] + ([loop_] if inner else [])
        return out

    def _number(self, body):
        """Program-order positions: ``position[loop handle] = (first, last)`` and, per CB, its accesses
        ``(position, "w" | "r")`` in program order ("w": an element-wise op or a clearing reduction that defines
        the whole block without reading it; "r": anything else)."""
        self.position, self.accesses, counter = {}, {}, [0]

        def uses(stmt):
            found = tt_op_of(stmt)
            if found is None:
                return []
            names = [self.by_index[int(a)] for a in found[1].args[:2]
                     if isinstance(a, tirx.IntImm) and int(a) in self.by_index]
            if found[0].same_as(TTOps.eltwise):
                loads = buffer_loads(found[1].args[1])
                return [(n, "r" if n in loads else "w") for n in names[:1]] + [(n, "r") for n in loads]
            if found[0].same_as(TTOps.reduce) and len(names) == 2:     # (src, dst, kind, dim, clear, ...)
                return [(names[0], "r"), (names[1], "w" if bool(found[1].args[4]) else "r")]
            if found[0].same_as(TTOps.insert_window):     # (dst, part): dst's other tiles are read
                return [(n, "r") for n in names]
            if not found[0].same_as(TTOps.reduce) and not found[0].same_as(TTOps.transpose):
                names = names[:1]
            if found[0].same_as(TTOps.matmul):
                names = [self.by_index[int(a)] for a in found[1].args[:3]]
            return [(n, "r") for n in names]

        def walk(stmt):
            if isinstance(stmt, tirx.SeqStmt):
                for x in stmt.seq:
                    walk(x)
                return
            if isinstance(stmt, tirx.For):
                first = counter[0]
                walk(stmt.body)
                self.position[stmt.__chandle__()] = (first, counter[0])
                return
            counter[0] += 1
            for name, kind in uses(stmt):
                self.accesses.setdefault(name, []).append((counter[0], kind))

        walk(body)

    def dead_after(self, name: str, end: int) -> bool:
        """No access to CB ``name`` after position ``end`` reads the value it holds there: there is none, or the
        next one redefines the whole block (e.g. a causal mask initialising the scores of the next K/V loop)."""
        later = [kind for pos, kind in self.accesses.get(name, []) if pos > end]
        return not later or later[0] == "w"

    def expr(self, e):
        """``e`` with user variables renamed and ``Let`` expressions inlined."""
        def post(node):
            if isinstance(node, tirx.Let):
                return tirx.stmt_functor.substitute(node.body, {node.var: node.value})
            return None

        e = tirx.stmt_functor.ir_transform(tirx.Evaluate(e), None, post, ["tirx.Let"]).value
        return tirx.stmt_functor.substitute(e, self.names.renames())

    def cb_name(self, index) -> str:
        return self.by_index[int(index)]

    def _find_dst_frag_out(self, body):
        if self.dst_frag is None:
            return

        def visit(node):
            found = tt_op_of(node) if isinstance(node, tirx.Evaluate) else None
            if found is not None and found[0].same_as(TTOps.eltwise) and self.dst_frag in buffer_loads(found[1].args[1]):
                self.dst_frag_out = self.cb_name(found[1].args[0])

        tirx.stmt_functor.post_order_visit(body, visit)

    def note_startup(self, call: Call, priority: int):
        """The hardware start-up call, configured for the kernel's main op (matmul > eltwise > fill)."""
        if self.startup is None or priority > self.startup[0]:
            self.startup = (priority, call)

    # -- data movement ---------------------------------------------------------------------------------
    def index_reads(self, args, note) -> tuple[list, list]:
        """(calls, args): each ``index_load`` in a transfer's offsets (an element of an int32 tensor,
        MemorySpaceLowerTT) read by this kernel from L1 through its index CB before the transfer -- reserve,
        ``read_index`` (the element's face row), read barrier, ``Let`` of the element, push, wait, pop -- and the
        offsets with the element's variable in its place. An element whose place is itself read from a tensor
        (``BlockTable[b, ceildiv(SeqLens[b], 64) - 1]``) is read after it, at the place its variable gives."""
        calls, subs = self.index_reads_of(args[2:10], note)
        return calls, [*args[:2], *subs, *args[10:]]

    def index_reads_of(self, exprs, note) -> tuple[list, list]:
        """(calls, exprs): ``index_reads`` of the expressions ``exprs``."""
        loads = _index_loads(exprs)
        calls, vmap = [], []
        for load in loads:      # inner elements first (post-order)
            load = _substitute(load, vmap)
            var = tirx.Var(self.names.fresh(f"{self.tensor_names[int(load.args[0])]}_value"), "int32")
            calls += self._read_index(load, CB(str(load.args[3].value)), var, note)
            vmap.append((load, var))
        return calls, [_substitute(a, vmap) if isinstance(a, tirx.PrimExpr) else a for a in exprs]

    def _take_element(self, load, cb, var, note) -> list:
        """Compute's end of a tensor element the reader pushed into index CB ``cb``: wait for the page, ``Let`` of
        the element read from L1 (``read_tile_value`` of its column in the face row; a 16-bit element is half of
        the word (row % 2) * 8 + (col % 16) / 2 of the two face rows read_half read, widened to fp32 bits), pop."""
        lane = tirx.floormod(self.expr(load.args[2]), 16)
        if load.dtype.bits == 16:
            word = tirx.floormod(self.expr(load.args[1]), 2) * 8 + tirx.floordiv(lane, 2)
            shift = tirx.floormod(lane, 2) * 16
            value = tirx.Call("int32", TTOps.half_value, [tirx.StringImm(cb.name), word, shift,
                                                          tirx.IntImm("int32", int(str(load.dtype) == "float16"))])
        else:
            value = tirx.Call("int32", TTOps.tile_value, [tirx.StringImm(cb.name), lane])
        return [Call("cb_wait_front", (cb, 1), note), Let(var, value), Call("cb_pop_front", (cb, 1), note)]

    def _read_index(self, load, cb, var, note, keep=True) -> list:
        """One tensor element into ``var`` through index CB ``cb``: reserve, ``read_index`` (the element's face
        row), read barrier, ``Let`` of the element, push; ``keep``: this kernel also releases the page (wait, pop),
        else the consumer at the CB's other end does."""
        row, col = self.expr(load.args[1]), self.expr(load.args[2])
        calls = [Call("cb_reserve_back", (cb, 1), note),
                 Call("read_index", (cb, Tensor(self.tensor_names[int(load.args[0])]), row, col), note),
                 Call("noc_async_read_barrier", (), note),
                 Let(var, tirx.Call("int32", TTOps.index_value, [tirx.StringImm(cb.name), col])),
                 Call("cb_push_back", (cb, 1), note)]
        return calls + ([Call("cb_wait_front", (cb, 1), note), Call("cb_pop_front", (cb, 1), note)] if keep else [])

    def op_read_block(self, args, note) -> dict:
        name = self.cb_name(args[0])
        e = self.cbs[name]
        n = e.block_tiles
        index_calls, args = self.index_reads(args, note)
        if index_calls and e.band is not None:
            raise TTLoweringError(f"{name} streams in bands but its offsets are read from a tensor",
                                  construct=note, source=self.src)
        cb, where, op = CB(name), *self._where(args, "read_tiles_transposed" if name in self.transposed_in1
                                               else "read_tiles")
        if e.band is not None:     # StreamBandsTT: one push per band of rows; the matmul waits and pops per band
            if op not in BLOCK_READS:
                raise TTLoweringError(f"{name} streams in bands but its block is a window of one tile",
                                      construct=note, source=self.src)
            rows, pages = int(e.band["rows"]), int(e.band["pages"])
            tensor, row, col, nrows, cols = where

            def band(b):
                return [Call("cb_reserve_back", (cb, pages), note),
                        Call(op, (cb, tensor, row + b * rows, col, rows, cols), note),
                        Call("noc_async_read_barrier", (), note), Call("cb_push_back", (cb, pages), note)]

            return {"reader": loop("band", nrows // rows, band)}
        out = {"reader": [*index_calls, Call("cb_reserve_back", (cb, n), note), Call(op, (cb, *where), note),
                          Call("noc_async_read_barrier", (), note), Call("cb_push_back", (cb, n), note)]}
        if "compute" in e.consumer:
            out["compute"] = [Call("consume", (cb, n), note)]
        return out

    def _where(self, args, op: str):
        """(tensor, tile row, tile col, rows, cols[, window]) of a transfer, and the helper that does it."""
        where = (Tensor(self.tensor_names[int(args[1])]), *map(self.expr, args[2:4]), int(args[4]), int(args[5]))
        window = tuple(self.expr(a) if not isinstance(a, tirx.IntImm) else int(a) for a in args[6:10])
        if window == (0, TILE, 0, TILE):
            return where, op
        return where + window, op + "_window"

    def op_gather_rows(self, args, note) -> dict:
        """Row ``i`` of the block: the index element (``read_index`` .. ``index_value``, as ``index_reads``), then
        ``gather_row`` copies that tensor row (zeros past the index tensor) through the reserved page of the
        gather's scratch CB (the tensor's format), which the reader pushes and pops itself once the block is read."""
        name = self.cb_name(args[0])
        n = self.cbs[name].block_tiles
        cb, idx_cb, scratch = CB(name), CB(str(args[14].value)), CB(str(args[15].value))
        tensor, index = Tensor(self.tensor_names[int(args[1])]), Tensor(self.tensor_names[int(args[2])])
        index_calls, (pos_r, pos_c, base) = self.index_reads_of([args[3], args[4], args[8]], note)
        pos = [self.expr(a) for a in (pos_r, pos_c)]
        step, scale, base = [int(a) for a in args[5:7]], int(args[7]), self.expr(base)
        rows, col, cols, count = int(args[9]), self.expr(args[10]), int(args[11]), self.expr(args[12])
        tensor_rows = self.expr(args[13])

        def row(i):
            r, c = pos[0] + i * step[0], pos[1] + i * step[1]
            var = tirx.Var(self.names.fresh(f"{index.name}_value"), "int32")
            src = tirx.Var(self.names.fresh(f"{tensor.name}_row"), "int32")
            valid = tirx.Cast("int32", tirx.all((r if step[0] else c) < count, src >= 0, src < tensor_rows))
            return [Call("cb_reserve_back", (idx_cb, 1), note), Call("read_index", (idx_cb, index, r, c), note),
                    Call("noc_async_read_barrier", (), note),
                    Let(var, tirx.Call("int32", TTOps.index_value, [tirx.StringImm(idx_cb.name), c])),
                    Let(src, var * scale + base if scale != 1 or not _is_zero(base) else var),
                    Call("gather_row", (cb, i, tensor, src, col, cols, scratch, valid), note),
                    Call("cb_push_back", (idx_cb, 1), note), Call("cb_wait_front", (idx_cb, 1), note),
                    Call("cb_pop_front", (idx_cb, 1), note)]

        out = {"reader": [*index_calls, Call("cb_reserve_back", (cb, n), note),
                          Call("cb_reserve_back", (scratch, 1), note),
                          *loop("row", rows, row), Call("noc_async_read_barrier", (), note),
                          Call("cb_push_back", (scratch, 1), note), Call("cb_wait_front", (scratch, 1), note),
                          Call("cb_pop_front", (scratch, 1), note), Call("cb_push_back", (cb, n), note)]}
        out["compute"] = [Call("consume", (cb, n), note)]
        return out

    def op_offset_rows(self, args, note) -> dict:
        """A block of rows at an element row offset (``offset_rows``): the offset's tensor elements are read first
        (``index_reads``), then ``gather_row`` moves tensor row ``row + i`` into row ``i`` of the block (zeros at
        or past the tensor's ``count`` rows) through the reserved page of the gather's scratch CB."""
        name = self.cb_name(args[0])
        n = self.cbs[name].block_tiles
        index_calls, args = self.index_reads(args, note)
        cb, scratch = CB(name), CB(str(args[7].value))
        tensor = Tensor(self.tensor_names[int(args[1])])
        first, rows, col, cols, count = (self.expr(args[2]), int(args[3]), self.expr(args[4]), int(args[5]),
                                         self.expr(args[6]))
        row0 = tirx.Var(self.names.fresh("first_row"), "int32")

        def row(i):
            src = row0 + i
            valid = tirx.Cast("int32", tirx.all(src >= 0, src < count))
            return [Call("gather_row", (cb, i, tensor, src, col, cols, scratch, valid), note)]

        out = {"reader": [*index_calls, Let(row0, first), Call("cb_reserve_back", (cb, n), note),
                          Call("cb_reserve_back", (scratch, 1), note), *loop("row", rows, row),
                          Call("noc_async_read_barrier", (), note), Call("cb_push_back", (scratch, 1), note),
                          Call("cb_wait_front", (scratch, 1), note), Call("cb_pop_front", (scratch, 1), note),
                          Call("cb_push_back", (cb, n), note)]}
        out["compute"] = [Call("consume", (cb, n), note)]
        return out

    def op_im2col_rows(self, args, note) -> dict:
        """T.im2col: the block's kernel tap (kh, kw) and channel tile come from its column block; row ``i`` is output
        pixel ``m = nhw_step * rows + i`` = (n, oh, ow), whose input pixel (oh * S + kh * D - P, ow * S + kw * D - P)
        is row (n * H + ih) * W + iw of the [N*H*W, C] view. ``gather_row`` copies its channel tiles (zeros when the
        tap falls in the padding or m is past the last pixel) through the scratch CB, as a row gather does."""
        name = self.cb_name(args[0])
        n_tiles = self.cbs[name].block_tiles
        cb, scratch = CB(name), CB(str(args[14].value))
        tensor = Tensor(self.tensor_names[int(args[1])])
        nhw, cstep = self.expr(args[2]), self.expr(args[3])
        N, H, W, C, K, S, D, P, rows, cols = (int(a) for a in args[4:14])
        OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1

        def let(stem, value):
            var = tirx.Var(self.names.fresh(stem), "int32")
            return var, Let(var, value)

        u32 = lambda e: tirx.Cast("int32", e)   # noqa: E731 - a comparison as 0 / 1 in the product below
        tap, tap_let = let("tap", tirx.floordiv(cstep * (cols * TILE), C))
        kh, kh_let = let("kh", tirx.floordiv(tap, K))
        kw, kw_let = let("kw", tirx.floormod(tap, K))
        ctile, ctile_let = let("c_tile", tirx.floordiv(tirx.floormod(cstep * (cols * TILE), C), TILE))

        def row(i):
            m, m_let = let("pixel", nhw * rows + i)
            ih, ih_let = let("ih", tirx.floormod(tirx.floordiv(m, OW), OH) * S + kh * D)   # + P: never negative
            iw, iw_let = let("iw", tirx.floormod(m, OW) * S + kw * D)
            valid = u32(m < N * OH * OW) * u32(ih >= P) * u32(ih < H + P) * u32(iw >= P) * u32(iw < W + P)
            src = (tirx.floordiv(m, OH * OW) * H + ih - P) * W + iw - P
            return [m_let, ih_let, iw_let, Call("gather_row", (cb, i, tensor, src, ctile, cols, scratch, valid), note)]

        out = {"reader": [Call("cb_reserve_back", (cb, n_tiles), note), Call("cb_reserve_back", (scratch, 1), note),
                          tap_let, kh_let, kw_let, ctile_let, *loop("row", rows, row),
                          Call("noc_async_read_barrier", (), note),
                          Call("cb_push_back", (scratch, 1), note), Call("cb_wait_front", (scratch, 1), note),
                          Call("cb_pop_front", (scratch, 1), note), Call("cb_push_back", (cb, n_tiles), note)]}
        out["compute"] = [Call("consume", (cb, n_tiles), note)]
        return out

    def op_write_block(self, args, note) -> dict:
        name = self.cb_name(args[0])
        n = self.cbs[name].block_tiles
        index_calls, args = self.index_reads(args, note)
        cb, where, op = CB(name), *self._where(args, "write_tiles")
        return {"writer": [*index_calls, Call("cb_wait_front", (cb, n), note), Call(op, (cb, *where), note),
                           Call("noc_async_write_barrier", (), note), Call("cb_pop_front", (cb, n), note)]}

    def op_write_rows(self, args, note) -> dict:
        """A block written to rows at an element row offset (``write_rows``): ``scatter_row`` writes block row
        ``i`` to tensor row ``row + i`` when ``i`` is below the guard's bound and the row inside the tensor, face-row
        segment by segment."""
        name = self.cb_name(args[0])
        n = self.cbs[name].block_tiles
        index_calls, args = self.index_reads(args, note)
        cb, tensor = CB(name), Tensor(self.tensor_names[int(args[1])])
        first, rows, col, cols = self.expr(args[2]), int(args[3]), self.expr(args[4]), int(args[5])
        count, bound = self.expr(args[6]), self.expr(args[7])
        row0, valid = tirx.Var(self.names.fresh("first_row"), "int32"), tirx.Var(self.names.fresh("valid_rows"), "int32")

        def row(i):
            return [Call("scatter_row", (cb, i, tensor, row0 + i, col, cols, tirx.Cast("int32", i < valid)), note)]

        # rows [0, valid) are written: below the guard's bound, inside the tensor, never a negative count
        valid_rows = tirx.max(tirx.min(tirx.min(bound, count - row0), rows), 0)
        return {"writer": [*index_calls, Let(row0, first), Let(valid, valid_rows),
                           Call("cb_wait_front", (cb, n), note), *loop("row", rows, row),
                           Call("noc_async_write_barrier", (), note), Call("cb_pop_front", (cb, n), note)]}

    # -- compute ---------------------------------------------------------------------------------------
    def pack(self, cb: CB, n: int, note: str, slot=None) -> list:
        """Reserve ``n`` pages, pack DST[0..n) (or ``slot``) into them, release DST, push."""
        packs = ([Call("pack_tile", (slot, cb), note)] if slot is not None else
                 loop("i", n, lambda i: [Call("pack_tile", (Dst(i), cb), note)]))
        return [Call("cb_reserve_back", (cb, n), note), Call("tile_regs_wait", (), note),
                Call("pack_reconfig_data_format", (cb,), note), *packs, Call("tile_regs_release", (), note),
                Call("cb_push_back", (cb, n), note)]

    def op_fill(self, args, note) -> dict:
        name = self.cb_name(args[0])
        e = self.cbs[name]
        value = float(args[1].value)
        cb = CB(name)
        if name == self.dst_frag:
            out = [Call("tile_regs_acquire", (), f"{note}: the accumulator lives in DST until it is packed")]
            if value != 0.0:
                out += [Call("fill_tile_init", (), note)]
                out += [Call("fill_tile", (Dst(i), float_lit(value)), note) for i in range(e.block_tiles)]
            return {"compute": out}
        if name not in self.full:
            raise TTUnsupportedError(f"T.fill of {name}, which is not a fragment", construct=note, source=self.src)
        sh, sw = e.subblock
        sub = sh * sw
        out = []
        if self.full[name]:
            out += [Call("cb_wait_front", (cb, e.block_tiles), "drop the previous value"),
                    Call("cb_pop_front", (cb, e.block_tiles), "drop the previous value")]
        self.note_startup(Call("hw_startup", (cb, cb, cb)), 0)

        def one(_sb):
            body = [Call("tile_regs_acquire", (), note)]
            if value != 0.0:
                body += [Call("fill_tile_init", (), note)]
                body += loop("i", sub, lambda i: [Call("fill_tile", (Dst(i), float_lit(value)), note)])
            return body + [Call("tile_regs_commit", (), note)] + self.pack(cb, sub, note)

        out += loop("sb", e.block_tiles // sub, one)
        self.full[name] = True
        return {"compute": out}

    def op_transpose(self, args, note) -> dict:
        """Transpose a block of tiles into a scratch CB, consumed in the enclosing scope."""
        s_name, d_name = self.cb_name(args[0]), self.cb_name(args[1])
        cs, cd = CB(s_name), CB(d_name)
        rows, cols = self.cbs[d_name].shape_tiles     # the source block is cols x rows tiles

        def tile(r, c):
            v = vreg()
            return [Call("tile_regs_acquire", (), note), Call("reconfig_data_format_srca", (cs,), note),
                    Call("transpose_init", (cs,), note), Call("transpose_tile", (cs, c * rows + r, v), note),
                    Call("tile_regs_commit", (), note), *self.pack(cd, 1, note, slot=v)]

        waits = []
        if s_name in self.full:     # a fragment computed earlier (a row reduction's result): wait for it
            if not self.full[s_name]:
                raise TTUnsupportedError(f"a transpose reads {s_name} before it is written", construct=note,
                                         source=self.src)
            waits.append(Call("cb_wait_front", (cs, self.cbs[s_name].block_tiles), note))
        body = loop("r", rows, lambda r: loop("c", cols, lambda c: tile(r, c)))
        return {"compute": waits + body + [Call("consume", (cd, rows * cols), note)]}

    def op_insert_window(self, args, note) -> dict:
        """dst's tiles in order: a tile of the window is copied from the part, any other from prev, and packed
        into dst. When prev is dst (a compute fragment) its tiles come round one at a time (wait, copy, pop,
        pack), zeros when it holds nothing yet; a computed prev is waited for whole and popped at the end; a
        block the reader filled is indexed and consumed where it was read. The part is popped at the end."""
        d_name, p_name, s_name = self.cb_name(args[0]), self.cb_name(args[1]), self.cb_name(args[2])
        cd, cp, cs = CB(d_name), CB(p_name), CB(s_name)
        rows, cols = self.cbs[d_name].shape_tiles
        h, w = self.cbs[p_name].shape_tiles
        r0, c0 = int(args[3]), int(args[4])
        sub = tuple(self.cbs[d_name].subblock or (1, 1))
        if sub not in ((1, 1), (1, cols), (rows, cols)):
            raise TTLoweringError(f"a window store into {d_name}, which rotates in {list(sub)} subblocks",
                                  construct=note, source=self.src)
        part_computed = p_name in self.full      # else a block the reader filled, consumed where it was read
        if part_computed and not self.full[p_name]:
            raise TTLoweringError(f"{p_name} is inserted before it is computed", construct=note, source=self.src)
        held = bool(self.full.get(d_name))
        rotates = s_name == d_name
        computed = not rotates and s_name in self.full
        if computed and not self.full[s_name]:
            raise TTLoweringError(f"{s_name} is read before it is written", construct=note, source=self.src)
        self.note_startup(Call("hw_startup", (cp, cp, cd)), 1)
        out = [Call("cb_wait_front", (cp, h * w), note)] if part_computed else []
        if computed:
            out.append(Call("cb_wait_front", (cs, self.cbs[s_name].block_tiles), note))
        for r in range(rows):
            for c in range(cols):
                v = vreg()
                inside = r0 <= r < r0 + h and c0 <= c < c0 + w
                body = [Call("tile_regs_acquire", (), note)]
                if inside:
                    at = (r - r0) * w + (c - c0) if part_computed else self.queue_pos(p_name, r - r0, c - c0)
                    body += [Call("reconfig_data_format_srca", (cp,), note), Call("copy_init", (cp,), note),
                             Call("copy_tile", (cp, at, v), note)]
                    if held:
                        body += [Call("cb_wait_front", (cd, 1), note)]
                elif not rotates:          # the reader's block, consumed where it was read
                    body += [Call("reconfig_data_format_srca", (cs,), note), Call("copy_init", (cs,), note),
                             Call("copy_tile", (cs, self.queue_pos(s_name, r, c), v), note)]
                elif held:
                    body += [Call("cb_wait_front", (cd, 1), note), Call("reconfig_data_format_srca", (cd,), note),
                             Call("copy_init", (cd,), note), Call("copy_tile", (cd, 0, v), note)]
                else:
                    body += [Call("fill_tile_init", (), note), Call("fill_tile", (v, float_lit(0.0)), note)]
                body += [Call("tile_regs_commit", (), note)]
                if held:
                    body += [Call("cb_pop_front", (cd, 1), note)]
                out += body + self.pack(cd, 1, note, slot=v)
        if part_computed:
            out.append(Call("cb_pop_front", (cp, h * w), note))
            self.full[p_name] = False
        if computed:
            out.append(Call("cb_pop_front", (cs, self.cbs[s_name].block_tiles), note))
            self.full[s_name] = False
        self.full[d_name] = True
        return {"compute": out}

    def op_matmul(self, args, note) -> dict:
        a_name, b_name, c_name = (self.cb_name(x) for x in args[:3])
        waits = []
        for name in dict.fromkeys((a_name, b_name)):
            if name in self.full:     # a fragment computed earlier (fused MLP, attention's P.V): wait for it
                if not self.full[name]:
                    raise TTUnsupportedError(f"T.gemm reads {name} before it is written", construct=note,
                                             source=self.src)
                waits.append(Call("cb_wait_front", (CB(name), self.cbs[name].block_tiles), note))
        packs_to = CB(self.dst_frag_out) if c_name == self.dst_frag and self.dst_frag_out else CB(c_name)
        self.note_startup(Call("hw_startup_matmul", (CB(a_name), CB(b_name), packs_to)), 2)
        gemm = _Matmul(self, a_name, b_name, c_name, bool(args[4]), note)
        if c_name == self.dst_frag:
            return {"compute": waits + gemm.into_dst()}
        if not self.full[c_name]:
            raise TTUnsupportedError(f"T.gemm accumulates into {c_name} before it is initialised",
                                     construct=note, source=self.src, fix=f"call T.clear({c_name}) first")
        return {"compute": waits + gemm.into_cb()}

    def reduce_source(self, src: str, note: str) -> list:
        """A reduction's source fragment computed earlier: wait for its block."""
        if src not in self.full:
            return []
        if not self.full[src]:
            raise TTUnsupportedError(f"{src} is reduced before it is written", construct=note, source=self.src)
        return [Call("cb_wait_front", (CB(src), self.cbs[src].block_tiles), note)]

    def reduce_destination(self, dst: str, clear: bool, note: str) -> list:
        """A reduction's destination: a clearing reduction drops the value it held; clear=False needs one."""
        if dst in self.full and not self.full[dst] and not clear:
            raise TTUnsupportedError(f"T.reduce_*(clear=False) into {dst} before it is initialised", construct=note,
                                     source=self.src, fix=f"T.clear({dst}) or T.fill it first")
        if dst in self.full and self.full[dst] and clear:
            n = self.cbs[dst].block_tiles
            return [Call("cb_wait_front", (CB(dst), n), "drop the previous value"),
                    Call("cb_pop_front", (CB(dst), n), "drop the previous value")]
        return []

    def dst_format(self) -> str:
        return "DataFormat::Float32" if self.fp32_acc else "DataFormat::Float16_b"

    def op_reduce(self, args, note) -> dict:
        """One DST tile per output tile: reduce_tile folds the source tiles of its row (dim 1) or column (dim 0)
        into it (after the previous value when ``clear`` is false); min negates, abs kinds reduce |src|."""
        src, dst = self.cb_name(args[0]), self.cb_name(args[1])
        kind, dim, clear = str(args[2].value), int(args[3]), bool(args[4])
        if exact_reduce(self.cbs[src].format, self.fp32_acc, self.allow_tf32):
            return self.op_reduce_sfpu(src, dst, kind, dim, clear, note)
        scratch = self.cb_name(args[5]) if int(args[5]) >= 0 else None
        pool = "max" if kind in ("max", "min", "absmax") else "sum"
        rdim = "row" if dim == 1 else "col"
        rows, cols = self.cbs[src].shape_tiles
        n_src = self.cbs[src].block_tiles
        cs, cd, scaler = CB(src), CB(dst), CB(SCALER)
        out = self.reduce_source(src, note)
        if scratch is not None:      # |src| or -src, tile by tile, into the scratch CB
            op = "negative_tile" if kind == "min" else "abs_tile"
            cx = CB(scratch)

            def pre(i):
                v = vreg()
                return [Call("tile_regs_acquire", (), note), Call("reconfig_data_format_srca", (cs,), note),
                        Call("copy_init", (cs,), note), Call("copy_tile", (cs, i, v), note),
                        Call(f"{op}_init", (), note), Call(op, (v,), note), Call("tile_regs_commit", (), note),
                        *self.pack(cx, 1, note, slot=v)]

            out += loop("i", n_src, pre)
            out.append(Call("cb_wait_front", (cx, n_src), note))
        data = CB(scratch) if scratch is not None else cs
        out += self.reduce_destination(dst, clear, note)
        self.note_startup(Call("hw_startup", (data, scaler, cd)), 1)
        # REDUCE_ROW SUM unpacks the scaler through SrcA and the data through SrcB; MAX and REDUCE_COL the reverse
        order = (scaler, data) if (pool, rdim) == ("sum", "row") else (data, scaler)
        outer, inner = (rows, cols) if dim == 1 else (cols, rows)

        def one(o):
            v = vreg()
            body = [Call("tile_regs_acquire", (), note)]
            if not clear:
                body += [Call("reconfig_data_format_srca", (cd,), note), Call("copy_init", (cd,), note),
                         Call("cb_wait_front", (cd, 1), note), Call("copy_tile", (cd, 0, v), note),
                         Call("cb_pop_front", (cd, 1), note)]
                if kind == "min":
                    body += [Call("negative_tile_init", (), note), Call("negative_tile", (v,), note)]
            body += [Call("reconfig_data_format", order, note),
                     Call(f"reduce_init_{pool}_{rdim}", (data, scaler, cd), note)]
            body += loop("kt", inner, lambda k: [Call(f"reduce_tile_{pool}_{rdim}", (
                data, scaler, self.queue_pos(src, o, k) if dim == 1 else self.queue_pos(src, k, o), 0, v), note)])
            if kind == "min":
                body += [Call("negative_tile_init", (), note), Call("negative_tile", (v,), note)]
            body += [Call("tile_regs_commit", (), note), *self.pack(cd, 1, note, slot=v),
                     Call("reduce_uninit", (), note)]
            return body

        out += loop("r", outer, one)
        if scratch is not None:
            out.append(Call("cb_pop_front", (CB(scratch), n_src), note))
        if dst in self.full:
            self.full[dst] = True
        return {"compute": out}

    def op_reduce_sfpu(self, src: str, dst: str, kind: str, dim: int, clear: bool, note: str) -> dict:
        """The exact fp32 reduction (``compute_config.exact_reduce``), one DST tile per output tile: the source tiles
        of its row (dim 1) or column (dim 0) are copied into DST (unpack-to-DEST: exact), |x| taken on the SFPU for
        the abs kinds, folded element-wise with SFPU fp32 ops, and the folded tile reduced by ``sfpu_reduce`` into
        column 0 (dim 1) / row 0 (dim 0); ``clear=False`` folds the previous value in after it. MIN is the SFPU's own
        pool (no negation)."""
        rows, cols = self.cbs[src].shape_tiles
        cs, cd = CB(src), CB(dst)
        out = self.reduce_source(src, note) + self.reduce_destination(dst, clear, note)
        self.note_startup(Call("hw_startup", (cs, cs, cd)), 1)
        pool = {"sum": "sum", "abssum": "sum", "max": "max", "absmax": "max", "min": "min"}[kind]
        fold = {"sum": "add_binary_tile", "max": "binary_max_tile", "min": "binary_min_tile"}[pool]
        rdim = "row" if dim == 1 else "col"
        outer, inner = (rows, cols) if dim == 1 else (cols, rows)

        def load(o, k, v):
            pos = self.queue_pos(src, o, k) if dim == 1 else self.queue_pos(src, k, o)
            body = [Call("copy_tile", (cs, pos, v), note)]
            if kind in ("abssum", "absmax"):
                body += [Call("abs_tile_init", (), note), Call("abs_tile", (v,), note)]
            return body

        def one(o):
            v = vreg()
            body = [Call("tile_regs_acquire", (), note), Call("reconfig_data_format_srca", (cs,), note),
                    Call("copy_init", (cs,), note), *load(o, 0, v)]

            def step(k):     # tile k + 1 of the row (column), folded element-wise into v
                w = vreg()
                return load(o, k + 1, w) + [Call(f"{fold}_init", (), note), Call(fold, (v, w), note)]

            if inner > 1:
                body += loop("kt", inner - 1, step)
            body += [Call(f"sfpu_reduce_init_{pool}", (), note), Call(f"sfpu_reduce_{pool}_{rdim}", (v,), note)]
            if not clear:    # fold the previous value (its column 0 / row 0) into the result
                prev = vreg()
                body += [Call("reconfig_data_format_srca", (cd,), note), Call("copy_init", (cd,), note),
                         Call("cb_wait_front", (cd, 1), note), Call("copy_tile", (cd, 0, prev), note),
                         Call("cb_pop_front", (cd, 1), note), Call(f"{fold}_init", (), note),
                         Call(fold, (v, prev), note)]
            return body + [Call("tile_regs_commit", (), note), *self.pack(cd, 1, note, slot=v)]

        out += loop("r", outer, one)
        if dst in self.full:
            self.full[dst] = True
        return {"compute": out}

    # -- elementwise -----------------------------------------------------------------------------------
    def row_major(self, name: str) -> bool:
        """Whether the CB of ``name`` holds its block's tiles row-major (every CB but a subblocked accumulator)."""
        e = self.cbs[name]
        rows, cols = e.shape_tiles
        sh, sw = (e.subblock or (1, 1)) if e.role == "intermediate" else (1, 1)
        return (sh, sw) in ((1, 1), (1, cols)) or sh == rows and sw == cols

    def queue_pos(self, name: str, r, c):
        """Position of tile (r, c) in the CB of ``name`` (row-major, or subblock-major for accumulators)."""
        e = self.cbs[name]
        cols = e.shape_tiles[1]
        if self.row_major(name):
            return r * cols + c
        sh, sw = e.subblock
        return (tirx.floordiv(r, sh) * (cols // sw) + tirx.floordiv(c, sw)) * (sh * sw) + \
            tirx.floormod(r, sh) * sw + tirx.floormod(c, sw)

    def op_eltwise(self, args, note) -> dict:
        """An element-wise op; each tensor element in its expression (``x * Slopes[by]``, ``index_load`` into a
        ``_scalar`` CB) is read first: the reader reads its face row into the CB and pushes the page, compute waits,
        reads the element from L1 (``read_tile_value``) and pops; the op uses it as a scalar operand (a float32
        element as its bits, a bfloat16 / float16 one widened to them, an int32 element converted)."""
        loads = _index_loads([args[1]])
        reader, compute, vmap = [], [], []
        for load in loads:
            cb = CB(str(load.args[3].value))
            value = tirx.Var(self.names.fresh(f"{self.tensor_names[int(load.args[0])]}_value"), load.dtype)
            read = "read_half" if load.dtype.bits == 16 else "read_index"
            reader += [Call("cb_reserve_back", (cb, 1), note),
                       Call(read, (cb, Tensor(self.tensor_names[int(load.args[0])]), self.expr(load.args[1]),
                                   self.expr(load.args[2])), note),
                       Call("noc_async_read_barrier", (), note), Call("cb_push_back", (cb, 1), note)]
            compute += self._take_element(load, cb, value, note)
            vmap.append((load, value))
        expr = _substitute(args[1], vmap) if vmap else args[1]
        out = {"compute": compute + lower_eltwise(self, self.cb_name(args[0]), expr, note)}
        return {**out, "reader": reader} if reader else out


class _Matmul:
    """The compute calls of one T.gemm A x B (B transposed when ``trans_b``) into C: C in DST (``into_dst``), or a
    CB-resident accumulator updated subblock by subblock (``into_cb``), with A streamed in bands where StreamBandsTT
    banded it. matmul_block when A's rows are kt tiles apart and B's columns adjacent (row-major, B not transposed,
    or transposed in transposed tile order), reader-filled blocks and fragments alike: an rt x ct block of DST (more
    than one tile) unpacks rt + ct tiles per K tile instead of 2 per tile matmul."""

    def __init__(self, lower: LowerToProgram, a_name: str, b_name: str, c_name: str, trans_b: bool, note: str):
        self.lower, self.note = lower, note
        self.a_name, self.b_name, self.c_name, self.trans_b = a_name, b_name, c_name, trans_b
        self.ca, self.cb, self.cc = CB(a_name), CB(b_name), CB(c_name)
        self.c = lower.cbs[c_name]
        self.mt, self.kt = lower.cbs[a_name].shape_tiles
        self.nt = self.c.shape_tiles[1]
        self.band = lower.cbs[a_name].band     # StreamBandsTT: A arrives band by band, one per subblock row
        self.reconfig = Call("reconfig_data_format", (self.cb, self.ca), note)
        self.init = [self.reconfig, Call("matmul_init", (self.ca, self.cb, Lit(str(int(trans_b)))), note)]
        # B^T's tiles of one K step adjacent: B row-major, or transposed with its block in transposed tile order
        self.b_transposed = trans_b and b_name in lower.transposed_in1
        # (a fragment computed earlier, attention's P or a split part, qualifies unless it is a subblocked accumulator)
        self.row_major = lower.row_major(a_name) and (self.b_transposed or not trans_b and lower.row_major(b_name))

    def a_pos(self, m, k):
        """A's tile (m, k): m is the tile row in the block, or in the band when A is banded."""
        return m * self.kt + k if self.band else self.lower.queue_pos(self.a_name, m, k)

    def b_pos(self, k, n):
        if self.b_transposed:      # tile (n, k) of the [N, K] block at k * N_tiles + n (read_tiles_transposed)
            return k * self.lower.cbs[self.b_name].shape_tiles[0] + n
        return self.lower.queue_pos(self.b_name, n, k) if self.trans_b else self.lower.queue_pos(self.b_name, k, n)

    def tiles(self, m, n, k, dst) -> list:
        return [Call("matmul_tiles", (self.ca, self.cb, self.a_pos(m, k), self.b_pos(k, n), Dst(dst)), self.note)]

    def block(self, m, n, rt, ct) -> tuple[list, list]:
        """(init, calls): DST[0 .. rt * ct) += the rt x ct output tiles at (m, n), over every K tile."""
        dims = (Lit(str(int(self.trans_b))), ct, rt, self.kt)
        return [self.reconfig, Call("matmul_block_init", (self.ca, self.cb, *dims), self.note)], loop(
            "kt", self.kt, lambda k: [Call("matmul_block", (self.ca, self.cb, self.a_pos(m, k), self.b_pos(k, n),
                                                            Dst(0), *dims), self.note)])

    def into_dst(self) -> list:
        """C is the DST-resident fragment: every output tile in DST, over every K tile."""
        if self.band:
            raise TTLoweringError(f"{self.a_name} streams in bands, but {self.c_name} accumulates in DST "
                                  "(StreamBandsTT bands only the A operand of a CB-resident accumulator)",
                                  construct=self.note, source=self.lower.src)
        mt, nt, kt = self.mt, self.nt, self.kt
        if self.row_major and mt * nt > 1:
            init, body = self.block(0, 0, mt, nt)
            return init + body
        return self.init + loop("mt", mt, lambda m: loop("nt", nt, lambda n: loop(
            "kt", kt, lambda k: self.tiles(m, n, k, m * nt + n))))

    def into_cb(self) -> list:
        """C accumulates in its CB: each sh x sw subblock is reloaded (or, with packer L1 accumulation, added to in
        place by the packer), multiplied over every K tile and packed back."""
        sh, sw = self.c.subblock
        body = loop("sm", self.mt // sh, self.subblock_row)
        if self.c.accumulate == "packer_l1":  # T.clear packed the initial value; every K step adds to it
            why = f"{self.c_name} accumulates in L1 (packer L1 accumulation)"
            body = [Call("pack_reconfig_l1_acc", (1,), why)] + body + [Call("pack_reconfig_l1_acc", (0,), why)]
        return body

    def subblock_row(self, sm) -> list:
        sh, sw = self.c.subblock
        if not self.band:
            return loop("sn", self.nt // sw, lambda sn: self.subblock(sm, sn))
        if int(self.band["rows"]) != sh:
            raise TTLoweringError(f"{self.a_name} streams in bands of {self.band['rows']} tile rows, the subblock "
                                  f"row of {self.c_name} has {sh}", construct=self.note, source=self.lower.src)
        why = f"{self.a_name} streams in bands of {sh}x{self.kt} tiles: this subblock row's band"
        pages = int(self.band["pages"])
        return ([Call("cb_wait_front", (self.ca, pages), why)] + loop("sn", self.nt // sw, lambda sn: self.subblock(
            sm, sn)) + [Call("cb_pop_front", (self.ca, pages), why)])

    def subblock(self, sm, sn) -> list:
        """One sh x sw subblock of C: its partial sums into DST, the K loop's products added, packed back."""
        sh, sw = self.c.subblock
        sub, cc, note = sh * sw, self.cc, self.note
        use_block = self.row_major and sub > 1
        init = self.block(0, 0, sh, sw)[0] if use_block else self.init
        row = (lambda h: h) if self.band else (lambda h: sm * sh + h)     # A's rows: in the band, or the block
        math = self.block(row(0), sn * sw, sh, sw)[1] if use_block else loop("h", sh, lambda h: loop(
            "w", sw, lambda w: loop("kt", self.kt, lambda k: self.tiles(row(h), sn * sw + w, k, h * sw + w))))
        if self.c.accumulate == "packer_l1":   # the partials stay in L1: pop them so the pack adds to them
            why = f"the packer adds this {sh}x{sw} subblock to its partial sums in place"
            free = [Call("cb_wait_front", (cc, sub), why), Call("cb_pop_front", (cc, sub), why)]
            return ([Call("tile_regs_acquire", (), note)] + init + math + [Call("tile_regs_commit", (), note)]
                    + free + self.lower.pack(cc, sub, note))
        reload = [Call("reconfig_data_format_srca", (cc,), note), Call("copy_init", (cc,), note),
                  Call("cb_wait_front", (cc, sub), f"reload the partial sums of this {sh}x{sw} subblock")]
        reload += loop("i", sub, lambda i: [Call("copy_tile", (cc, i, Dst(i)), note)])
        reload += [Call("cb_pop_front", (cc, sub), note)]
        return ([Call("tile_regs_acquire", (), note)] + reload + init + math + [Call("tile_regs_commit", (), note)]
                + self.lower.pack(cc, sub, note))
