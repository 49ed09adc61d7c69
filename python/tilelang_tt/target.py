"""The ``tt`` target: spellings, options and the TVM Target that carries them.

TileLang 0.1.15's TVM has no ``tt`` target kind and rejects unknown attributes on the kinds it has, so
``tt`` targets are ``ext_dev`` targets whose ``keys`` are ``["tt", <arch>, "opt:<name>=<value>", ...]``.
Accepted spellings: ``"tt"``, ``"tt -arch=blackhole -max_cores=16 -compile_only"``, and
``{"kind": "tt", "arch": "blackhole", "max_cores": 16, "compile_only": True}``. ``-mesh=RxC`` (dict form: ``"mesh": "1x2"``
or ``[1, 2]``) runs the kernel on a mesh of R x C chips (n300 1x2, T3000 2x4, Galaxy 4x8; MeshSplitTT).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import tvm_ffi
from tvm.target import Target

from .device import DEFAULT_ARCH, DEVICES, DeviceProfile, get_device
from .errors import TTTargetError

_OPT_PREFIX = "opt:"
MATH_FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")


@dataclass(frozen=True)
class TTOptions:
    """Everything a ``tt`` target can say. Defaults make kernels "just work"."""

    arch: str = DEFAULT_ARCH
    max_cores: int | None = None          # restrict the grid, like ttnn.jit's max_grid
    compile_only: bool = False            # dry run: emit the artifact, never execute
    tensorize: bool = True                # False: fail clearly instead of tensorizing (debug)
    math_fidelity: str | None = None      # None: ttnn's default for the kernel's data formats (compute_config.py)
    fp32_dest_acc: bool | None = None     # None: on when the compute kernel touches a float32 CB
    multicast: bool | None = None         # T.annotate_tt_schedule(multicast=...) for kernels that do not say
    packer_l1_acc: bool | None = None     # None/True: CB-resident accumulators accumulate in the packer; False: reload
    allow_tf32: bool | None = None        # True: float32 reductions / elementwise on the FPU (TF32 operands, faster)
    allow_fp16_reduced: bool | None = None   # True: T.gemm multiplies 10 of a float16 in1's 11 bits (one matmul)
    mesh: tuple[int, int] | None = None   # (rows, cols) of chips: one kernel split over a mesh (MeshSplitTT)
    extra: dict = field(default_factory=dict)

    @property
    def device(self) -> DeviceProfile:
        return get_device(self.arch)

    def core_limit(self) -> int:
        n = self.device.num_cores
        return n if self.max_cores is None else min(n, self.max_cores)

    @property
    def num_chips(self) -> int:
        return 1 if self.mesh is None else self.mesh[0] * self.mesh[1]

    def as_dict(self) -> dict:
        out = {"arch": self.arch, "max_cores": self.max_cores, "compile_only": self.compile_only,
               "tensorize": self.tensorize, "math_fidelity": self.math_fidelity, "fp32_dest_acc": self.fp32_dest_acc,
               "multicast": self.multicast, "packer_l1_acc": self.packer_l1_acc, "allow_tf32": self.allow_tf32}
        if self.allow_fp16_reduced is not None:   # absent by default: default targets keep their cache keys
            out["allow_fp16_reduced"] = self.allow_fp16_reduced
        if self.mesh is not None:     # absent on one chip: a one-chip target (its cache keys, its IR) is unchanged
            out["mesh"] = mesh_text(self.mesh)
        return out


MAX_MESH_CHIPS = 32     # Galaxy: 4x8 Wormhole chips (PERF_ANCHORS.md section 1)


def mesh_text(mesh: tuple[int, int]) -> str:
    return f"{mesh[0]}x{mesh[1]}"


def parse_mesh(value) -> tuple[int, int]:
    """``"2x4"``, ``[2, 4]`` or ``(2, 4)`` -> (rows, cols) of chips; a TTTargetError for anything else."""
    fix = 'write the mesh as rows x cols of chips: "1x2" (n300), "2x4" (T3000), "4x8" (Galaxy), or [2, 4]'
    if isinstance(value, str):
        parts = value.lower().split("x")
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        parts = []
    try:
        dims = tuple(int(p) for p in parts if not isinstance(p, bool))
    except (TypeError, ValueError):
        dims = ()
    if len(dims) != 2 or len(parts) != 2 or min(dims) < 1:
        raise TTTargetError(f"mesh={value!r} is not a mesh shape", construct="target option 'mesh'", fix=fix)
    if dims[0] * dims[1] > MAX_MESH_CHIPS:
        raise TTTargetError(f"mesh={value!r} has {dims[0] * dims[1]} chips, more than the {MAX_MESH_CHIPS} of the "
                            "largest Tenstorrent mesh (Galaxy, 4x8)", construct="target option 'mesh'", fix=fix)
    return dims


_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off"}


def _coerce(name: str, value) -> object:
    if name == "arch":
        value = str(value)
        if value not in DEVICES:
            raise TTTargetError(f"unknown arch {value!r}", construct="target option 'arch'",
                                fix=f"use one of {sorted(DEVICES)}")
        return value
    if name == "max_cores":
        try:
            n = int(value)
        except (TypeError, ValueError):
            n = None
        if n is None or n <= 0 or isinstance(value, bool):
            raise TTTargetError(f"max_cores must be a positive integer, got {value!r}",
                                construct="target option 'max_cores'", fix="e.g. max_cores=16")
        return n
    if name in ("compile_only", "tensorize", "fp32_dest_acc", "multicast", "packer_l1_acc", "allow_tf32",
                "allow_fp16_reduced"):
        if isinstance(value, bool):
            return value
        text = str(value).lower()
        if text in _BOOL_TRUE:
            return True
        if text in _BOOL_FALSE:
            return False
        raise TTTargetError(f"{name} must be a boolean, got {value!r}", construct=f"target option '{name}'")
    if name == "mesh":
        return parse_mesh(value)
    if name == "math_fidelity":
        if value not in MATH_FIDELITIES:
            raise TTTargetError(f"unknown math fidelity {value!r}", construct="target option 'math_fidelity'",
                                fix=f"use one of {list(MATH_FIDELITIES)}")
        return value
    raise TTTargetError(f"unknown option {name!r}", construct="tt target",
                        fix="options are arch, max_cores, compile_only, tensorize, math_fidelity, fp32_dest_acc, "
                            "multicast, packer_l1_acc, allow_tf32, allow_fp16_reduced, mesh")


def make_options(**kwargs) -> TTOptions:
    values = {name: _coerce(name, v) for name, v in kwargs.items() if v is not None}
    options = TTOptions(**values)
    if options.max_cores is not None and options.max_cores > options.device.num_cores:
        raise TTTargetError(f"max_cores={options.max_cores} exceeds the {options.device.num_cores} cores of "
                            f"{options.arch} ({options.device.grid_y}x{options.device.grid_x})",
                            construct="target option 'max_cores'",
                            fix=f"use max_cores <= {options.device.num_cores} or omit it")
    return options


def _parse_cli(text: str) -> dict | None:
    """Parse ``"tt -arch=X -max_cores=N -compile_only"``; None when the string is not a tt target."""
    parts = shlex.split(text)
    if not parts or parts[0] != "tt":
        return None
    opts: dict[str, object] = {}
    for part in parts[1:]:
        if not part.startswith("-"):
            raise TTTargetError(f"cannot parse {part!r} in target {text!r}", construct="tt target",
                                fix='write options as "-name=value", e.g. "tt -arch=blackhole"')
        name, sep, value = part.lstrip("-").partition("=")
        opts[name] = value if sep else True
    return opts


def make_tt_target(options: TTOptions) -> Target:
    keys = ["tt", options.arch]
    for name, value in sorted(options.as_dict().items()):
        if name != "arch" and value is not None:
            keys.append(f"{_OPT_PREFIX}{name}={value}")
    # a Map, not a dict: Target(dict) converts through tvm_ffi.convert, ~3 ms of ABC checks the first time (attrs.put)
    return Target(tvm_ffi.Map({"kind": "ext_dev", "keys": keys, "device": "tt", "model": options.arch}))


def is_tt_target(target: Target) -> bool:
    return target.kind.name == "ext_dev" and "tt" in [str(k) for k in target.keys]


def options_from_target(target: Target) -> TTOptions:
    """The options a tt target carries, parsed once per target: the pipeline, the codegen and the runtime each
    receive the Target from TileLang and get the same (immutable) TTOptions."""
    if not is_tt_target(target):
        raise TTTargetError(f"{target} is not a tt target", construct="target")
    return _parse_target(str(target.attrs.get("model", DEFAULT_ARCH)), tuple(str(k) for k in target.keys))


@lru_cache(maxsize=64)
def _parse_target(arch: str, keys: tuple[str, ...]) -> TTOptions:
    values: dict[str, object] = {"arch": arch}
    for key in keys:
        if key.startswith(_OPT_PREFIX):
            name, _, value = key[len(_OPT_PREFIX):].partition("=")
            values[name] = None if value == "None" else value
    return make_options(**values)


def stated_options(target) -> dict:
    """The options a tt target states, validated and coerced (``"tt -arch=blackhole -max_cores=4"`` ->
    ``{"arch": "blackhole", "max_cores": 4}``); options it leaves to their defaults are absent. A string, a dict
    or a Target; a TTTargetError for anything that is not a tt target."""
    if isinstance(target, Target) and is_tt_target(target):
        return {k: v for k, v in options_from_target(target).as_dict().items() if v is not None}
    opts = None
    if isinstance(target, str):
        opts = _parse_cli(target.strip())
    elif isinstance(target, Mapping) and target.get("kind") == "tt":
        opts = {k: v for k, v in target.items() if k != "kind"}
    if opts is None:
        raise TTTargetError(f"{str(target)!r} is not a tt target", construct="tt target",
                            fix='spell it "tt -arch=blackhole -max_cores=16 -math_fidelity=HiFi4" or '
                                '{"kind": "tt", "arch": "blackhole"}')
    make_options(**opts)         # the whole set is valid (max_cores within the arch's grid)
    return {name: _coerce(name, value) for name, value in opts.items() if value is not None}


def normalize_tt_target(target) -> Target | None:
    """TileLang target normalizer: return a Target for tt spellings, None for anything else."""
    if isinstance(target, Target):
        return target if is_tt_target(target) else None
    if isinstance(target, str):
        opts = _parse_cli(target.strip())
        return None if opts is None else make_tt_target(make_options(**opts))
    if isinstance(target, Mapping) and target.get("kind") == "tt":
        opts = {k: v for k, v in target.items() if k != "kind"}
        return make_tt_target(make_options(**opts))
    return None
