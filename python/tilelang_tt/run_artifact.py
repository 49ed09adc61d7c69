"""``tilelang-tt run ARTIFACT_DIR``: run an artifact directory on tt-sim with inputs from ``.npy`` files.

Inputs come from ``--input NAME=FILE.npy`` (row-major, the logical shape of the plan's buffer NAME; bfloat16
buffers take any float array and round to nearest even) or, for every input not given, from a seeded normal
distribution (``--seed N``). Symbolic dimensions (T.dynamic) come from the given inputs or ``--dim NAME=VALUE``.
``--out DIR`` receives ``NAME.npy`` for every output (bfloat16 as float32), ``inputs/NAME.npy`` for every input
used, and ``report.json`` (the emulator's counters, the inputs' sources, and on failure the error).

Exit status: 0 when the run passes; 1 when the emulator's sanitizer stops it (its message on stderr); 2 when
the artifact or an input is unusable (missing file, wrong shape, unknown name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import TTError

# TT format -> NumPy dtype of the .npy files written and of random inputs
_HOST_DTYPE = {"Float16_b": np.float32, "Float32": np.float32, "Float16": np.float16}
STRICT_ENV = "TT_SIM_STRICT"


class RunInputError(TTError):
    """An input or the artifact cannot be used for a run (exit status 2)."""


@dataclass
class Outcome:
    status: int
    report: dict


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise RunInputError(f"{what} {item!r} is not NAME=VALUE", construct="tilelang-tt run")
        if name in out:
            raise RunInputError(f"{what} {name} is given twice", construct="tilelang-tt run")
        out[name] = value
    return out


def load_plan(artifact: Path) -> dict:
    from .plan import validate

    path = Path(artifact) / "tt.plan.json"
    if not path.is_file():
        raise RunInputError(f"{artifact} has no tt.plan.json", construct="tilelang-tt run",
                            fix="pass a directory written by tilelang.compile(..., target='tt') or `tilelang-tt compile`")
    try:
        plan = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RunInputError(f"{path} is not JSON: {err}", construct="tilelang-tt run") from None
    validate(plan)
    return plan


def _load_npy(name: str, file: str) -> np.ndarray:
    path = Path(file)
    if not path.is_file():
        raise RunInputError(f"input {name}: {path} does not exist", construct="tilelang-tt run")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:
        raise RunInputError(f"input {name}: {path} is not a .npy array ({str(err).split('.')[0]})",
                            construct="tilelang-tt run") from None
    if not isinstance(array, np.ndarray) or not (np.issubdtype(array.dtype, np.floating)
                                                 or np.issubdtype(array.dtype, np.integer)):
        raise RunInputError(f"input {name}: {path} holds {getattr(array, 'dtype', type(array))}, not a real-valued "
                            "array", construct="tilelang-tt run")
    return array


def prepare_scalars(plan: dict, scalars: dict[str, str]) -> dict[int, float | int]:
    """The scalar kernel parameters (``--scalar NAME=VALUE``) by parameter index."""
    out = {}
    for a in plan.get("scalar_args", []):
        if a["name"] not in scalars:
            raise RunInputError(f"no value for the scalar parameter {a['name']} ({a['dtype']})",
                                construct="tilelang-tt run", fix=f"pass --scalar {a['name']}=VALUE")
        try:
            out[a["param_index"]] = (float if a["dtype"].startswith("float") else int)(scalars[a["name"]])
        except ValueError:
            raise RunInputError(f"--scalar {a['name']}={scalars[a['name']]} is not a {a['dtype']}",
                                construct="tilelang-tt run") from None
    return out


def prepare_inputs(plan: dict, files: dict[str, str], seed: int | None, dims: dict[str, str]):
    """(tensors by parameter index, where each input came from, the arrays of the inputs)."""
    buffers = {b["name"]: b for b in plan["buffers"]}
    for name in files:
        if name not in buffers:
            raise RunInputError(f"--input {name}: the kernel has no tensor {name} (it has {', '.join(buffers)})",
                                construct="tilelang-tt run")
        if buffers[name]["io"] == "output":
            raise RunInputError(f"--input {name}: {name} is an output of the kernel, not an input",
                                construct="tilelang-tt run")
    try:
        sizes = {k: int(v) for k, v in dims.items()}
    except ValueError:
        raise RunInputError(f"--dim values must be integers, got {dims}", construct="tilelang-tt run") from None
    loaded = {name: _load_npy(name, file) for name, file in files.items()}
    for name, array in loaded.items():      # symbolic dimensions bound by the given inputs
        want = buffers[name]["shape"]
        if array.ndim != len(want):
            raise RunInputError(f"input {name}: {files[name]} has shape {list(array.shape)}, the artifact was compiled "
                                f"for {want}", construct="tilelang-tt run")
        for w, got in zip(want, array.shape):
            if isinstance(w, str) and sizes.setdefault(w, int(got)) != got:
                raise RunInputError(f"input {name}: {w}={got}, but {w}={sizes[w]} elsewhere",
                                    construct="tilelang-tt run")
    rng = np.random.default_rng(seed)
    tensors, sources, used = {}, {}, {}
    for buf in plan["buffers"]:
        name, fmt = buf["name"], buf["format"]
        if fmt not in _HOST_DTYPE:
            raise RunInputError(f"tensor {name} has format {fmt}, which `tilelang-tt run` cannot read or write",
                                construct="tilelang-tt run")
        missing = [d for d in buf["shape"] if isinstance(d, str) and d not in sizes]
        if missing:
            raise RunInputError(f"tensor {name} has symbolic dimensions {missing} that no input fixes",
                                construct="tilelang-tt run", fix=f"pass --dim {missing[0]}=VALUE or that input")
        shape = tuple(sizes[d] if isinstance(d, str) else int(d) for d in buf["shape"])
        if name in loaded:
            array = loaded[name]
            if tuple(array.shape) != shape:
                raise RunInputError(f"input {name}: {files[name]} has shape {list(array.shape)}, the artifact was "
                                    f"compiled for {list(shape)}", construct="tilelang-tt run")
            sources[name] = str(Path(files[name]).resolve())
        elif buf["io"] == "output":
            array = np.zeros(shape, dtype=_HOST_DTYPE[fmt])
        elif seed is None:
            raise RunInputError(f"no input for {name}", construct="tilelang-tt run",
                                fix=f"pass --input {name}=FILE.npy, or --seed N for seeded random inputs")
        else:
            array = rng.standard_normal(shape, dtype=np.float32)
            sources[name] = f"random normal, seed {seed}"
        host = np.array(array, dtype=_HOST_DTYPE[fmt], copy=True)
        tensors[buf["param_index"]] = host
        if buf["io"] != "output":
            used[name] = host.copy()
    return tensors, sources, used


def run_artifact(artifact: Path, out: Path, files: dict[str, str], seed: int | None = None,
                 dims: dict[str, str] | None = None, strict: bool = True,
                 scalars: dict[str, str] | None = None) -> Outcome:
    """Run ``artifact`` on tt-sim and write outputs, inputs and ``report.json`` into ``out``."""
    import os

    from . import emulator

    artifact = Path(artifact).resolve()   # the host program runs with the artifact as its working directory
    plan = load_plan(artifact)
    tensors, sources, used = prepare_inputs(plan, files, seed, dims or {})
    tensors.update(prepare_scalars(plan, scalars or {}))
    out = Path(out)
    (out / "inputs").mkdir(parents=True, exist_ok=True)
    for name, array in used.items():
        np.save(out / "inputs" / f"{name}.npy", array)
    record = {"artifact": str(artifact.resolve()), "kernel": plan["kernel"], "arch": plan["device"]["arch"],
              "strict": strict, "seed": seed, "inputs": sources}
    previous = os.environ.get(STRICT_ENV)
    os.environ[STRICT_ENV] = "1" if strict else "0"
    try:
        result = emulator.run(artifact, plan, tensors, backend="sim")
    except emulator.TTSimError as err:
        record.update(ok=False, error=str(err))
        (out / "report.json").write_text(json.dumps(record, indent=2) + "\n")
        return Outcome(1, record)
    finally:
        if previous is None:
            os.environ.pop(STRICT_ENV, None)
        else:
            os.environ[STRICT_ENV] = previous
    outputs = {}
    for buf in plan["buffers"]:
        if buf["io"] in ("output", "inout"):
            np.save(out / f"{buf['name']}.npy", tensors[buf["param_index"]])
            outputs[buf["name"]] = str((out / f"{buf['name']}.npy").resolve())
    record.update(ok=True, outputs=outputs, report=result.report)
    (out / "report.json").write_text(json.dumps(record, indent=2) + "\n")
    return Outcome(0, record)
