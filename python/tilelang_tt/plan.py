"""``tt.plan.json``: the versioned description of a compiled kernel, validated against its JSON Schema.

The host program is generated from the plan alone. The schema lives in ``schema/tt.plan.schema.json``
(``docs/tt.plan.schema.json`` is the same file).

Two checks: ``check_invariants`` (cross-field rules and device limits, microseconds) runs on every compile;
``validate`` adds the JSON Schema and runs wherever a plan crosses a trust boundary: loading an artifact or a
package written elsewhere (run_artifact.py, package.py) and, in the test suite, every plan the compiler writes
(tests/conftest.py). The compiler does not import jsonschema on its own path: with its dependencies (referencing,
attrs, the meta-schemas) the import is ~50 ms, a third of a cold elementwise compile.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from .errors import TTPlanError

SCHEMA_VERSION = 1


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("tilelang_tt").joinpath("schema/tt.plan.schema.json").read_text())


@lru_cache(maxsize=1)
def _validator():
    import jsonschema

    # The schema itself is checked against its meta-schema by the tests (test_package.py), not in every process:
    # check_schema costs ~50 ms, a fifth of a cold compile.
    return jsonschema.validators.validator_for(schema())(schema())


def validate(plan: dict) -> None:
    """Raise TTPlanError if ``plan`` violates the schema or its cross-field invariants."""
    import jsonschema

    try:
        _validator().validate(plan)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "<root>"
        raise TTPlanError(f"tt.plan.json is invalid at {where}: {err.message}", construct="tt.plan.json") from None
    check_invariants(plan)


def check_invariants(plan: dict) -> None:
    """Raise TTPlanError if a schema-valid ``plan`` breaks a cross-field rule or a device limit."""
    grid_y, grid_x = plan["grid"]
    if plan["schedule"].get("dynamic"):
        if plan["mapping"] or not (plan.get("shape_args") or plan.get("scalar_args")):
            raise TTPlanError("a dynamic schedule has shape_args or scalar_args and an empty mapping",
                              construct="tt.plan.json")
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
