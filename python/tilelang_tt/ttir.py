"""The explicit TT program: what each core's reader, compute and writer kernel does, call by call.

LowerToTTProgram builds it from the tile program TensorizeTT leaves; the program passes
(``transform/allocate_dst.py``, ``transform/hoist_inits.py``) rewrite it; ``transform/verify_program.py``
checks it; ``printer.py`` prints it. Every decision (DST slots, CB protocol, init order, liveness) is
visible here, so it can be dumped (``dump``), compared in golden tests and walked by passes.

Nodes
  ``For(var, min, extent, body)``   a counted loop (``var`` a ``tirx.Var``; ``min``/``extent`` PrimExprs)
  ``Let(var, value)``               ``const uint32_t var = value;``
  ``Call(op, args, note)``          one TT-Metalium call; ``op`` is a key of ``intrinsics.CALLS``
Arguments of a call
  ``int`` / ``tirx.PrimExpr``       an index or count (printed by ``cexpr``)
  ``CB(name)``                      a circular buffer, by tile-buffer name (``Program.cbs``)
  ``Dst(slot)``                     a DST tile: ``slot`` is an int (or PrimExpr) after AllocateDST, a
                                    ``VReg`` (a virtual register) before
  ``Tensor(name)``                  a kernel's tensor accessor (reader / writer)
  ``Lit(text)``                     a literal printed as is (float constants, bit patterns, flags)
  ``Scalar(expr, bits)``            a run-time value (``bx * 64 + 32 * r``) as an fp32 bit pattern or a float
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from tvm import tirx


@dataclass(frozen=True)
class CB:
    name: str


@dataclass(frozen=True)
class VReg:
    id: int


@dataclass(frozen=True)
class Dst:
    slot: object            # int | PrimExpr | VReg


@dataclass(frozen=True)
class Tensor:
    name: str


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Scalar:
    """A value known only at run time (``bx * 64 + past_len``, a tile's row offset): ``expr`` (a PrimExpr over
    the kernel's variables) as an fp32 bit pattern (``bits``) or as a float."""
    expr: object
    bits: bool = True
    raw: bool = False       # expr is a uint32 variable already holding fp32 bits (a float32 kernel parameter)


@dataclass
class Call:
    op: str
    args: tuple = ()
    note: str = ""          # the TileLang statement this call implements ("" for protocol calls)


@dataclass
class Let:
    var: tirx.Var
    value: object


@dataclass
class For:
    var: tirx.Var
    min: object
    extent: object
    body: list
    note: str = ""


@dataclass
class Kernel:
    role: str               # reader | compute | writer
    body: list = field(default_factory=list)
    startup: Call | None = None   # compute only: compute_kernel_hw_startup(...)


@dataclass
class CBInfo:
    name: str
    index: int
    fmt: str                # tt::DataFormat name
    block_tiles: int
    num_pages: int
    shape_tiles: tuple
    producer: tuple
    consumer: tuple
    role: str


@dataclass
class Program:
    name: str
    kernels: dict           # role -> Kernel
    cbs: dict               # name -> CBInfo
    dst_capacity: int
    source: str | None = None
    fp32_dest_acc: bool = False
    multicast: dict | None = None   # TTMulticastReuse: {"lattice": [rows, cols], "groups": [...]}, None without


_VREGS = itertools.count()


def vreg() -> Dst:
    return Dst(VReg(next(_VREGS)))


def walk(body):
    """Every node of a body, pre-order, with the stack of enclosing For loops."""
    stack: list = []

    def go(nodes):
        for n in nodes:
            yield n, tuple(stack)
            if isinstance(n, For):
                stack.append(n)
                yield from go(n.body)
                stack.pop()

    yield from go(body)


def calls(body):
    for n, _ in walk(body):
        if isinstance(n, Call):
            yield n


def _arg_text(a) -> str:
    from .cexpr import cexpr

    if isinstance(a, CB):
        return f"cb:{a.name}"
    if isinstance(a, Tensor):
        return f"tensor:{a.name}"
    if isinstance(a, Dst):
        s = a.slot
        return f"dst:%{s.id}" if isinstance(s, VReg) else f"dst:{_arg_text(s)}"
    if isinstance(a, Lit):
        return a.text
    if isinstance(a, bool):
        return str(int(a))
    try:
        return cexpr(a).rstrip("u") if isinstance(a, int) else cexpr(a)
    except Exception:   # noqa: BLE001 - the dump must never fail
        return str(a)


def dump(program: Program) -> str:
    """A readable text form of the whole program (TILELANG_TT_DUMP_IR, golden tests)."""
    lines = [f"# TT program {program.name}: DST {program.dst_capacity} tiles"
             f"{', fp32 accumulation' if program.fp32_dest_acc else ''}"]
    for cb in sorted(program.cbs.values(), key=lambda c: c.index):
        lines.append(f"cb {cb.name} = c_{cb.index} {cb.fmt} {cb.shape_tiles[0]}x{cb.shape_tiles[1]} tiles, "
                     f"{cb.num_pages} pages, {'+'.join(cb.producer)} -> {'+'.join(cb.consumer)}")
    for role in ("reader", "compute", "writer"):
        k = program.kernels[role]
        lines.append(f"kernel {role}:")
        if k.startup is not None:
            lines.append(f"  {_call_text(k.startup)}")
        _dump_body(k.body, lines, 1)
    return "\n".join(lines) + "\n"


def _call_text(c: Call) -> str:
    return f"{c.op}({', '.join(_arg_text(a) for a in c.args)})"


def _dump_body(body, lines, level):
    pad = "  " * level
    for n in body:
        if isinstance(n, For):
            lo = _arg_text(n.min)
            hi = _arg_text(n.extent) if lo == "0" else f"{lo} + {_arg_text(n.extent)}"
            lines.append(f"{pad}for {n.var.name} in [{lo}, {hi}):"
                         + (f"  # {n.note}" if n.note else ""))
            _dump_body(n.body, lines, level + 1)
        elif isinstance(n, Let):
            lines.append(f"{pad}let {n.var.name} = {_arg_text(n.value)}")
        else:
            lines.append(f"{pad}{_call_text(n)}" + (f"  # {n.note}" if n.note else ""))
