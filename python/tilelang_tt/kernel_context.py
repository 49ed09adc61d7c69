"""The per-kernel compile context: what the TT program build (``pipeline.build_program``) and the printers
(``codegen.py``) read from a PrimFunc the TIR passes lowered, and the names every identifier reaching C++ gets.

One ``KernelContext`` per compile of one kernel; each candidate the pipeline tries (``pipeline.lower_candidate``)
gets its own, so nothing a trial names leaks into the kernel that is finally generated.
"""

from __future__ import annotations

from tvm import tirx

from . import attrs, records
from .artifact import safe_name
from .device import SCALAR_PARAM_DTYPES, get_device
from .errors import TTUnsupportedError
from .names import NameSupply
from .target import TTOptions
from .transform.common import shape_vars, source_of
from .ttir import CBInfo


class KernelContext:
    """What the TT program build and the printers read from one lowered function: its CBs, tensors and schedule
    arguments, and their C++ names (one NameSupply for the whole kernel)."""

    def __init__(self, func: tirx.PrimFunc, options: TTOptions):
        self.func, self.options = func, options
        self.src = source_of(func)
        self.name = safe_name(str(func.attrs["global_symbol"]))
        self.dev = get_device(options.arch)
        # resolved once by the TIR pipeline (annotation > target option > ttnn default for the data formats); the
        # DST mode by TensorizeTT
        self.compute = records.compute(func)
        self.fp32_acc = bool(self.compute.fp32_dest_acc)
        self.math_fidelity = self.compute.math_fidelity
        self.cbs = records.cbs(func)
        self.names = NameSupply()
        self.tensors = [(i, func.buffer_map[p]) for i, p in enumerate(func.params) if p in func.buffer_map]
        self.tensor_names = {}
        for i, buf in self.tensors:
            t = self.names.fresh(buf.name)
            self.names.used |= {f"{t}_grid", f"{t}_args", f"{t}_addr"}
            self.tensor_names[i] = t
        self.cb_vars = {n: self.names.fresh(f"cb_{n}") for n in sorted(self.cbs, key=lambda n: self.cbs[n].index)}
        self.shape_vars = [self.names.var(v) for v in shape_vars(func)]
        self.rt_names = [str(n) for n in func.attrs[attrs.RUNTIME_ARGS]]
        # scalar kernel parameters (alpha: T.float32): runtime args of every kernel, float32 as its bit pattern
        self.scalars = [(i, self.names.var(p), str(p.dtype)) for i, p in enumerate(func.params)
                        if p not in func.buffer_map and p.name not in self.rt_names]
        for _, v, dtype in self.scalars:
            if dtype not in SCALAR_PARAM_DTYPES:
                raise TTUnsupportedError(
                    f"scalar parameter {v.name} is {dtype}: a runtime argument is one 32-bit word and the cores "
                    f"compute in at most float32", construct=f"{v.name}: T.{dtype}", source=self.src,
                    fix=f"declare it as one of {', '.join(f'T.{d}' for d in SCALAR_PARAM_DTYPES)}")
        self.grid = list(self.dims(func.attrs[attrs.GRID]))   # C++ names: a dimension `n` is `n_t` beside the loop's n
        self.grid_text = "x".join(str(g) if isinstance(g, int) else f"({g})" for g in self.grid)

    def program_cbs(self) -> dict:
        return {n: CBInfo(n, e.index, e.format, e.block_tiles, e.num_pages, tuple(e.shape_tiles),
                          tuple(e.producer), tuple(e.consumer), e.role, page_size=e.page_size,
                          depth=e.depth_blocks, dtype=e.dtype, band=e.band,
                          accumulate=e.accumulate, residency=e.residency,
                          subblock=tuple(e.subblock) if e.subblock is not None else None)
                for n, e in self.cbs.items() if e.residency != "dst"}

    def shape(self, buf):
        """Dimensions as ints, or C++ expressions of the (renamed) symbolic dimensions."""
        return self.dims(buf.shape)

    def shape_vars_of(self, buf) -> set:
        """The C++ names of the symbolic dimensions (T.dynamic) ``buf``'s shape uses, found in its expressions."""
        found: set = set()
        for d in buf.shape:
            if isinstance(d, tirx.PrimExpr) and not isinstance(d, tirx.IntImm):
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(d), lambda n: found.add(n)
                                                   if isinstance(n, tirx.Var) else None)
        twins = {new.name for old, new in self.names.renames().items() if any(old.same_as(v) for v in found)}
        return twins & {v.name for v in self.shape_vars}

    def dims(self, dims):
        renames = self.names.renames()
        return tuple(dim(tirx.stmt_functor.substitute(d, renames) if isinstance(d, tirx.PrimExpr) and
                          not isinstance(d, tirx.IntImm) else d) for d in dims)


def dim(d):
    """A dimension as an int, or as a C++ expression over the symbolic dimensions (T.dynamic)."""
    from tvm import tirx as _t

    if isinstance(d, int):
        return d
    if isinstance(d, _t.IntImm):
        return int(d.value)
    from .cexpr import cexpr

    return cexpr(d)
