"""Run a compiled TT artifact on tt-sim, the CPU emulator of TT-Metalium (built from ``src/tt/sim``).

The exact generated host program is compiled against the emulator's SDK-shaped headers and linked with
``libtt_sim``; it loads the exact generated kernels (compiled at run time, cached by content hash), runs
them core by core, and returns the outputs. Host tensors stay row-major: tilize/untilize to 32x32 tiles of
four 16x16 faces happen here, vectorized with NumPy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import blockfloat
from .dims import dim_value
from .device import BFP_INT_RANGE, STORAGE_TILE_FORMAT, TILE, TILE_FORMATS
from .errors import TTCallError, TTError
from .progress import spinner

logger = logging.getLogger(__name__)

PROTOCOL_ONLY_ENV = "TILELANG_TT_PROTOCOL_ONLY"
_NP_DTYPES = {"Float32": np.float32, "Float16": np.float16, "Float16_b": np.uint16,
              **{f.name: np.dtype(f.int_dtype).type for f in TILE_FORMATS.values() if f.kind == "int"}}


class TTSimError(TTError):
    """The emulator rejected a run (deadlock, CB misuse, out-of-bounds NoC access, DST overflow, ...)."""


@dataclass(frozen=True)
class SimInstall:
    include: Path
    lib: Path
    headers_hash: str


@lru_cache(maxsize=1)
def sim_install() -> SimInstall:
    """Locate the emulator installed with the package (``tilelang_tt/_sim``)."""
    candidates = []
    if os.environ.get("TT_SIM_ROOT"):
        candidates.append(Path(os.environ["TT_SIM_ROOT"]))
    candidates.append(Path(__file__).resolve().parent / "_sim")
    candidates += [Path(p) / "tilelang_tt" / "_sim" for p in sys.path if p]
    for root in candidates:
        lib = root / "lib" / "libtt_sim.so"
        if lib.is_file() and (root / "include" / "api" / "dataflow" / "dataflow_api.h").is_file():
            stamp = root / "headers_hash.txt"
            return SimInstall(root / "include", root / "lib", stamp.read_text().strip() if stamp.exists() else "")
    raise TTSimError("the tt-sim emulator library is not installed", construct="emulator",
                     fix="reinstall the package (`pip install -e .` builds src/tt/sim with CMake)")


def cache_root() -> Path:
    """``$TILELANG_TT_CACHE_DIR`` made absolute once (default ``~/.cache/tilelang_tt``)."""
    from .artifact import tt_cache_root

    return tt_cache_root()


def build_host(artifact_dir: Path) -> Path:
    """Compile the artifact's host program against tt-sim (cached by content hash). A cached program is used only
    while its SHA-256 is the one recorded beside it (``host.sha256``) when it was built; otherwise it is rebuilt."""
    inst = sim_install()
    host_cpp = Path(os.path.abspath(artifact_dir)) / "host.cpp"
    source = host_cpp.read_text()
    cxx = os.environ.get("TT_SIM_CXX", "c++")
    flags = ["-std=c++20", "-O1", "-Wall", "-Werror"]
    # the binary links libtt_sim.so by rpath: another install (another venv sharing this cache) needs its own build
    key = hashlib.sha256("\0".join([source, inst.headers_hash, str(inst.lib), cxx, *flags]).encode()).hexdigest()[:20]
    exe = cache_root() / "sim-hosts" / key / "host"
    if exe.is_file():
        recorded = _recorded_sha256(exe)
        if recorded is not None and recorded == _sha256_file(exe):
            return exe
        logger.warning("tilelang-tt: %s %s; rebuilding", exe, "has no recorded hash" if recorded is None else
                       "does not match the hash recorded when it was built (damaged)")
    pch = _host_pch(source, inst, cxx, flags)
    cmd = [cxx, *flags, f"-I{inst.include}", *(["-include", str(pch)] if pch else []), "-x", "c++", str(host_cpp),
           "-o", "{out}", f"-L{inst.lib}", "-ltt_sim", f"-Wl,-rpath,{inst.lib}"]
    try:
        _build_recorded(cmd, exe)
    except OSError as err:
        raise TTSimError(f"cannot write the emulator build {exe}: {err.strerror or err}", construct="emulator",
                         fix="free space or point $TILELANG_TT_CACHE_DIR at a writable directory") from None
    return exe


def _host_pch(source: str, inst, cxx: str, flags: list[str]) -> Path | None:
    """A precompiled header of the host program's includes (the C++ library and tt-sim's host API: about a third of
    a host build), built once per include list, tt-sim install and flags. GCC uses ``<header>.gch`` only when it
    was built with the same flags and otherwise reads the header itself; None when it cannot be built."""
    text = "".join(line + "\n" for line in source.splitlines() if line.startswith("#include <"))
    if not text:
        return None
    key = hashlib.sha256("\0".join([text, inst.headers_hash, str(inst.include), cxx, *flags]).encode()).hexdigest()[:20]
    header = cache_root() / "sim-pch" / key / "tt_sim_host.hpp"
    gch, failed = header.with_name(header.name + ".gch"), header.with_name(header.name + ".failed")
    if gch.is_file() and header.is_file():
        return header
    if failed.is_file():       # built once without success: compile the hosts without it
        return None
    try:
        header.parent.mkdir(parents=True, exist_ok=True)
        unique = f"{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}"
        tmp_header = header.with_name(f"{header.name}.tmp.{unique}")
        tmp_header.write_text(text)
        os.replace(tmp_header, header)
        tmp = gch.with_name(f"{gch.name}.tmp.{unique}")
        proc = subprocess.run([cxx, *flags, f"-I{inst.include}", "-x", "c++-header", str(header), "-o", str(tmp)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            failed.write_text(proc.stderr[-4000:])
            return None
        os.replace(tmp, gch)
    except OSError:
        return None
    return header


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _recorded_sha256(exe: Path) -> str | None:
    try:
        return exe.with_name(exe.name + ".sha256").read_text().strip()
    except OSError:
        return None


def _build_recorded(cmd: list[str], exe: Path) -> None:
    """Run ``cmd`` (``{out}``: the output file) into a temporary name unique per process and thread, record the
    result's SHA-256 beside ``exe``, then rename it into place (atomic: concurrent builds agree)."""
    exe.parent.mkdir(parents=True, exist_ok=True)
    unique = f"{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}"
    tmp, tmp_sum = exe.with_name(f"{exe.name}.tmp.{unique}"), exe.with_name(f"{exe.name}.sha256.tmp.{unique}")
    try:
        proc = subprocess.run([str(tmp) if c == "{out}" else c for c in cmd], capture_output=True, text=True)
        if proc.returncode != 0:
            raise TTSimError(f"the generated host program does not compile against tt-sim:\n{proc.stderr[-4000:]}",
                             construct="host.cpp")
        tmp_sum.write_text(_sha256_file(tmp) + "\n")
        os.replace(tmp_sum, exe.with_name(exe.name + ".sha256"))
        os.replace(tmp, exe)
    finally:
        tmp.unlink(missing_ok=True)
        tmp_sum.unlink(missing_ok=True)


def _elf_complete(path: str) -> bool:
    """Whether a 64-bit ELF file holds every byte its headers describe (a truncated one does not)."""
    try:
        with open(path, "rb") as f:
            size, head = os.fstat(f.fileno()).st_size, f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                return False
            e = "<" if head[5] == 1 else ">"
            phoff, shoff = struct.unpack_from(e + "QQ", head, 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(e + "HHHH", head, 54)
            if max(phoff + phentsize * phnum, shoff + shentsize * shnum) > size:
                return False
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    segments = (struct.unpack_from(e + "IIQQQQ", table, i * phentsize) for i in range(phnum))
    return all(offset + filesz <= size for _, _, offset, _, _, filesz in segments)


def remove_damaged_kernels(directory: Path) -> list[str]:
    """Delete the kernel objects in tt-sim's cache that are not whole ELF files (a truncated write, a full disk):
    tt-sim reuses any object present, so a damaged one would crash every run. Returns the names removed."""
    removed = []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".so"))
    except OSError:
        return removed
    for name in names:
        if not _elf_complete(os.path.join(directory, name)):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def _launch(exe: Path, data_dir: Path, artifact_dir: Path, env: dict, timeout_s: float, sim: bool):
    """Run the host program. When tt-sim dies by a signal or cannot load a kernel object, damaged cached kernel
    objects are the likely cause: they are removed (tt-sim rebuilds them) and the run is repeated once."""
    for attempt in (0, 1):
        try:
            proc = subprocess.run([str(exe), str(data_dir), str(artifact_dir)], cwd=artifact_dir, env=env,
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise TTSimError(f"the emulator run exceeded {timeout_s:.0f} s", construct="emulator") from None
        crashed = proc.returncode < 0 or "cannot load kernel" in proc.stderr
        if not sim or attempt or not crashed:
            return proc
        removed = remove_damaged_kernels(Path(env["TT_SIM_CACHE_DIR"]))
        if not removed:
            return proc
        logger.warning("tilelang-tt: removed damaged kernel objects %s from %s (exit code %s); running again",
                       ", ".join(removed), env["TT_SIM_CACHE_DIR"], proc.returncode)
    return proc


POISON_ENV = "TILELANG_TT_POISON_PADDING"
_POISON = {"Float32": np.float32(np.nan), "Float16": np.float16(np.nan), "Float16_b": np.uint16(0x7FC0),
           "UInt8": np.uint8(0xA5),        # a byte the zero-filled padding is not
           "Int32": np.int32(0x7FC00000)}   # an index far past any tensor: a read of it must not happen


def pad_to(array: np.ndarray, padded_shape: tuple[int, ...], fmt: str) -> np.ndarray:
    """The logical tensor inside the padded tile grid. Padding is zero, or NaN with $TILELANG_TT_POISON_PADDING=1
    (the readers must zero-fill edge tiles themselves, so results may not depend on it)."""
    if tuple(array.shape) == tuple(padded_shape):
        return array
    fill = _POISON[fmt] if os.environ.get(POISON_ENV) == "1" else 0
    out = np.full(padded_shape, fill, dtype=array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


def _to_numpy(value, fmt: str, dtype: str | None = None) -> np.ndarray:
    """A torch tensor or NumPy array as the raw element type of the TT format (``dtype``: the tensor's)."""
    if dtype == "int8" and fmt == STORAGE_TILE_FORMAT["Int8"]:    # T.TTShard(format="Int8"): two's-complement bytes
        try:
            v = blockfloat.int_elements(value, "Int32")
        except (TypeError, ValueError) as e:
            raise TTSimError(f"an int8 tensor argument stored as Int8: {e}", construct="kernel call") from None
        if v.size and (int(v.min()) < -128 or int(v.max()) > 127):
            raise TTSimError(f"an int8 tensor argument stored as Int8 holds {int(v.min())}..{int(v.max())}, outside "
                             "[-128, 127]", construct="kernel call")
        return v.astype(np.int8).view(np.uint8)
    if TILE_FORMATS[fmt].kind == "int":     # UInt8: the integers as they are (float input, range checked)
        try:
            return blockfloat.int_elements(value, fmt)
        except (TypeError, ValueError) as e:
            raise TTSimError(f"a {fmt} tensor argument: {e}", construct="kernel call") from None
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the test/CLI paths only
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        if fmt == "Float16_b":
            return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return t.to({"Float32": torch.float32, "Float16": torch.float16}[fmt]).numpy()
    arr = np.asarray(value)
    if fmt == "Float16_b":
        return float32_to_bf16_bits(np.ascontiguousarray(arr, dtype=np.float32))
    return np.ascontiguousarray(arr, dtype=_NP_DTYPES[fmt])


def float32_to_bf16_bits(arr: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (as tt-sim's packer does)."""
    u = arr.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def _store(target, raw: np.ndarray, fmt: str) -> None:
    """Write raw TT-format values back into a torch tensor or NumPy array, in place."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(target, torch.Tensor):
        same = {"Float16_b": (torch.bfloat16, np.int16), "Float32": (torch.float32, np.float32),
                "Float16": (torch.float16, np.float16), "UInt8": (torch.uint8, np.uint8)}.get(fmt)
        if same is not None and target.dtype == same[0] and target.device.type == "cpu" and target.is_contiguous():
            # a plain memcpy through NumPy: torch's copy_ wakes its thread pool (~8 ms for 512 KB on a busy host)
            view = target.detach().view(torch.int16) if fmt == "Float16_b" else target.detach()
            np.copyto(view.numpy(), raw.view(same[1]).reshape(target.shape))
            return
        if fmt == "Float16_b":
            value = torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16)
        else:
            value = torch.from_numpy(raw.copy())
        target.copy_(value.to(target.dtype).reshape(target.shape))
        return
    if fmt == "Float16_b":
        raw = (raw.astype(np.uint32) << 16).view(np.float32)
    np.copyto(target, raw.reshape(target.shape).astype(target.dtype))


BLOCK_FLOAT = tuple(name for name, f in TILE_FORMATS.items() if f.kind == "bfp")


def to_block_float(value, buf: dict, view: tuple, padded: tuple) -> np.ndarray:
    """A host tensor as the bytes of its Bfp8_b / Bfp4_b tiles (tt-metal's host conversion, ``blockfloat.to_tiles``:
    what ``ttnn.from_torch(..., bfloat8_b)`` writes). int8 tensors: their integers (every integer in [-127, 127] is
    exact in Bfp8_b: a sign and 7 magnitude bits; -128 is refused rather than rounded to -127). Padding is zero
    (never NaN: it would set its row's exponent)."""
    if hasattr(value, "detach"):       # torch: integers stay integers (checked below), floats as float32
        value = value.detach().cpu()
        arr = (value.float() if value.dtype.is_floating_point else value).numpy()
    else:
        arr = np.asarray(value)
    lo, hi = BFP_INT_RANGE
    if arr.dtype.kind in "iu" and arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise TTSimError(f"{buf.get('name', 'tensor')}: integer weights stored as {buf['format']} must lie in "
                         f"[{lo}, {hi}] (a sign and 7 magnitude bits); got {int(arr.min())}..{int(arr.max())}",
                         construct="kernel call",
                         fix="store the tensor as its two's-complement bytes with T.annotate_tt_sharding({W: "
                             "T.TTShard(format=\"Int8\")}) (exact for -128..127), quantize symmetrically to "
                             "[-127, 127], or pass uint8 weights with a zero point")
    arr = np.ascontiguousarray(arr, dtype=np.float32).reshape(view)   # whole tiles: the compiler checks it
    if tuple(arr.shape) != tuple(padded):
        grid = np.zeros(padded, dtype=np.float32)
        grid[tuple(slice(0, n) for n in arr.shape)] = arr
        arr = grid
    return blockfloat.to_tiles(arr, buf["format"], rounding="host")


def unpack_host(value, spec: dict) -> np.ndarray:
    """A packed weight tensor (two int4 per byte, ...) as the int8 tensor the kernel reads (plan ``host_unpack``,
    written by UnpackWeightsTT): element ``x`` along ``axis`` is ``table[x % factor][packed[x // factor]]``, the
    packed byte taken as uint8 (the table is the kernel's unpack expression evaluated for every byte)."""
    arr = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    raw = np.ascontiguousarray(arr).view(np.uint8)
    axis, factor = spec["axis"], spec["factor"]
    wide = np.repeat(raw, factor, axis=axis)
    pos = (np.arange(wide.shape[axis]) % factor).reshape([-1 if a == axis else 1 for a in range(wide.ndim)])
    return np.asarray(spec["table"], dtype=np.int8)[pos, wide]


def _scalar_bits(value, dtype: str) -> int:
    """A scalar kernel argument as the uint32 the kernels receive (a float: the bit pattern of its float32 value,
    a float16 / bfloat16 one first rounded to its dtype, as the kernel's parameter holds it)."""
    import struct

    if dtype == "float16":
        value = float(np.float16(value))
    if dtype in ("float32", "float16", "bfloat16"):
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        if dtype == "bfloat16":     # round to nearest even at 8 significant bits
            bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16 & 0xFFFFFFFF
        return bits
    if not -2 ** 31 <= int(value) < 2 ** 32:
        raise TTCallError(f"{int(value)} does not fit the 32-bit runtime argument that carries the {dtype} scalar "
                          "parameter", construct=f"scalar parameter ({dtype})",
                          fix="pass a value in [-2^31, 2^32) or compute it inside the kernel")
    return int(value) & 0xFFFFFFFF


def _pad_rows(arr: np.ndarray, buf: dict) -> np.ndarray:
    """A tensor whose matrices the plan pads (``row_pad``): each one's rows zero-padded to ``padded_rows``."""
    pad = buf.get("row_pad")
    if not pad:
        return arr
    # "outer" (the number of matrices) is a C++ expression when the batch is symbolic: the array's size tells it
    grouped = arr.reshape(-1, pad["rows"], int(buf["view"][1]))
    out = np.zeros((grouped.shape[0], pad["padded_rows"], grouped.shape[2]), dtype=arr.dtype)
    out[:, :pad["rows"]] = grouped
    return out


def _pad_cols(arr: np.ndarray, buf: dict) -> np.ndarray:
    """A broadcast-column tensor (``col_pad``, read-only): column g of ``[N, G]`` at column 32 g of ``[N, 32 G]``."""
    pad = buf.get("col_pad")
    if not pad:
        return arr
    grouped = arr.reshape(arr.shape[0], -1, 1)
    out = np.zeros((grouped.shape[0], grouped.shape[1], pad["padded_cols"]), dtype=arr.dtype)
    out[:, :, :1] = grouped
    return out.reshape(arr.shape[0], -1)


def _unpad_rows(view: np.ndarray, buf: dict) -> np.ndarray:
    """The inverse of :func:`_pad_rows` on the 2-D view: the tensor's rows of each matrix."""
    pad = buf.get("row_pad")
    if not pad:
        return view
    return view.reshape(-1, pad["padded_rows"], view.shape[-1])[:, :pad["rows"]].reshape(-1, view.shape[-1])


def bind_shapes(plan: dict, tensors: dict[int, object]) -> dict[str, int]:
    """Check every tensor against the plan and give each symbolic dimension (T.dynamic) its value."""
    shapes: dict[str, int] = {}
    for buf in plan["buffers"]:
        value = tensors.get(buf["param_index"])
        if value is None:
            raise TTSimError(f"no tensor for parameter {buf['name']}", construct="kernel call")
        actual = tuple(int(n) for n in getattr(value, "shape", ()))
        expected = buf["host_unpack"]["shape"] if "host_unpack" in buf else buf["shape"]
        ok = len(actual) == len(expected)
        for want, got in zip(expected, actual):
            if isinstance(want, str):
                if shapes.setdefault(want, got) != got:
                    raise TTSimError(f"{buf['name']} has {want}={got}, another tensor has {want}={shapes[want]}",
                                     construct="kernel call", fix=f"pass tensors that agree on {want}")
                ok = ok and got >= 1
            else:
                ok = ok and want == got
        if not ok:
            raise TTSimError(f"{buf['name']} has shape {list(actual)}, the kernel was compiled for {expected}",
                             construct="kernel call", fix="pass tensors of the compiled shapes")
    return shapes


def check_tile_int_limits(plan: dict, shapes: dict[str, int]) -> None:
    """Each symbolic dimension the tiles compute with (the plan's ``tile_int_limits``, TileIntRangeTT) is below
    its limit (the call checks the scalar parameters there, runtime.ParamSpec.limit)."""
    for name, limit in plan.get("tile_int_limits", {}).items():
        value = shapes.get(name)
        if value is not None and abs(int(value)) >= limit:
            raise TTCallError(f"{name} = {int(value)}: the kernel computes with it on tiles in float32, exact for "
                              f"these integers only below {limit} (2^{limit.bit_length() - 1}) in magnitude",
                              construct="kernel call",
                              fix=f"pass {name} below {limit}, or compute with it per block (outside T.Parallel)")


@dataclass
class RunResult:
    report: dict
    seconds: float
    padded_outputs: dict | None = None   # buffer name -> the whole padded tile grid, row-major (for inspection)


def _check_value_limit(buf: dict, array: np.ndarray) -> None:
    """An integer tensor whose tiles compute reads holds values of magnitude below the plan's ``value_limit``
    (2^24: compute makes them float32, exact only there)."""
    limit = buf.get("value_limit")
    if limit is None or not array.size:
        return
    worst = int(np.abs(array.astype(np.int64)).max())
    if worst >= limit:
        raise TTCallError(f"parameter {buf['name']} holds {worst}: the kernel computes with its values as float32, "
                          f"exact only below {limit} (2^24) in magnitude", construct="kernel call",
                          fix=f"pass values of magnitude below {limit}, or use them only as indices (T.copy offsets, "
                              "gathers), which the data-movement cores read as 32-bit integers")


def _write_inputs(data_dir: Path, plan: dict, tensors: dict[int, object], shapes: dict[str, int]) -> dict:
    """Write every input as the tiles of its format into ``data_dir``; return each buffer's (view, padded) dims."""
    dims = {}
    for buf in plan["buffers"]:
        value = tensors[buf["param_index"]]
        if "host_unpack" in buf:
            value = unpack_host(value, buf["host_unpack"])
        view = tuple(int(dim_value(d, shapes)) for d in buf.get("view", buf["shape"]))
        dims[buf["name"]] = (view, tuple(-(-n // TILE) * TILE for n in view))
        if buf["io"] in ("input", "inout") and buf["format"] in BLOCK_FLOAT:
            to_block_float(value, buf, view, dims[buf["name"]][1]).tofile(data_dir / f"{buf['name']}.bin")
        elif buf["io"] in ("input", "inout"):
            array = _to_numpy(value, buf["format"], buf["dtype"])
            _check_value_limit(buf, array)
            raw = pad_to(_pad_cols(_pad_rows(array, buf), buf).reshape(view), dims[buf["name"]][1], buf["format"])
            blockfloat.tilize(raw).tofile(data_dir / f"{buf['name']}.bin")
    return dims


def _read_outputs(data_dir: Path, plan: dict, tensors: dict[int, object], dims: dict) -> dict:
    """Store every output the host program wrote into its caller's tensor; return the whole padded tile grids."""
    padded_outputs = {}
    for buf in plan["buffers"]:
        if buf["io"] in ("output", "inout"):
            if buf["format"] in BLOCK_FLOAT:   # decoded to float32 values (each exactly a BF16)
                grid = blockfloat.from_tiles(np.fromfile(data_dir / f"{buf['name']}.bin", dtype=np.uint8),
                                             buf["format"], dims[buf["name"]][1])
            else:
                raw = np.fromfile(data_dir / f"{buf['name']}.bin", dtype=_NP_DTYPES[buf["format"]])
                grid = blockfloat.untilize(raw, dims[buf["name"]][1])
            padded_outputs[buf["name"]] = grid
            logical = _unpad_rows(grid[tuple(slice(0, n) for n in dims[buf["name"]][0])], buf)
            _store(tensors[buf["param_index"]], np.ascontiguousarray(logical),
                   "Float32" if buf["format"] in BLOCK_FLOAT else buf["format"])
    return padded_outputs


def run(artifact_dir: Path, plan: dict, tensors: dict[int, object], protocol_only: bool | None = None,
        timeout_s: float = 600.0, backend: str | None = None) -> RunResult:
    """Execute the artifact's host program: on tt-sim, or on a device through a TT-Metalium SDK
    (``backend``: "sim" | "hw" | "auto"/None, see ``hardware.resolve_backend``). ``tensors`` maps parameter
    index -> tensor (inputs are read, outputs are written in place)."""
    from . import hardware

    artifact_dir = Path(os.path.abspath(artifact_dir))    # the host program runs inside it: no relative paths
    chosen = hardware.resolve_backend(backend)
    where = "the device" if chosen == "hw" else "tt-sim"
    with spinner(f"{plan['kernel']} on {where}"):        # on a terminal's stderr, once the run takes over ~2 s
        return _run_host(artifact_dir, plan, tensors, protocol_only, timeout_s, chosen)


def _run_host(artifact_dir: Path, plan: dict, tensors: dict[int, object], protocol_only: bool | None, timeout_s: float,
         chosen: str) -> RunResult:
    import time

    from . import hardware

    if chosen == "hw":
        if protocol_only:
            raise TTSimError("protocol-only runs exist on the emulator only", construct="kernel call")
        exe = hardware.build_host(artifact_dir)
        logger.info("tilelang-tt: running %s on the Tenstorrent device (TT-Metalium SDK at %s)", plan["kernel"],
                    hardware.sdk_home())
    else:
        inst = sim_install()
        exe = build_host(artifact_dir)
        logger.info("tilelang-tt: running %s on tt-sim, the CPU emulator (no Tenstorrent device/SDK in use)",
                    plan["kernel"])
    if protocol_only is None:
        protocol_only = os.environ.get(PROTOCOL_ONLY_ENV) == "1"
    with tempfile.TemporaryDirectory(prefix="tt-sim-") as data:
        data_dir = Path(data)
        shapes = bind_shapes(plan, tensors)
        check_tile_int_limits(plan, shapes)
        dims = _write_inputs(data_dir, plan, tensors, shapes)
        if shapes:
            (data_dir / "shapes.txt").write_text("".join(f"{k} {v}\n" for k, v in shapes.items()))
        if plan.get("scalar_args"):
            (data_dir / "scalars.txt").write_text("".join(
                f"{a['name']} {_scalar_bits(tensors[a['param_index']], a['dtype'])}\n" for a in plan["scalar_args"]))
        report_path = data_dir / "report.json"
        env = dict(os.environ)
        if chosen == "sim":
            env.update(TT_SIM_ARCH=plan["device"]["arch"], TT_SIM_INCLUDE_DIR=str(inst.include),
                       TT_SIM_CACHE_DIR=str(cache_root() / "sim-kernels"), TT_SIM_REPORT=str(report_path),
                       TT_SIM_PROTOCOL_ONLY="1" if protocol_only else "0",
                       TT_SIM_BUFFER_FORMATS=",".join(str(TILE_FORMATS[b["format"]].value) for b in plan["buffers"]))
        t0 = time.perf_counter()
        proc = _launch(exe, data_dir, artifact_dir, env, timeout_s, sim=chosen == "sim")
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            message = proc.stderr.strip() or f"exit code {proc.returncode}"
            where = f"tt-sim ({plan['kernel']})" if chosen == "sim" else f"device run ({plan['kernel']})"
            raise TTSimError(message.removeprefix("tt-sim error: "), construct=where)
        padded_outputs = {} if protocol_only else _read_outputs(data_dir, plan, tensors, dims)
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
    report["wall_seconds"] = seconds
    report["backend"] = "tt-sim (CPU emulator)" if chosen == "sim" else f"device via {hardware.sdk_home()}"
    return RunResult(report, seconds, padded_outputs)
