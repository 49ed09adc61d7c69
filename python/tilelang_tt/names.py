"""The one name supply: every identifier that reaches generated C++ is handed out here.

User names (loop variables, let-bound values, tensors, tile buffers) become ``[A-Za-z0-9_]`` identifiers,
distinct from each other, from C++ keywords and from the identifiers the generator uses itself
(``artifact.RESERVED``: fixed names in templates and the generated loop variables ``mt``, ``r``, ...).
TIR variables are renamed by object identity, so two user variables both named ``k`` stay distinct.
"""

from __future__ import annotations

from tvm import tirx

from .artifact import RESERVED, safe_name


class NameSupply:
    def __init__(self, reserved=RESERVED):
        self.used: set[str] = set(reserved)
        self._vars: list[tuple[tirx.Var, tirx.Var]] = []
        self._kept: set[str] = set()

    def fresh(self, hint: str) -> str:
        base = safe_name(hint)
        if base in RESERVED:
            base += "_t"
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name

    def var(self, v: tirx.Var) -> tirx.Var:
        """The C++-named twin of a user variable (the same twin every time)."""
        for old, new in self._vars:
            if old.same_as(v):
                return new
        new = tirx.Var(self.fresh(v.name), v.dtype)
        self._vars.append((v, new))
        return new

    def keep(self, v: tirx.Var) -> tirx.Var:
        """A variable the generator made (the persistent loop, the schedule's binds) keeps its reserved name."""
        if v.name not in RESERVED or v.name in self._kept:
            return self.var(v)
        self._kept.add(v.name)
        self._vars.append((v, v))
        return v

    def renames(self) -> dict:
        return {old: new for old, new in self._vars}


def generated(name: str) -> tirx.Var:
    """A loop variable the generator introduces; its name is reserved from user names."""
    assert name in RESERVED, name
    return tirx.Var(name, "int32")
