"""The explicit TT program: what each core's reader, compute and writer kernel does, call by call.

LowerToTTProgram builds it from the tile program TensorizeTT leaves; the program passes
(``transform/allocate_dst.py``, ``transform/hoist_inits.py``) rewrite it; ``transform/verify_program.py``
checks it; ``printer.py`` prints it. Every decision (DST slots, CB protocol, init order, liveness) is
visible here, so it can be dumped (``dump``), compared in golden tests and walked by passes.

Nodes
  ``For(var, min, extent, body)``   a counted loop (``var`` a ``tirx.Var``; ``min``/``extent`` PrimExprs;
                                    ``persistent`` marks the loop over the core's blocks; ``guard``, a block-level
                                    ``if``: a loop of ``guard ? 1 : 0`` trips, printed as an if; ``branch``, for
                                    the guard on a core's multicast role: (group, sender?))
  ``Let(var, value)``               ``const uint32_t var = value;``
  ``Call(op, args, note, origin)``  one TT-Metalium call; ``op`` is a key of ``intrinsics.CALLS``; ``origin``
                                    the tile operation it lowers (``matmul``, ``reduce``, ``eltwise``, ...)
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

from tvm import tirx


class _Node:
    """Field-wise ``__init__``-set attributes, ``__eq__`` and ``__repr__``: what ``@dataclass`` generates, written
    out once here, because dataclass compiles every generated method from source when the module loads (~0.5 ms
    per class, 6 ms of each process's first compile)."""

    _fields: tuple = ()
    __hash__ = None       # mutable: compared by value, never a dict key

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other):
        return other.__class__ is self.__class__ and self._values() == other._values()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"


class _Value(_Node):
    """An immutable call argument: equal and hashed by class and fields."""

    __slots__ = ()

    def __init__(self, *values):
        for f, v in zip(self._fields, values, strict=True):
            object.__setattr__(self, f, v)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __hash__(self):
        return hash((self.__class__, self._values()))


class CB(_Value):
    __slots__ = _fields = ("name",)

    def __init__(self, name: str):
        super().__init__(name)


class VReg(_Value):
    __slots__ = _fields = ("id",)

    def __init__(self, id: int):   # noqa: A002 - the field's name
        super().__init__(id)


class Dst(_Value):
    __slots__ = _fields = ("slot",)

    def __init__(self, slot):      # int | PrimExpr | VReg
        super().__init__(slot)


class Tensor(_Value):
    __slots__ = _fields = ("name",)

    def __init__(self, name: str):
        super().__init__(name)


class Lit(_Value):
    __slots__ = _fields = ("text",)

    def __init__(self, text: str):
        super().__init__(text)


class Scalar(_Value):
    """A value known only at run time (``bx * 64 + past_len``, a tile's row offset): ``expr`` (a PrimExpr over
    the kernel's variables) as an fp32 bit pattern (``bits``) or as a float."""
    __slots__ = _fields = ("expr", "bits", "raw")

    def __init__(self, expr, bits: bool = True, raw: bool = False):
        # raw: expr is a uint32 variable already holding fp32 bits (a float32 kernel parameter)
        super().__init__(expr, bits, raw)


class Call(_Node):
    _fields = ("op", "args", "note", "origin")

    def __init__(self, op: str, args: tuple = (), note: str = "", origin: str = ""):
        self.op, self.args = op, args
        self.note = note    # the TileLang statement this call implements ("" for protocol calls): comments only
        self.origin = origin    # the tile operation it lowers (a LowerToTTProgram kind: "matmul", "reduce", ...)


class Let(_Node):
    _fields = ("var", "value")

    def __init__(self, var: tirx.Var, value):
        self.var, self.value = var, value


class For(_Node):
    _fields = ("var", "min", "extent", "body", "note", "persistent", "guard", "branch")

    def __init__(self, var: tirx.Var, min, extent, body: list, note: str = "", persistent: bool = False,  # noqa: A002
                 guard=None, branch: tuple | None = None):
        self.var, self.min, self.extent, self.body, self.note = var, min, extent, body, note
        self.persistent = persistent    # the loop over this core's blocks (GridToPersistentTT's, tt.persistent_loop)
        # a block-level `if`: the condition (a PrimExpr) of a loop of `guard ? 1 : 0` trips, printed as an if
        self.guard = guard
        # TTMulticastReuse: this guard is the core's role in multicast group ``branch[0]``, the sender's branch when
        # ``branch[1]`` (what the verifier checks the handshake of), else None
        self.branch = branch

    def rebuilt(self, body: list, min=None, extent=None) -> "For":  # noqa: A002
        """This loop with another body (and bounds): what a pass that rewrites a body returns, flags kept."""
        return For(self.var, self.min if min is None else min, self.extent if extent is None else extent, body,
                   self.note, self.persistent, self.guard, self.branch)


class Kernel(_Node):
    _fields = ("role", "body", "startup")

    def __init__(self, role: str, body: list | None = None, startup: Call | None = None):
        self.role = role                                 # reader | compute | writer
        self.body = [] if body is None else body
        self.startup = startup                           # compute only: compute_kernel_hw_startup(...)


class CBInfo(_Node):
    """One circular buffer: everything the host program, the plan and the verifier need of it."""
    _fields = ("name", "index", "fmt", "block_tiles", "num_pages", "shape_tiles", "producer", "consumer", "role",
               "page_size", "depth", "dtype", "band", "accumulate", "residency", "subblock")

    def __init__(self, name: str, index: int, fmt: str, block_tiles: int, num_pages: int, shape_tiles: tuple,
                 producer: tuple, consumer: tuple, role: str, page_size: int = 0, depth: int = 1, dtype: str = "",
                 band: dict | None = None, accumulate: str | None = None, residency: str | None = None,
                 subblock: tuple | None = None):
        self.name, self.index = name, index
        self.fmt = fmt                                   # tt::DataFormat name
        self.block_tiles, self.num_pages, self.shape_tiles = block_tiles, num_pages, shape_tiles
        self.producer, self.consumer, self.role = producer, consumer, role
        self.page_size = page_size                       # bytes of one tile page in this format
        self.depth = depth                               # blocks the CB holds (2: double-buffered)
        self.dtype = dtype                               # the TileLang buffer's dtype
        self.band = band             # StreamBandsTT: {"pages", "depth"}: streamed in bands of a K loop, else None
        self.accumulate = accumulate     # how a CB-resident accumulator accumulates ("packer_l1", ...), else None
        self.residency = residency       # where an accumulator lives between its updates, with its DST subblock
        self.subblock = subblock

    @property
    def bytes(self) -> int:
        """The L1 the CB takes."""
        return self.num_pages * self.page_size


class Program(_Node):
    _fields = ("name", "kernels", "cbs", "dst_capacity", "source", "fp32_dest_acc", "multicast", "interface")

    def __init__(self, name: str, kernels: dict, cbs: dict, dst_capacity: int, source: str | None = None,
                 fp32_dest_acc: bool = False, multicast: dict | None = None, interface: dict | None = None):
        self.name = name
        self.kernels = kernels                           # role -> Kernel
        self.cbs = cbs                                   # name -> CBInfo
        self.dst_capacity, self.source, self.fp32_dest_acc = dst_capacity, source, fp32_dest_acc
        self.multicast = multicast    # TTMulticastReuse: {"lattice": [rows, cols], "groups": [...]}, None without
        # the tensors each data-movement kernel addresses and every kernel's runtime arguments, in order
        # (program_interface.py; recorded by pipeline.build_program after the program passes)
        self.interface = interface


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
        if isinstance(n, For) and n.guard is not None:
            lines.append(f"{pad}if {_arg_text(n.guard)}:" + (f"  # {n.note}" if n.note else ""))
            _dump_body(n.body, lines, level + 1)
        elif isinstance(n, For):
            lo = _arg_text(n.min)
            hi = _arg_text(n.extent) if lo == "0" else f"{lo} + {_arg_text(n.extent)}"
            lines.append(f"{pad}for {n.var.name} in [{lo}, {hi}):"
                         + (f"  # {n.note}" if n.note else ""))
            _dump_body(n.body, lines, level + 1)
        elif isinstance(n, Let):
            lines.append(f"{pad}let {n.var.name} = {_arg_text(n.value)}")
        else:
            lines.append(f"{pad}{_call_text(n)}" + (f"  # {n.note}" if n.note else ""))
