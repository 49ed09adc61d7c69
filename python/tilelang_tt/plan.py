"""``tt.plan.json``: the versioned description of a compiled kernel, validated against its JSON Schema.

The host program is generated from the plan alone. The schema lives in ``schema/tt.plan.schema.json``
(``docs/tt.plan.schema.json`` is the same file).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import jsonschema

from .errors import TTPlanError

SCHEMA_VERSION = 1


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("tilelang_tt").joinpath("schema/tt.plan.schema.json").read_text())


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    # The schema itself is checked against its meta-schema by the tests (test_package.py), not in every process:
    # check_schema costs ~50 ms, a fifth of a cold compile.
    return jsonschema.validators.validator_for(schema())(schema())


def validate(plan: dict) -> None:
    """Raise TTPlanError if ``plan`` violates the schema or its cross-field invariants."""
    try:
        _validator().validate(plan)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "<root>"
        raise TTPlanError(f"tt.plan.json is invalid at {where}: {err.message}", construct="tt.plan.json") from None
    grid_y, grid_x = plan["grid"]
    if plan["schedule"].get("dynamic"):
        if plan["mapping"] or not plan.get("shape_args"):
            raise TTPlanError("a dynamic schedule has shape_args and an empty mapping", construct="tt.plan.json")
    else:
        assigned = sum(m["count"] for m in plan["mapping"])
        if not isinstance(grid_y, int) or not isinstance(grid_x, int) or assigned != grid_y * grid_x:
            raise TTPlanError(f"mapping assigns {assigned} blocks, the grid has {grid_y} x {grid_x}",
                              construct="tt.plan.json")
    indices = [cb["index"] for cb in plan["cbs"]]
    if len(set(indices)) != len(indices) or any(i >= plan["device"]["num_cbs"] for i in indices):
        raise TTPlanError(f"CB indices {indices} collide or exceed the device's {plan['device']['num_cbs']}",
                          construct="tt.plan.json")
    for role, kernel in plan["kernels"].items():
        n = len(kernel["runtime_args"]["layout"])
        if n > 341:
            raise TTPlanError(f"{role} has {n} runtime args (limit 341)", construct="tt.plan.json")


def dumps(plan: dict) -> str:
    return json.dumps(plan, indent=2, sort_keys=False) + "\n"
