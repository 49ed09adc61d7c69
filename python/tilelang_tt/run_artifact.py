"""``tilelang-tt run ARTIFACT_DIR``: run an artifact directory on tt-sim with inputs from ``.npy`` files.

Inputs come from ``--input NAME=FILE.npy`` (row-major, the logical shape of the plan's buffer NAME) or, for every
input not given, from seeded random values (``--seed N``). What a tensor takes follows its plan entry: float
tensors take any real array (bfloat16: rounded to nearest even; Bfp8_b / Bfp4_b: rounded to the block-float
format by tt-metal's host conversion) and random normal values; int8 weights and packed sub-byte weights
(``host_unpack``: the packed tensor of the packed shape, unpacked by the host) take exactly the integer dtype the
plan names and random uniform values of it. Symbolic dimensions (T.dynamic) come from the given inputs or
``--dim NAME=VALUE``. ``--out DIR`` receives ``NAME.npy`` for every output (bfloat16 and block-float as float32),
``inputs/NAME.npy`` for every input used, and ``report.json`` (the emulator's counters, the inputs' sources, and
on failure the error).

Exit status: 0 when the run passes; 1 when the emulator's sanitizer stops it (its message on stderr); 2 when
the artifact, an input or ``--out`` is unusable (missing, empty or unreadable file, wrong shape or dtype, unknown
name, a negative seed, a dimension below 1, ``--out`` naming a file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .device import BFP_INT_RANGE, FLOAT8_DTYPES, FORMATS, TILE_FORMATS
from .errors import TTError

# TT format -> NumPy dtype of the .npy files written and of random inputs: a float format, the NumPy float of its
# TileLang dtype (float32 where NumPy has none: bfloat16); a block-float format, float32 (inputs are rounded into
# it on the way in, outputs decoded); an integer format (UInt8), the integer dtype itself.
_HOST_DTYPE = {f.name: np.dtype(getattr(np, dtype, np.float32)) for dtype, f in FORMATS.items()
               if f.kind in ("float", "int")}
_HOST_DTYPE.update({name: np.dtype(np.float32) for name, f in TILE_FORMATS.items() if f.kind == "bfp"})
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
        what = "does not exist" if not path.exists() else "is not a regular file"
        raise RunInputError(f"input {name}: {path} {what}", construct="tilelang-tt run")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise RunInputError(f"input {name}: {path} is not a .npy array ({str(err).split('.')[0] or 'empty file'})",
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
            out[a["param_index"]] = (float if "float" in a["dtype"] else int)(scalars[a["name"]])
        except ValueError:
            raise RunInputError(f"--scalar {a['name']}={scalars[a['name']]} is not a {a['dtype']}",
                                construct="tilelang-tt run") from None
    return out


@dataclass(frozen=True)
class HostTensor:
    """The tensor the caller passes for a plan buffer."""
    shape: list              # plan dimensions (ints or symbolic names)
    dtype: np.dtype          # NumPy dtype of the .npy files and random values
    packed: dict | None      # the plan's host_unpack: the caller passes the packed weights

    @property
    def integer(self) -> bool:
        """The caller's integers are used bit for bit: a file must hold exactly this dtype."""
        return np.issubdtype(self.dtype, np.integer)

    def value_range(self, fmt: str) -> tuple[int, int]:
        """The integers a random input draws from: the dtype's, except int8 weights stored in a block-float format,
        which hold ``device.BFP_INT_RANGE`` (the runtime refuses others, emulator.to_block_float)."""
        if self.packed is None and TILE_FORMATS[fmt].kind == "bfp":
            return BFP_INT_RANGE
        info = np.iinfo(self.dtype)
        return int(info.min), int(info.max)

    def wants(self, buf: dict, shape) -> str:
        """What the artifact wants, for errors about an integer tensor."""
        if self.packed:
            p = self.packed
            return (f"the packed {self.dtype} tensor {list(shape)} ({p['factor']} values per byte along axis "
                    f"{p['axis']}, unpacked by the host into the int8 weights {buf['shape']})")
        return f"{self.dtype} {list(shape)} (stored as {buf['format']})"


def host_tensor(buf: dict) -> HostTensor:
    """What ``tilelang-tt run`` reads and writes for plan buffer ``buf``: packed sub-byte weights (``host_unpack``)
    as the packed tensor, everything else in its dtype where NumPy has it, else in its format's ``_HOST_DTYPE``."""
    if "host_unpack" in buf:
        spec = buf["host_unpack"]
        return HostTensor(spec["shape"], np.dtype(spec["dtype"]), spec)
    if buf["format"] not in _HOST_DTYPE:
        raise RunInputError(f"tensor {buf['name']} has format {buf['format']}, which `tilelang-tt run` cannot read "
                            "or write", construct="tilelang-tt run")
    if buf["dtype"] in FLOAT8_DTYPES:
        raise RunInputError(f"tensor {buf['name']} is {buf['dtype']}, which NumPy (.npy files) cannot hold",
                            construct="tilelang-tt run",
                            fix="call the kernel from Python with torch float8 tensors (kernel(*tensors))")
    # the tensor's own dtype where NumPy has one (float16 results kept in Float32 pages are rounded as they are
    # stored; int8 weights stay int8), else its format's (bfloat16 and block-float tensors as float32)
    own = getattr(np, buf["dtype"], None)
    return HostTensor(buf["shape"], np.dtype(own) if own is not None else _HOST_DTYPE[buf["format"]], None)


def _wrong_shape(name: str, file: str, array: np.ndarray, host: HostTensor, buf: dict, shape: list) -> RunInputError:
    if not host.packed:
        return RunInputError(f"input {name}: {file} has shape {list(array.shape)}, the artifact was compiled for "
                             f"{shape}", construct="tilelang-tt run")
    unpacked = list(array.shape) == buf["shape"]
    return RunInputError(f"input {name}: {file} has shape {list(array.shape)}, the artifact wants "
                         f"{host.wants(buf, shape)}", construct="tilelang-tt run",
                         fix="pass the packed tensor, not the unpacked weights" if unpacked else
                             f"pass the packed weights: a {shape} array of {host.dtype}")


def _dims(plan: dict, dims: dict[str, str]) -> dict[str, int]:
    """``--dim NAME=VALUE`` as integers, for the kernel's symbolic dimensions only."""
    known = sorted({d for b in plan["buffers"] for d in host_tensor(b).shape if isinstance(d, str)})
    for name in dims:
        if name not in known:
            raise RunInputError(f"--dim {name}: the kernel has no symbolic dimension {name} "
                                f"({'it has ' + ', '.join(known) if known else 'its shapes are static'})",
                                construct="tilelang-tt run")
    try:
        return {k: int(v) for k, v in dims.items()}
    except ValueError:
        raise RunInputError(f"--dim values must be integers, got {dims}", construct="tilelang-tt run") from None


def _check_seed(seed) -> None:
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0):
        raise RunInputError(f"--seed {seed!r} is not an integer >= 0", construct="tilelang-tt run",
                            fix="pass a seed in [0, 2**63)")


def _check_sizes(sizes: dict[str, int]) -> None:
    small = {k: v for k, v in sizes.items() if v < 1}
    if small:
        raise RunInputError(f"symbolic dimension {', '.join(f'{k}={v}' for k, v in small.items())} is below 1",
                            construct="tilelang-tt run", fix="every dimension must be at least 1")


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
    sizes = _dims(plan, dims)
    _check_seed(seed)
    hosts = {name: host_tensor(buf) for name, buf in buffers.items()}
    loaded = {name: _load_npy(name, file) for name, file in files.items()}
    for name, array in loaded.items():      # dtypes; symbolic dimensions bound by the given inputs
        host, want = hosts[name], hosts[name].shape
        if host.integer and array.dtype != host.dtype:
            raise RunInputError(f"input {name}: {files[name]} holds {array.dtype}, the artifact wants "
                                f"{host.wants(buffers[name], want)}", construct="tilelang-tt run",
                                fix=f"save the tensor as {host.dtype}: np.save(FILE, x.astype(np.{host.dtype}))")
        if array.ndim != len(want):
            raise _wrong_shape(name, files[name], array, host, buffers[name], want)
        for w, got in zip(want, array.shape):
            if isinstance(w, str) and sizes.setdefault(w, int(got)) != got:
                raise RunInputError(f"input {name}: {w}={got}, but {w}={sizes[w]} elsewhere",
                                    construct="tilelang-tt run")
    _check_sizes(sizes)
    rng = np.random.default_rng(seed)
    tensors, sources, used = {}, {}, {}
    for buf in plan["buffers"]:
        name, host = buf["name"], hosts[buf["name"]]
        missing = [d for d in host.shape if isinstance(d, str) and d not in sizes]
        if missing:
            raise RunInputError(f"tensor {name} has symbolic dimensions {missing} that no input fixes",
                                construct="tilelang-tt run", fix=f"pass --dim {missing[0]}=VALUE or that input")
        shape = tuple(sizes[d] if isinstance(d, str) else int(d) for d in host.shape)
        if name in loaded:
            array = loaded[name]
            if tuple(array.shape) != shape:
                raise _wrong_shape(name, files[name], array, host, buf, list(shape))
            sources[name] = str(Path(files[name]).resolve())
        elif buf["io"] == "output":
            array = np.zeros(shape, dtype=host.dtype)
        elif seed is None:
            raise RunInputError(f"no input for {name}", construct="tilelang-tt run",
                                fix=f"pass --input {name}=FILE.npy, or --seed N for seeded random inputs")
        elif host.integer:
            lo, hi = host.value_range(buf["format"])
            array = rng.integers(lo, hi, size=shape, dtype=host.dtype, endpoint=True)
            sources[name] = f"random uniform {host.dtype} in [{lo}, {hi}], seed {seed}"
        else:
            array = rng.standard_normal(shape, dtype=np.float32)
            sources[name] = f"random normal, seed {seed}"
        array = np.array(array, dtype=host.dtype, copy=True)
        tensors[buf["param_index"]] = array
        if buf["io"] != "output":
            used[name] = array.copy()
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
    if out.exists() and not out.is_dir():
        raise RunInputError(f"--out {out} is a file, not a directory", construct="tilelang-tt run",
                            fix="pass a directory for the outputs and report.json")
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
