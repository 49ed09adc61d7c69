"""Plan dimensions: an int, a symbolic dimension's name (T.dynamic), or a C++ expression of names (a folded
view's product, a padded size). One evaluator for the emulator, the runtime's ``out_idx`` allocation and the
torch op's shape function."""

import re

_UNSIGNED = re.compile(r"\b(\d+)u\b")


def dim_value(d, sizes: dict):
    """``d`` with its names bound from ``sizes`` (name -> int, or a torch SymInt while tracing: the value is then
    never made concrete). ``/`` on sizes >= 0 is floor division. Raises NameError naming an unbound dimension."""
    if isinstance(d, int):
        return d
    if d in sizes:
        return sizes[d]
    text = _UNSIGNED.sub(r"\1", d).replace("/", "//")      # C++'s 32u is Python's 32
    return eval(text, {"__builtins__": {}}, dict(sizes))  # noqa: S307 - plan expressions


def bound_dims(shapes, values) -> dict:
    """The symbolic dimensions the given tensors bind: name -> size, the first tensor naming it wins (the call
    checks the rest agree). ``shapes`` are plan shapes (None for a scalar), ``values`` the arguments (None where
    not given)."""
    dims: dict = {}
    for shape, value in zip(shapes, values):
        if value is None or shape is None or not hasattr(value, "shape"):
            continue
        for d, n in zip(shape, tuple(value.shape)):
            if isinstance(d, str) and d.isidentifier():
                dims.setdefault(d, n)
    return dims
