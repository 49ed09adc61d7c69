"""Kernel emitters: project the tile program onto the reader, compute and writer kernels.

Each emitter walks the same tree (``program.build``) and keeps what its processor does: the reader its
``read_block``s, the writer its ``write_block``s, the compute kernel the math plus the CB waits/pops that
pair with the reader and the reserves/pushes that pair with the writer. Loops and ``(by, bx)`` binds are
kept where something inside still needs them. Every TT-Metalium compute call comes from
``intrinsics.INTRINSICS``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tvm import tirx
from tvm.ir import Op as TVMOp

from .artifact import comment_text
from .cexpr import cexpr
from .errors import TTUnsupportedError
from .intrinsics import INTRINSICS, UNARY_TIR_OPS
from .program import Bind, Loop, Op
from .transform.tensorize import is_scalar, strip_cast


class Lines:
    def __init__(self, indent: int = 1):
        self.lines: list[str] = []
        self.level = indent

    def __call__(self, text: str = ""):
        self.lines.append(("    " * self.level + text) if text else "")

    def block(self, header: str):
        self(header + " {")
        self.level += 1
        return self

    def end(self):
        self.level -= 1
        self("}")

    def text(self) -> str:
        return "\n".join(self.lines)


def _used_vars(node, op_exprs=None) -> set:
    """Names of the Vars a subtree reads (for ops: only the expressions ``op_exprs(op)`` the role emits)."""
    found = set()

    def visit_expr(e):
        if isinstance(e, tirx.PrimExpr) or isinstance(e, tirx.Var):
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.add(n.name) if isinstance(n, tirx.Var) else None)

    def walk(n):
        if isinstance(n, list):
            for x in n:
                walk(x)
        elif isinstance(n, Loop):
            visit_expr(n.extent)
            walk(n.body)
        elif isinstance(n, Bind):
            visit_expr(n.value)
        elif isinstance(n, Op):
            for a in (op_exprs(n) if op_exprs is not None else n.args):
                if isinstance(a, tirx.PrimExpr):
                    visit_expr(a)

    walk(node)
    return found


class _Projector:
    """Shared structure walk: decides which loops/binds survive for one role."""

    role = ""

    def keeps(self, op: Op) -> bool:
        raise NotImplementedError

    def op_exprs(self, op: Op) -> list:
        """The index expressions this role prints for ``op``."""
        return []

    def has_work(self, node) -> bool:
        if isinstance(node, Op):
            return self.keeps(op=node)
        if isinstance(node, Loop):
            return any(self.has_work(n) for n in node.body)
        return False

    def emit_seq(self, out: Lines, nodes: list):
        kept = [n for n in nodes if not isinstance(n, Bind) and self.has_work(n)]
        needed = _used_vars(kept, self.op_exprs) if kept else set()
        for node in reversed(nodes):   # a needed bind needs what its value reads
            if isinstance(node, Bind) and node.var.name in needed:
                needed |= _used_vars([node], self.op_exprs)
        for node in nodes:
            if isinstance(node, Bind):
                if node.var.name in needed:
                    out(f"const uint32_t {node.var.name} = {cexpr(node.value)};")
                continue
            if not self.has_work(node):
                continue
            if isinstance(node, Loop):
                self.emit_loop(out, node)
            else:
                self.emit_op(out, node)

    def emit_loop(self, out: Lines, loop: Loop):
        v = loop.var.name
        note = "  // persistent loop over this core's blocks" if loop.persistent else ""
        out.block(f"for (uint32_t {v} = 0; {v} < {cexpr(loop.extent)}; ++{v})")
        if note:
            out.lines[-1] += note
        self.emit_seq(out, loop.body)
        out.end()

    def emit_op(self, out: Lines, op: Op):
        raise NotImplementedError


@dataclass
class TensorUse:
    name: str
    tiles_h: int | str          # str: a C++ expression of symbolic dimensions
    tiles_w: int | str
    last_rows: int | str        # valid rows in the last tile row
    last_cols: int | str        # valid columns in the last tile column


class DataMovementEmitter(_Projector):
    """Reader (``read_block``) or writer (``write_block``)."""

    def __init__(self, role: str, cbs: dict, tensors: list[TensorUse], cb_names: dict[int, str]):
        self.role = role
        self.kind = "read_block" if role == "reader" else "write_block"
        self.cbs = cbs
        self.tensors = tensors
        self.cb_names = cb_names

    def keeps(self, op: Op) -> bool:
        return op.kind == self.kind

    def op_exprs(self, op: Op) -> list:
        return op.args[2:4] if op.kind == self.kind else []

    def emit_op(self, out: Lines, op: Op):
        cb, tensor, row, col, rows, cols = op.args
        t = self.tensors[int(tensor)]
        fn = "read_tile_block" if self.role == "reader" else "write_tile_block"
        out(f"// {comment_text(op.text)}")
        out(f"{fn}({self.cb_names[int(cb)]}, {t.name}, {t.name}_grid, {cexpr(row)}, {cexpr(col)}, "
            f"{int(rows)}, {int(cols)});")


def float_bits(value: float) -> str:
    return f"0x{struct.unpack('<I', struct.pack('<f', float(value)))[0]:08x}u"


def _fmt_float(value: float) -> str:
    text = repr(float(value))
    return text + ("f" if "e" in text or "." in text else ".0f")


@dataclass
class FragState:
    full: bool = False


class ComputeEmitter(_Projector):
    role = "compute"

    def __init__(self, cbs: dict, cb_names: dict[int, str], dst_capacity: int, mixed_formats: bool,
                 source: str | None):
        self.cbs = cbs                                  # name -> entry
        self.by_index = {e["index"]: (n, e) for n, e in cbs.items()}
        self.cb_names = cb_names
        self.cap = dst_capacity
        self.mixed = mixed_formats
        self.source = source
        self.state = {n: FragState() for n, e in cbs.items() if e["role"] == "intermediate" and e.get("residency") != "dst"}
        self.dst_frag = next((n for n, e in cbs.items() if e.get("residency") == "dst"), None)
        self.dst_frag_out = None   # the CB the DST-resident accumulator is packed into (set by prepare)
        self.headers: set[str] = set()
        self.startup: str | None = None
        self._startup_priority = -1
        self.pending_pops: list[list[tuple[str, int]]] = []

    def prepare(self, tree):
        """Find where the DST-resident accumulator is packed, before anything is emitted."""
        from .program import walk_ops

        for op in walk_ops(tree):
            if op.kind == "eltwise" and self.dst_frag is not None:
                loads = []
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(op.args[1]), lambda n: loads.append(n.buffer.name) if isinstance(n, tirx.BufferLoad) else None)
                if self.dst_frag in loads:
                    self.dst_frag_out = self.cbn(self.entry(op.args[0])[0])

    # -- helpers ---------------------------------------------------------------------------------------
    def keeps(self, op: Op) -> bool:
        if op.kind == "read_block":
            name, entry = self.by_index[int(op.args[0])]
            return "compute" in entry["consumer"]
        return op.kind in ("fill", "matmul", "eltwise", "transpose")

    def cbn(self, index_or_name) -> str:
        if isinstance(index_or_name, str):
            return self.cb_names[self.cbs[index_or_name]["index"]]
        return self.cb_names[int(index_or_name)]

    def entry(self, index) -> tuple[str, dict]:
        return self.by_index[int(index)]

    def intr(self, name: str, **kw) -> tuple[str, str]:
        spec = INTRINSICS[name]
        self.headers.add(spec.header)
        return spec.init.format(**kw), spec.call.format(**kw)

    def note_startup(self, text: str, priority: int = 0):
        """The hardware start-up call, configured for the kernel's main op (matmul > eltwise > fill)."""
        if self.startup is None or priority > self._startup_priority:
            self.startup, self._startup_priority = text, priority

    def reconfig_unpack(self, out: Lines, srca: str, srcb: str | None = None):
        if self.mixed:
            if srcb is None:
                out(f"reconfig_data_format_srca({srca});")
            else:
                out(f"reconfig_data_format({srca}, {srcb});")

    def reconfig_pack(self, out: Lines, ocb: str):
        if self.mixed:
            out(f"pack_reconfig_data_format({ocb});")

    # -- structure -------------------------------------------------------------------------------------
    def emit_seq(self, out: Lines, nodes: list):
        self.pending_pops.append([])
        super().emit_seq(out, nodes)
        for cb, n in self.pending_pops.pop():
            out(f"cb_pop_front({cb}, {n});")

    def emit_loop(self, out: Lines, loop: Loop):
        before = {n: s.full for n, s in self.state.items()}
        v = loop.var.name
        out.block(f"for (uint32_t {v} = 0; {v} < {cexpr(loop.extent)}; ++{v})")
        if loop.persistent:
            out.lines[-1] += "  // persistent loop over this core's blocks"
        self.emit_seq(out, loop.body)
        if loop.persistent:
            for name, s in self.state.items():
                if s.full:
                    e = self.cbs[name]
                    out(f"cb_wait_front({self.cbn(name)}, {e['block_tiles']});  // {comment_text(name)} is dead after "
                        "this block")
                    out(f"cb_pop_front({self.cbn(name)}, {e['block_tiles']});")
                    s.full = False
        after = {n: s.full for n, s in self.state.items()}
        if before != after:
            changed = [n for n in before if before[n] != after[n]]
            raise TTUnsupportedError(f"fragment {changed[0]} is initialised inside a loop and used after it",
                                     construct=f"loop over {v}", source=self.source,
                                     fix="initialise (T.clear) the fragment before the loop")
        out.end()

    def emit_op(self, out: Lines, op: Op):
        out(f"// {comment_text(op.text)}")
        getattr(self, "op_" + op.kind)(out, op)

    # -- ops -------------------------------------------------------------------------------------------
    def op_read_block(self, out: Lines, op: Op):
        name, e = self.entry(op.args[0])
        out(f"cb_wait_front({self.cbn(name)}, {e['block_tiles']});")
        self.pending_pops[-1].append((self.cbn(name), e["block_tiles"]))

    def op_transpose(self, out: Lines, op: Op):
        """Transpose a block of tiles into a scratch CB; it is consumed (popped) at the end of the scope."""
        s_name, s = self.entry(op.args[0])
        d_name, d = self.entry(op.args[1])
        cs, cd = self.cbn(s_name), self.cbn(d_name)
        rows, cols = d["shape_tiles"]          # the source block is cols x rows tiles
        init, _ = self.intr("transpose_tile", a=cs, ia=0, dst=0)
        self.reconfig_unpack(out, cs)
        out(init + ";")
        out(f"cb_reserve_back({cd}, {rows * cols});")
        out.block(f"for (uint32_t r = 0; r < {rows}u; ++r)")
        out.block(f"for (uint32_t c = 0; c < {cols}u; ++c)")
        out("tile_regs_acquire();")
        out(self.intr("transpose_tile", a=cs, ia=f"c * {rows}u + r", dst=0)[1] + ";")
        out("tile_regs_commit();")
        out("tile_regs_wait();")
        self.reconfig_pack(out, cd)
        out(f"pack_tile(0, {cd});")
        out("tile_regs_release();")
        out.end(); out.end()
        out(f"cb_push_back({cd}, {rows * cols});")
        out(f"cb_wait_front({cd}, {rows * cols});")
        self.pending_pops[-1].append((cd, rows * cols))

    def op_fill(self, out: Lines, op: Op):
        name, e = self.entry(op.args[0])
        value = float(op.args[1].value)
        cb = self.cbn(name)
        if name == self.dst_frag:
            out("tile_regs_acquire();  // accumulator lives in DST until it is packed")
            if value != 0.0:
                init, _ = self.intr("fill_tile", dst=0, value=0)
                out(init + ";")
                for i in range(e["block_tiles"]):
                    out(self.intr("fill_tile", dst=i, value=_fmt_float(value))[1] + ";")
            return
        if name not in self.state:
            raise TTUnsupportedError(f"T.fill of {name}, which is not a fragment", construct=op.text, source=self.source)
        sh, sw = e["subblock"]
        sub = sh * sw
        nsub = e["block_tiles"] // sub
        if self.state[name].full:
            out(f"cb_wait_front({cb}, {e['block_tiles']});  // drop the previous value")
            out(f"cb_pop_front({cb}, {e['block_tiles']});")
        self.note_startup(f"compute_kernel_hw_startup({cb}, {cb})")
        if value != 0.0:
            out(self.intr("fill_tile", dst=0, value=0)[0] + ";")
        out.block(f"for (uint32_t sb = 0; sb < {nsub}u; ++sb)")
        out("tile_regs_acquire();")
        if value != 0.0:
            out.block(f"for (uint32_t i = 0; i < {sub}u; ++i)")
            out(self.intr("fill_tile", dst="i", value=_fmt_float(value))[1] + ";")
            out.end()
        out("tile_regs_commit();")
        self._pack(out, cb, sub)
        out.end()
        self.state[name].full = True

    def _pack(self, out: Lines, cb: str, n: int, first_slot: str = "0"):
        out(f"cb_reserve_back({cb}, {n});")
        out("tile_regs_wait();")
        self.reconfig_pack(out, cb)
        if n == 1:
            out(f"pack_tile({first_slot}, {cb});")
        else:
            out.block(f"for (uint32_t i = 0; i < {n}u; ++i)")
            out(f"pack_tile(i, {cb});")
            out.end()
        out("tile_regs_release();")
        out(f"cb_push_back({cb}, {n});")

    def op_matmul(self, out: Lines, op: Op):
        a_name, a = self.entry(op.args[0])
        b_name, b = self.entry(op.args[1])
        c_name, c = self.entry(op.args[2])
        trans_b = bool(op.args[4])
        ca, cbb, cc = self.cbn(a_name), self.cbn(b_name), self.cbn(c_name)
        mt, kt = a["shape_tiles"]
        nt = c["shape_tiles"][1]
        b_index = (lambda k, n: f"{n} * {kt}u + {k}") if trans_b else (lambda k, n: f"{k} * {nt}u + {n}")
        packs_to = self.dst_frag_out if c_name == self.dst_frag else cc
        self.note_startup(f"compute_kernel_hw_startup<SrcOrder::Reverse>({ca}, {cbb}, {packs_to})", 2)
        init, _ = self.intr("matmul_tiles", a=ca, b=cbb, transpose=int(trans_b), ia=0, ib=0, dst=0)
        if c_name == self.dst_frag:
            self.reconfig_unpack(out, cbb, ca)
            out(init + ";")
            out.block(f"for (uint32_t mt = 0; mt < {mt}u; ++mt)")
            out.block(f"for (uint32_t nt = 0; nt < {nt}u; ++nt)")
            out.block(f"for (uint32_t kt = 0; kt < {kt}u; ++kt)")
            out(self.intr("matmul_tiles", a=ca, b=cbb, ia=f"mt * {kt}u + kt", ib=b_index("kt", "nt"),
                          dst=f"mt * {nt}u + nt", transpose=0)[1] + ";")
            out.end(); out.end(); out.end()
            return
        if not self.state[c_name].full:
            raise TTUnsupportedError(f"T.gemm accumulates into {c_name} before it is initialised",
                                     construct=op.text, source=self.source, fix=f"call T.clear({c_name}) first")
        sh, sw = c["subblock"]
        sub = sh * sw
        copy_init, _ = self.intr("copy_tile", a=cc, ia=0, dst=0)
        out.block(f"for (uint32_t sm = 0; sm < {mt // sh}u; ++sm)")
        out.block(f"for (uint32_t sn = 0; sn < {nt // sw}u; ++sn)")
        out("tile_regs_acquire();")
        out(f"// reload the partial sums of this {sh}x{sw} subblock")
        self.reconfig_unpack(out, cc)
        out(copy_init + ";")
        out(f"cb_wait_front({cc}, {sub});")
        out.block(f"for (uint32_t i = 0; i < {sub}u; ++i)")
        out(self.intr("copy_tile", a=cc, ia="i", dst="i")[1] + ";")
        out.end()
        out(f"cb_pop_front({cc}, {sub});")
        self.reconfig_unpack(out, cbb, ca)
        out(init + ";")
        out.block(f"for (uint32_t h = 0; h < {sh}u; ++h)")
        out.block(f"for (uint32_t w = 0; w < {sw}u; ++w)")
        out.block(f"for (uint32_t k = 0; k < {kt}u; ++k)")
        m_expr, n_expr = f"(sm * {sh}u + h)", f"(sn * {sw}u + w)"
        out(self.intr("matmul_tiles", a=ca, b=cbb, ia=f"{m_expr} * {kt}u + k", ib=b_index("k", n_expr),
                      dst=f"h * {sw}u + w", transpose=0)[1] + ";")
        out.end(); out.end(); out.end()
        out("tile_regs_commit();")
        self._pack(out, cc, sub)
        out.end(); out.end()

    # -- elementwise -----------------------------------------------------------------------------------
    def queue_pos(self, name: str, r: str, c: str) -> str:
        """Position of tile (r, c) in the CB of ``name`` (row-major, or subblock-major for accumulators)."""
        e = self.cbs[name]
        rows, cols = e["shape_tiles"]
        sh, sw = e.get("subblock", [1, 1]) if e["role"] == "intermediate" else (1, 1)
        if (sh, sw) in ((1, 1), (1, cols)) or sh == rows and sw == cols:
            return f"{r} * {cols}u + {c}"
        return f"(({r} / {sh}u) * {cols // sw}u + {c} / {sw}u) * {sh * sw}u + ({r} % {sh}u) * {sw}u + {c} % {sw}u"

    def op_eltwise(self, out: Lines, op: Op):
        d_name, d = self.entry(op.args[0])
        expr = op.args[1]
        loads = []
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: loads.append(n.buffer.name) if isinstance(n, tirx.BufferLoad) else None)
        if self.dst_frag is not None and self.dst_frag in loads:
            return self._copy_out_of_dst(out, d_name, d, expr)
        rows, cols = d["shape_tiles"]
        cb_d = self.cbn(d_name)
        reads_dest = d_name in loads
        for src in set(loads) - {d_name}:
            e = self.cbs[src]
            if src in self.state:
                if not self.state[src].full:
                    raise TTUnsupportedError(f"{src} is read before it is written", construct=op.text, source=self.source)
                out(f"cb_wait_front({self.cbn(src)}, {e['block_tiles']});")
        # Destination protocol: a compute-owned fragment rotates tile by tile; a CB bound for the writer
        # (or another consumer) is reserved as a whole block and pushed once.
        frag = d_name in self.state
        if reads_dest and (not frag or not self.state[d_name].full):
            raise TTUnsupportedError(f"{d_name} is read before it is written", construct=op.text, source=self.source)
        first_leaf = self.cbn(loads[0]) if loads else cb_d
        second_leaf = self.cbn(loads[1]) if len(loads) > 1 else first_leaf
        self.note_startup(f"compute_kernel_hw_startup({first_leaf}, {second_leaf}, {cb_d})", 1)
        body = Lines(0)
        inits: list[str] = []
        self._eval(body, inits, expr, 0, d_name, "r", "c", reads_dest)
        hoist = len(set(inits)) == 1
        if hoist:
            out(inits[0] + ";")
        if not frag:
            out(f"cb_reserve_back({cb_d}, {rows * cols});")
        if frag:
            if d["subblock"] != [1, 1] and list(d["subblock"]) != [1, cols]:
                raise TTUnsupportedError(f"elementwise update of the matmul accumulator {d_name}",
                                         construct=op.text, source=self.source,
                                         fix="copy the accumulator into a separate fragment first")
        out.block(f"for (uint32_t r = 0; r < {rows}u; ++r)")
        out.block(f"for (uint32_t c = 0; c < {cols}u; ++c)")
        out("tile_regs_acquire();")
        for line in body.lines:
            if hoist and line.strip().rstrip(";") == inits[0]:
                continue
            out(line.strip())
        out("tile_regs_commit();")
        if frag:
            if self.state[d_name].full:
                if not reads_dest:
                    out(f"cb_wait_front({cb_d}, 1);")
                out(f"cb_pop_front({cb_d}, 1);")
            self._pack(out, cb_d, 1)
        else:
            out("tile_regs_wait();")
            self.reconfig_pack(out, cb_d)
            out(f"pack_tile(0, {cb_d});")
            out("tile_regs_release();")
        out.end(); out.end()
        if not frag:
            out(f"cb_push_back({cb_d}, {rows * cols});")
        else:
            self.state[d_name].full = True

    def _index(self, name: str, r: str, c: str, dest: str, reads_dest: bool) -> str:
        if name == dest and reads_dest:
            return "0"   # the destination's current tile is at its CB front
        return self.queue_pos(name, r, c)

    def _eval(self, out: Lines, inits: list, e, slot: int, dest: str, r: str, c: str, reads_dest: bool):
        """Emit code leaving the value of ``e`` in DST[slot]."""
        e = strip_cast(e)

        def use(name, **kw):
            init, call = self.intr(name, **kw)
            inits.append(init)
            out(init + ";")
            out(call + ";")

        if isinstance(e, tirx.BufferLoad):
            cb = self.cbn(e.buffer.name)
            if e.buffer.name == dest and reads_dest:
                out(f"cb_wait_front({cb}, 1);")
            self.reconfig_unpack(out, cb)
            use("copy_tile", a=cb, ia=self._index(e.buffer.name, r, c, dest, reads_dest), dst=slot)
            return
        if isinstance(e, tirx.Call) and isinstance(e.op, TVMOp) and str(e.op.name) in UNARY_TIR_OPS:
            self._eval(out, inits, e.args[0], slot, dest, r, c, reads_dest)
            use(UNARY_TIR_OPS[str(e.op.name)], dst=slot)
            return
        if isinstance(e, tirx.Max):
            x = e.a if is_scalar(e.b) else e.b
            self._eval(out, inits, x, slot, dest, r, c, reads_dest)
            use("relu", dst=slot)
            return
        if isinstance(e, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div)):
            a, b = strip_cast(e.a), strip_cast(e.b)
            kind = {tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.Div: "div"}[type(e)]
            if is_scalar(b) or is_scalar(a):
                scalar_first = is_scalar(a)
                x, s = (b, a) if scalar_first else (a, b)
                value = float(s.value)
                self._eval(out, inits, x, slot, dest, r, c, reads_dest)
                if scalar_first and kind == "sub":
                    use("rsub_unary_tile", dst=slot, param=float_bits(value))
                elif scalar_first and kind == "div":
                    use("recip", dst=slot)
                    if value != 1.0:
                        use("mul_unary_tile", dst=slot, param=float_bits(value))
                else:
                    use(f"{kind}_unary_tile", dst=slot, param=float_bits(value))
                return
            if (isinstance(a, tirx.BufferLoad) and isinstance(b, tirx.BufferLoad) and kind != "div"
                    and not (dest in (a.buffer.name, b.buffer.name) and reads_dest)):
                ca, cb = self.cbn(a.buffer.name), self.cbn(b.buffer.name)
                self.reconfig_unpack(out, ca, cb)
                use(f"{kind}_tiles", a=ca, b=cb, ia=self._index(a.buffer.name, r, c, dest, reads_dest),
                    ib=self._index(b.buffer.name, r, c, dest, reads_dest), dst=slot)
                return
            if slot + 1 >= self.cap:
                raise TTUnsupportedError(f"expression needs more than {self.cap} DST tiles", construct=str(e),
                                         source=self.source)
            self._eval(out, inits, a, slot, dest, r, c, reads_dest)
            self._eval(out, inits, b, slot + 1, dest, r, c, reads_dest)
            use(f"{kind}_binary_tile", dst=slot, dst2=slot + 1)
            return
        raise TTUnsupportedError(f"cannot evaluate {type(e).__name__} `{e}` on TT tiles", construct=str(e),
                                 source=self.source)

    def _copy_out_of_dst(self, out: Lines, d_name: str, d: dict, expr):
        """The DST-resident accumulator is packed (after an optional unary epilogue) into ``d_name``."""
        f = self.cbs[self.dst_frag]
        n = f["block_tiles"]
        cb_d = self.cbn(d_name)
        chain = []
        e = strip_cast(expr)
        while not isinstance(e, tirx.BufferLoad):
            chain.append(e)
            e = strip_cast(e.args[0] if isinstance(e, tirx.Call) else (e.a if not is_scalar(e.a) else e.b))
        epilogue = Lines(0)
        for node in reversed(chain):
            self._eval_unary_step(epilogue, node)
        if epilogue.lines:
            out.block(f"for (uint32_t i = 0; i < {n}u; ++i)")
            for line in epilogue.lines:
                out(line.strip())
            out.end()
        out("tile_regs_commit();")
        self._pack(out, cb_d, n)

    def _eval_unary_step(self, out: Lines, node):
        if isinstance(node, tirx.Call):
            init, call = self.intr(UNARY_TIR_OPS[str(node.op.name)], dst="i")
        elif isinstance(node, tirx.Max):
            init, call = self.intr("relu", dst="i")
        else:
            a, b = strip_cast(node.a), strip_cast(node.b)
            kind = {tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.Div: "div"}[type(node)]
            scalar_first = is_scalar(a)
            value = float((a if scalar_first else b).value)
            if scalar_first and kind == "div":          # s / x = recip(x) * s
                init, call = self.intr("recip", dst="i")
                out(init + ";")
                out(call + ";")
                if value == 1.0:
                    return
                kind, scalar_first = "mul", False
            name = "rsub_unary_tile" if scalar_first and kind == "sub" else f"{kind}_unary_tile"
            init, call = self.intr(name, dst="i", param=float_bits(value))
        out(init + ";")
        out(call + ";")
