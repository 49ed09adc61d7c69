"""A compiled kernel as a ``torch.library`` custom op, so that ``torch.compile`` graphs can call it.

``kernel.as_torch_op("tt::my_gemm")`` (or ``tilelang_tt.torch_op(kernel, "tt::my_gemm")``) defines the operator
``torch.ops.tt.my_gemm`` from the kernel's parameters:

* the op takes the kernel's parameters without the outputs of ``out_idx``, in order (tensors; float32 scalars as
  ``float``, integer scalars as ``int``) and returns those outputs (one tensor, or a tuple);
* every other parameter the kernel writes (an ``output`` not in ``out_idx``, an ``inout``) is declared mutated
  (``Tensor(a!)``), so functionalization in ``torch.compile`` sees the write;
* the fake (meta) implementation allocates the outputs from the plan's shapes and dtypes; a symbolic dimension
  (``T.dynamic``) takes its size from the input that carries it, so dynamic shapes stay symbolic;
* the real implementation, on CPU tensors, allocates the outputs the same way and runs the kernel (tt-sim, or a
  device where one is present).

The kernel is not differentiable: no backward is registered. Importing this module does not import torch; the
registration does.
"""

from __future__ import annotations

import keyword
import re
import threading

from .device import torch_dtype_name
from .dims import bound_dims, dim_value
from .errors import TTError

_REGISTERED: dict[str, object] = {}    # qualified name -> the op, kept alive (an op's registration dies with it)
_LOCK = threading.Lock()
_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")
_SCALAR_TYPES = {"float32": "float", "int32": "int", "uint32": "int"}


class TTTorchOpError(TTError, ValueError):
    """A kernel that cannot become a torch custom op under that name (taken, malformed, unknowable shape)."""


def torch_op(kernel, name: str):
    """Register ``kernel`` (a ``tilelang.compile(..., target="tt")`` kernel) as the torch custom op ``name``
    ("namespace::op") and return it (a ``torch.library.CustomOpDef``: call it, or ``torch.ops.namespace.op``)."""
    import torch

    match = _NAME.match(name)
    if match is None:
        raise TTTorchOpError(f"{name!r} is not a custom op name", construct="torch_op",
                             fix='name it "namespace::op" with identifiers, e.g. "tt::my_gemm"')
    signature = _Signature(kernel)
    with _LOCK:
        if name in _REGISTERED or _torch_has_op(torch, *match.groups()):
            raise TTTorchOpError(f"a torch op named {name} is already registered", construct="torch_op",
                                 fix=f"choose another name, or call the registered one (torch.ops."
                                     f"{match.group(1)}.{match.group(2)})")
        op = torch.library.custom_op(name, signature.run, mutates_args=signature.mutated, device_types="cpu",
                                     schema=signature.schema)
        op.register_fake(signature.fake)
        _REGISTERED[name] = op
    return op


def _torch_has_op(torch, namespace: str, op: str) -> bool:
    """An op of that name defined by anyone (another library, a custom_op not made here)."""
    try:
        return hasattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return False


class _Signature:
    """The op's schema from the kernel's parameters, and the two implementations that share its shape rule."""

    def __init__(self, kernel):
        self.kernel = kernel
        specs = kernel.adapter.param_specs()
        self.outs = sorted(i % len(specs) for i in (kernel.adapter.result_idx or []))
        self.inputs = [i for i in range(len(specs)) if i not in self.outs]
        self.specs = specs
        self.names = _argument_names([specs[i].name for i in self.inputs])
        args, self.mutated = [], []
        for name, i in zip(self.names, self.inputs):
            spec = specs[i]
            if spec.shape is None:
                args.append(f"{_SCALAR_TYPES.get(spec.dtype, 'float')} {name}")
            elif spec.io in ("output", "inout"):
                args.append(f"Tensor({chr(ord('a') + len(self.mutated))}!) {name}")
                self.mutated.append(name)
            else:
                args.append(f"Tensor {name}")
        returns = {0: "()", 1: "Tensor"}.get(len(self.outs), "(" + ", ".join(["Tensor"] * len(self.outs)) + ")")
        self.schema = f"({', '.join(args)}) -> {returns}"
        self._check_outputs_knowable()

    def _check_outputs_knowable(self) -> None:
        bound = {d for i in self.inputs if self.specs[i].shape for d in self.specs[i].shape if isinstance(d, str)}
        for i in self.outs:
            spec = self.specs[i]
            free = [d for d in spec.shape or [] if isinstance(d, str) and not set(_symbols(d)) <= bound]
            if free:
                raise TTTorchOpError(f"output {spec.name} has dimension {free[0]!r}, which no input's shape gives",
                                     construct="torch_op",
                                     fix="compile without that output in out_idx and pass it to the op (it is then "
                                         "declared mutated)")

    def output_shapes(self, args) -> list[list]:
        """Each output's shape: the plan's, its symbolic dimensions bound from the inputs (ints, or SymInts while
        torch.compile traces)."""
        for value, i in zip(args, self.inputs):
            shape = self.specs[i].shape
            if shape is not None and len(value.shape) != len(shape):
                raise TTError(f"parameter {self.specs[i].name} takes a tensor of rank {len(shape)} ({shape}); got "
                              f"shape {list(value.shape)}", construct="torch op call")
        sizes = bound_dims([self.specs[i].shape for i in self.inputs], args)
        return [[dim_value(d, sizes) for d in self.specs[i].shape] for i in self.outs]

    def _allocate(self, args) -> list:
        """The outputs, empty, on the inputs' device (a fake one while tracing)."""
        import torch

        like = next((a for a in args if isinstance(a, torch.Tensor)), None)
        new = like.new_empty if like is not None else torch.empty
        return [new(shape, dtype=getattr(torch, torch_dtype_name(self.specs[i].dtype)))
                for i, shape in zip(self.outs, self.output_shapes(args))]

    def fake(self, *args):
        return self._pack(self._allocate(args))

    def run(self, *args):
        outputs = self._allocate(args)
        full, it_in, it_out = [], iter(args), iter(outputs)
        for i in range(len(self.specs)):
            full.append(next(it_out) if i in self.outs else next(it_in))
        self.kernel(*full)
        return self._pack(outputs)

    def _pack(self, outputs):
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


_NAME_ONLY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _symbols(expr: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)


def _argument_names(names: list[str]) -> list[str]:
    """Schema argument names: the kernel's, unless one is not an identifier, a keyword or a repeat."""
    out = []
    for k, name in enumerate(names):
        ok = _NAME_ONLY.match(name) and not keyword.iskeyword(name) and name not in out and name != "self"
        out.append(name if ok else f"arg{k}")
    return out
