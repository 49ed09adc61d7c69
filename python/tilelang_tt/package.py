"""One-file packaged artifacts: ``kernel.export(path)`` and ``tilelang_tt.load(path)``.

Layout (all integers little-endian)::

    offset 0   8 bytes   magic b"TTPKG\\x00\\r\\n" (the CR LF catches text-mode mangling)
           8   u32       format version (FORMAT_VERSION)
          12   u32       header length H
          16   32 bytes  SHA-256 of the header
          48   H bytes   header: UTF-8 JSON {format_version, content_hash, payload_bytes, uuid, kernel, arch,
                         options, out_idx, tilelang_tt, tilelang, sdk, plan_schema, created}
        48+H   payload   an uncompressed POSIX tar of the artifact directory: tt.plan.json, kernels/*.cpp,
                         host.cpp, CMakeLists.txt, tt.program.txt, tt.program.json; content_hash is its SHA-256

As Neuron's NEFF does, the header says what the payload is for (arch, versions) without unpacking it, and the
hashes make any change to either detectable. ``read_kernel`` accepts a package or an artifact directory;
``tilelang_tt.load`` makes a callable kernel of it (this module does not import the runtime, whose kernels export).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import stat
import struct
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from .errors import TTPackageError

MAGIC = b"TTPKG\x00\r\n"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sII32s")
REQUIRED_FILES = ("tt.plan.json", "kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp", "host.cpp",
                  "CMakeLists.txt")
_CONSTRUCT = "tilelang_tt.load"


def missing_files(files: dict[str, str]) -> list[str]:
    """The required files an artifact lacks, and the headers its kernels include from beside them
    (``#include "dataflow_helpers.h"``) that it lacks."""
    missing = [f for f in REQUIRED_FILES if f not in files]
    for rel in sorted(f for f in files if f.startswith("kernels/") and f.endswith(".cpp")):
        for name in re.findall(r'^#include "([^"/]+)"', files[rel], re.M):
            if f"kernels/{name}" not in files and f"kernels/{name}" not in missing:
                missing.append(f"kernels/{name}")
    return missing


def _tar(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(files):
            data = files[rel].encode()
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 0     # reproducible: no times, owners
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _untar(payload: bytes, where: str) -> dict[str, str]:
    files = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:") as tar:
            for info in tar.getmembers():
                parts = Path(info.name).parts
                if not info.isfile() or info.name.startswith("/") or ".." in parts:
                    raise TTPackageError(f"{where}: unexpected tar member {info.name!r}", construct=_CONSTRUCT,
                                         fix="packages hold only the artifact's relative files; re-export it")
                files[info.name] = tar.extractfile(info).read().decode()
    except (tarfile.TarError, UnicodeDecodeError, EOFError) as err:
        raise TTPackageError(f"{where}: the payload is not a readable tar ({err})", construct=_CONSTRUCT,
                             fix="re-export the kernel") from None
    missing = missing_files(files)
    if missing:
        raise TTPackageError(f"{where}: the payload lacks {', '.join(missing)}", construct=_CONSTRUCT,
                             fix="re-export the kernel")
    return files


def pack(files: dict[str, str], plan: dict, options: dict, out_idx) -> bytes:
    """The package bytes of an artifact (``files``: relative path -> text)."""
    import tilelang

    from . import plan as plan_mod
    from .version import __version__
    from .cache import SDK_VERSION

    payload = _tar(files)
    header = {
        "format_version": FORMAT_VERSION, "content_hash": hashlib.sha256(payload).hexdigest(),
        "payload_bytes": len(payload), "uuid": str(uuid.uuid4()), "kernel": plan["kernel"],
        "arch": plan["device"]["arch"], "options": options, "out_idx": list(out_idx or []),
        "tilelang_tt": __version__, "tilelang": str(tilelang.__version__), "sdk": SDK_VERSION,
        "plan_schema": plan_mod.SCHEMA_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    head = json.dumps(header, sort_keys=True).encode()
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(head), hashlib.sha256(head).digest()) + head + payload


def export(kernel, path) -> Path:
    """Write ``kernel`` (a TTJITKernel) as one package file, atomically."""
    art = kernel.tt_artifact
    if hasattr(art, "stage_plans"):
        raise TTPackageError(f"kernel '{art.name}' runs {len(art.stage_plans)} T.Kernel launches in order; a package "
                             "holds one TT program", construct="kernel.export",
                             fix="write each T.Kernel as its own @T.prim_func and export each; the launches' "
                                 f"sources are in {kernel.artifact_dir}")
    options = {k: v for k, v in kernel.adapter.options.as_dict().items() if k != "compile_only"}
    data = pack(art.files, art.plan, options, kernel.adapter.result_idx)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def export_library(kernel, path) -> Path:
    """TileLang's ``kernel.export_library(path)`` for a tt kernel: there is no shared library to write (the host
    program is built against the SDK where it runs), so ``path`` must name a ``.ttpkg`` package, which ``export``
    writes; any other name is refused with what to call instead."""
    path = Path(path)
    if path.suffix != ".ttpkg":
        raise TTPackageError(f"a tt kernel has no shared library to write to {str(path)!r}",
                             construct="kernel.export_library",
                             fix=f"export_library('{path.with_suffix('.ttpkg')}') or kernel.export(path) writes the "
                                 "one-file package (tilelang_tt.load(path) runs it); the sources are in "
                                 f"{kernel.artifact_dir} (cmake -S <dir> -B build with TT_METAL_HOME set)")
    written = export(kernel, path)
    logging.getLogger(__name__).info("tilelang-tt: kernel exported as the package %s", written.resolve())
    return written


def unpack(data: bytes, where: str = "package") -> tuple[dict, dict[str, str]]:
    """(header, files) of package bytes; every defect is a TTPackageError that says what is wrong."""
    from .cache import SDK_VERSION

    reexport = "re-export the kernel with kernel.export(path)"
    if len(data) < _PREFIX.size:
        if not MAGIC.startswith(data[:len(MAGIC)]) or not data:
            raise TTPackageError(f"{where} is not a tilelang-tt package (no magic)", construct=_CONSTRUCT,
                                 fix="pass a file written by kernel.export(path) or an artifact directory")
        raise TTPackageError(f"{where} is truncated: {len(data)} bytes, shorter than the {_PREFIX.size}-byte prefix",
                             construct=_CONSTRUCT, fix=reexport)
    magic, version, head_len, head_sha = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise TTPackageError(f"{where} is not a tilelang-tt package (magic {magic!r}, expected {MAGIC!r})",
                             construct=_CONSTRUCT,
                             fix="pass a file written by kernel.export(path) or an artifact directory")
    if version != FORMAT_VERSION:
        raise TTPackageError(f"{where} has package format version {version}; this tilelang-tt reads version "
                             f"{FORMAT_VERSION}", construct=_CONSTRUCT,
                             fix="load it with the tilelang-tt release that wrote it, or re-export the kernel")
    head = data[_PREFIX.size:_PREFIX.size + head_len]
    if len(head) < head_len:
        raise TTPackageError(f"{where} is truncated inside its header ({len(head)} of {head_len} bytes)",
                             construct=_CONSTRUCT, fix=reexport)
    if hashlib.sha256(head).digest() != head_sha:
        raise TTPackageError(f"{where}: the header does not match its SHA-256 (corrupted)", construct=_CONSTRUCT,
                             fix=reexport)
    header = _parse_header(head, where)
    payload = data[_PREFIX.size + head_len:]
    if len(payload) != header["payload_bytes"]:
        what = "truncated" if len(payload) < header["payload_bytes"] else "longer than its header says"
        raise TTPackageError(f"{where} is {what}: payload of {len(payload)} bytes, the header says "
                             f"{header['payload_bytes']}", construct=_CONSTRUCT, fix=reexport)
    if hashlib.sha256(payload).hexdigest() != header["content_hash"]:
        raise TTPackageError(f"{where}: content hash mismatch (the payload's SHA-256 is not the header's "
                             f"{header['content_hash'][:16]}...): the file was corrupted or edited",
                             construct=_CONSTRUCT, fix=reexport)
    if header["sdk"] != SDK_VERSION:
        raise TTPackageError(f"{where} targets TT-Metalium {header['sdk']}; this tilelang-tt generates for "
                             f"{SDK_VERSION}", construct=_CONSTRUCT, fix="recompile the kernel for this SDK")
    return header, _untar(payload, where)


# header field -> the JSON types it must have (bool is not an int here)
_HEADER_FIELDS = {"format_version": int, "content_hash": str, "payload_bytes": int, "kernel": str, "arch": str,
                  "options": dict, "out_idx": list, "sdk": str}


def _parse_header(head: bytes, where: str) -> dict:
    """The header JSON, with every field ``unpack`` and ``load`` use present and of its type."""
    reexport = "re-export the kernel with kernel.export(path)"
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise TTPackageError(f"{where}: the header is not JSON ({err})", construct=_CONSTRUCT, fix=reexport) from None
    if not isinstance(header, dict):
        raise TTPackageError(f"{where}: the header is a JSON {type(header).__name__}, not an object",
                             construct=_CONSTRUCT, fix=reexport)
    for field, kind in _HEADER_FIELDS.items():
        value = header.get(field)
        if not isinstance(value, kind) or isinstance(value, bool):
            got = "missing" if field not in header else f"a {type(value).__name__}"
            raise TTPackageError(f"{where}: the header's {field!r} is {got}, expected {kind.__name__}",
                                 construct=_CONSTRUCT, fix=reexport)
    if header["payload_bytes"] < 0:
        raise TTPackageError(f"{where}: the header's payload_bytes is {header['payload_bytes']}",
                             construct=_CONSTRUCT, fix=reexport)
    return header


def read_header(path) -> dict:
    return unpack(_read(path), str(path))[0]


def _read(path) -> bytes:
    """The bytes of a regular file (a FIFO, socket or device is refused: reading one may block forever)."""
    fix = "pass a file written by kernel.export(path) or an artifact directory"
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TTPackageError(f"{path} is not a regular file (a FIFO, socket or device)", construct=_CONSTRUCT,
                                     fix=fix)
            return f.read()
    except OSError as err:
        raise TTPackageError(f"cannot read {path}: {err.strerror or err}", construct=_CONSTRUCT, fix=fix) from None


def read_artifact(path) -> tuple[dict | None, dict[str, str]]:
    """(header or None, files) of a package file or an artifact directory."""
    path = Path(path)
    if path.is_dir():
        files = _directory_files(path)
        missing = missing_files(files)
        if missing:
            raise TTPackageError(f"{path} is not an artifact directory: it lacks {', '.join(missing)}",
                                 construct=_CONSTRUCT, fix="pass a directory written by tilelang.compile or "
                                                           "`tilelang-tt compile`, or a package file")
        return None, files
    return unpack(_read(path), str(path))


def _directory_files(path: Path) -> dict[str, str]:
    """The text of every regular, non-hidden file under an artifact directory (not the CMake build directories
    ``hardware.build_host`` makes in it; FIFOs and devices are skipped, never read)."""
    files = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if any(part.startswith(".") for part in rel.parts) or rel.parts[0].startswith("build-hw-") or not p.is_file():
            continue
        try:
            files[rel.as_posix()] = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TTPackageError(f"{path}: cannot read {rel.as_posix()} as text ({err})", construct=_CONSTRUCT,
                                 fix="pass a directory written by tilelang.compile or `tilelang-tt compile`") from None
    return files


def params_from_plan(plan: dict) -> list:
    """TileLang KernelParams (dtype, shape) of the kernel's parameters, from the plan's buffers."""
    from tilelang.engine.param import KernelParam
    from tvm import tirx

    by_index = {b["param_index"]: b for b in plan["buffers"]}
    if sorted(by_index) != list(range(len(by_index))):
        raise TTPackageError(f"the plan's buffers cover parameters {sorted(by_index)}, not 0..{len(by_index) - 1}",
                             construct=_CONSTRUCT, fix="re-export the kernel")
    params = []
    for i in range(len(by_index)):
        b = by_index[i]
        b = dict(b, **b["host_unpack"]) if "host_unpack" in b else b     # packed weights: the caller's tensor
        shape = [d if isinstance(d, int) else tirx.Var(str(d), "int32") for d in b["shape"]]
        params.append(KernelParam.from_buffer(tirx.decl_buffer(shape, b["dtype"], b["name"])))
    return params


def read_kernel(path) -> tuple[dict | None, dict[str, str], dict]:
    """(header or None, files, the validated plan) of a package file or an artifact directory."""
    from . import plan as plan_mod
    from .errors import TTPlanError

    header, files = read_artifact(path)
    try:
        plan = json.loads(files["tt.plan.json"])
        plan_mod.validate(plan)
    except (ValueError, TTPlanError) as err:
        raise TTPackageError(f"{path}: tt.plan.json is unusable: {err}", construct=_CONSTRUCT,
                             fix="re-export the kernel") from None
    return header, files, plan


def kernel_options(header: dict | None, plan: dict) -> tuple[dict, list]:
    """(target options, default out_idx) a loaded kernel runs with: the exported ones, or the plan's for a
    directory (no out_idx: pass every tensor)."""
    if header is not None:
        return dict(header["options"]), header["out_idx"]
    return {"arch": plan["device"]["arch"], "max_cores": plan["device"]["max_cores"],
            "math_fidelity": plan["math_fidelity"]}, []
