"""Compile a generated ``host.cpp`` against declarations of the real TT-Metalium 0.81.1 host API.

The ttnn 0.81.1 wheel ships no host headers, so the headers are generated at check time (``host_headers()``):

- every function and member **signature** (name, full parameter types, const/ref qualifiers, overload set) comes
  from the demangled exports of the wheel's ``libtt_metal.so`` (``nm -D --demangle``), for the names in
  ``RETURNS`` and for the constructors of the classes ``host_prelude.hpp`` defines;
- ``BufferType``/``ShardOrientation`` and ``Flags<tensor_accessor::ArgConfig>`` are the wheel's own headers;
- ``tt::DataFormat`` is read from the wheel's ``tensix_types.h`` and every enumerator of it and of ``ENUMS`` is
  checked against the enum reflection tables compiled into ``libtt_metal.so`` (names, and their order by value);
- the struct and class layouts, return types, ``static`` and default arguments, which a mangled name does not
  carry, are written by hand in ``host_prelude.hpp`` and ``RETURNS``/``DEFAULTS`` below, cited to
  ../shared/reference/TT_METALIUM_API.md.

``host.cpp`` is then compiled with ``g++ -std=c++20 -fsyntax-only -Wall -Werror``: a wrong argument count or type,
an unknown struct field or enumerator, a renamed or removed API, or a copy of a move-only ``Program`` fails with
the compiler's message. docs/real_sdk.md lists what is and is not checked.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..artifact import staged_directory
from ..device import MATH_FIDELITY_ENUM
from .sdk import TTCheckError, cache_root, headers_dir, libtt_metal

CXX = "g++"
FLAGS = ["-std=c++20", "-fsyntax-only", "-Wall", "-Werror"]
PRELUDE = Path(__file__).with_name("host_prelude.hpp")

_T = "tt::tt_metal::"
_D = "tt::tt_metal::distributed::"

# Return types (with `static`) of the exported names that get declared; a mangled name has none. [§5]
RETURNS: dict[str, str] = {
    _T + "CreateProgram": "Program",
    _T + "CreateKernel": "KernelHandle",
    _T + "CreateCircularBuffer": "CBHandle",
    _T + "CreateSemaphore": "std::uint32_t",
    _T + "SetRuntimeArgs": "void",
    _T + "CircularBufferConfig::set_page_size": "CircularBufferConfig&",
    _T + "CoreRangeSet::ranges": "const std::vector<CoreRange>&",
    _T + "TensorAccessorArgs::append_to": "void",
    _T + "TensorAccessorArgs::get_compile_time_args": "std::vector<std::uint32_t>",
    _D + "MeshDevice::create_unit_mesh": "static std::shared_ptr<MeshDevice>",
    _D + "MeshDevice::create": "static std::shared_ptr<MeshDevice>",
    _D + "MeshDevice::mesh_command_queue": "MeshCommandQueue&",
    _D + "MeshDevice::shape": "const MeshShape&",
    _D + "MeshDevice::close": "bool",
    _D + "MeshDevice::worker_core_from_logical_core": "CoreCoord",
    _D + "MeshBuffer::create": "static std::shared_ptr<MeshBuffer>",
    _D + "MeshBuffer::size": "DeviceAddr",
    _D + "MeshWorkload::add_program": "void",
    _D + "MeshCommandQueueBase::enqueue_write_mesh_buffer": "void",
    _D + "MeshCommandQueueBase::enqueue_read_mesh_buffer": "void",
    _D + "EnqueueMeshWorkload": "void",
    _D + "Finish": "void",
}
# How many trailing parameters have defaults (a mangled name has none). [§5.1, §5.2, §5.3]
DEFAULTS: dict[str, int] = {
    _D + "MeshDevice::create_unit_mesh": 6,
    _D + "MeshDevice::create": 6,
    _D + "MeshDevice::mesh_command_queue": 1,
    _D + "MeshBuffer::create": 1,
    _D + "Finish": 1,
    _T + "TensorAccessorArgs::TensorAccessorArgs": 1,
}
# Enums the prelude uses, in value order: (declaration, [(name, value)]). Values from §1.1/§5.3 and the wheel's
# llk_defs.h (MathFidelity); names and their order are checked against the library's reflection tables.
ENUMS: dict[str, tuple[str, list[tuple[str, int]]]] = {
    "DataMovementProcessor": ("enum class DataMovementProcessor", [(f"RISCV_{i}", i) for i in range(8)]),
    "NOC": ("enum NOC : std::uint8_t", [("RISCV_0_default", 0), ("RISCV_1_default", 1)]),
    "NOC_MODE": ("enum NOC_MODE : std::uint8_t", [("DM_DEDICATED_NOC", 0), ("DM_DYNAMIC_NOC", 1)]),
    "MathFidelity": ("enum class MathFidelity : std::uint8_t",
                     [*MATH_FIDELITY_ENUM.items(), ("Invalid", 0xFF)]),
    "UnpackToDestMode": ("enum class UnpackToDestMode : std::uint8_t", [("UnpackToDestFp32", 0), ("Default", 1)]),
    "KernelBuildOptLevel": ("enum class KernelBuildOptLevel : std::uint8_t",
                            [(n, i) for i, n in enumerate(["O1", "O2", "O3", "O0", "Os", "Ofast", "Oz"])]),
}
# Non-std names a declared parameter may mention: what host_prelude.hpp and the wheel headers it includes define.
# An exported overload that mentions anything else is left out (counted in HostHeaders.skipped).
KNOWN_TYPES = frozenset(
    ["tt::xy_pair", "tt::DataFormat", "tt::CoreType", "Flags", "tensor_accessor::ArgConfig", "ttsl::StrongType"]
    + [_T + n for n in ("CoreRange", "CoreRangeSet", "Program", "CircularBufferConfig", "DataMovementConfig",
                        "ComputeConfig", "Buffer", "MeshTensor", "DramConfig", "EthernetConfig", "Tile", "CBDescriptor",
                        "ProgramDescriptor", "detail::ProgramImpl", "DispatchCoreConfig", "SubDeviceIdTag",
                        "TensorAccessorArgs", "BufferType", "Shape2D")]
    + [_D + n for n in ("MeshDevice", "MeshBuffer", "MeshCoordinate", "MeshShape", "MeshCoordinateRange",
                        "MeshCommandQueue", "ReplicatedBufferConfig", "ShardedBufferConfig", "DeviceLocalBufferConfig",
                        "MeshWorkload", "MeshDeviceConfig")])
_BUILTIN = frozenset("unsigned signed int long short char bool void float double const volatile wchar_t char8_t "
                     "char16_t char32_t __int128".split())
_IDENT = re.compile(r"(?<![\w:])[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_DATAFORMAT_HEADER = "tt_metal/hw/inc/internal/tt-1xx/wormhole/wormhole_b0_defines/tensix_types.h"
_ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.*)$", re.M)


@dataclass
class HostCheck:
    ok: bool
    checked: dict[str, str]       # API used by host.cpp -> the exported symbol its declaration came from
    problems: list[str]


@dataclass(frozen=True)
class HostHeaders:
    include: Path                 # holds tt-metalium/{host_api,distributed,tensor_accessor_args}.hpp
    declared: dict[str, tuple[str, ...]]   # qualified name -> exported symbols declared for it
    skipped: int                  # exported overloads left out (they mention types the prelude does not define)


@lru_cache(maxsize=1)
def exported_symbols(lib: str | None = None) -> tuple[str, ...]:
    path = lib or str(libtt_metal())
    try:
        proc = subprocess.run(["nm", "-D", "--demangle", "--defined-only", path], capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        raise TTCheckError(f"cannot list the symbols of {path}: {err}", construct="host check",
                           fix="install binutils (nm)") from None
    return tuple(sorted({line.split(" ", 2)[2] for line in proc.stdout.splitlines() if line.count(" ") >= 2}))


def _split_signature(symbol: str) -> tuple[str, str, str] | None:
    """``a::b::f(params) const`` -> (qualified name, params, qualifiers); None for anything that is not a plain
    (non-template, non-operator) function."""
    m = re.match(r"([A-Za-z_][\w:]*)\(", symbol)
    if m is None or "operator" in m.group(1):
        return None
    depth, start = 0, m.end() - 1
    for i in range(start, len(symbol)):
        depth += {"(": 1, ")": -1}.get(symbol[i], 0)
        if depth == 0:
            quals = symbol[i + 1:].strip()
            if quals not in ("", "const", "&", "&&", "const &", "const &&", "const&", "const&&"):
                return None
            return m.group(1), symbol[start + 1:i], quals
    return None


def _split_params(params: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in params:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def _params_known(params: str) -> bool:
    if "(" in params or "anonymous" in params or "{" in params or "[" in params:
        return False
    return all(n.startswith("std::") or n in _BUILTIN or n in KNOWN_TYPES for n in _IDENT.findall(params))


def _declarations(symbols: tuple[str, ...], classes: list[str], namespaces: list[str]):
    """Member declarations per class and free declarations per namespace, from the exported symbols."""
    members = {c: [] for c in classes}
    free = {ns: [] for ns in namespaces}
    declared: dict[str, list[str]] = {}
    skipped = 0
    seen = set()
    for sym in symbols:
        parts = _split_signature(sym)
        if parts is None or parts in seen:
            continue
        qual, params, quals = parts
        scope, _, name = qual.rpartition("::")
        ctor = scope.rpartition("::")[2] == name and scope in members
        if not ctor and qual not in RETURNS:
            continue
        seen.add(parts)
        if not _params_known(params):
            skipped += 1
            continue
        plist = _split_params(params)
        for i in range(len(plist) - DEFAULTS.get(qual, 0), len(plist)):
            plist[i] += " = {}"
        decl = f"{'' if ctor else RETURNS[qual] + ' '}{name}({', '.join(plist)}){' ' + quals if quals else ''};"
        if scope in members:
            members[scope].append(decl)
        elif scope in free:
            free[scope].append(decl)
        else:
            continue
        declared.setdefault(qual, []).append(sym)
    return members, free, {k: tuple(v) for k, v in declared.items()}, skipped


def _reflected_names(lib: bytes, names: list[str]) -> list[str] | None:
    """The enum reflection table in the library that starts with ``names``' first two enumerators, as a list."""
    key = b"\0".join(n.encode() for n in names[:2]) + b"\0"
    for m in re.finditer(re.escape(key), lib):
        if m.start() and re.match(rb"\w", lib[m.start() - 1:m.start()]):
            continue
        table, pos = [], m.start()
        while True:
            end = lib.index(b"\0", pos)
            if not re.fullmatch(rb"[A-Za-z_]\w*", lib[pos:end]):
                return table
            table.append(lib[pos:end].decode())
            pos = end + 1
    return None


def _is_subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(n in it for n in needle)


def _dataformat(sdk: Path) -> list[tuple[str, int]]:
    text = (sdk / _DATAFORMAT_HEADER).read_text()
    body = re.search(r"enum class DataFormat : std::uint8_t \{(.*?)\};", text, re.S).group(1)
    values = [(n, int(v, 0)) for n, v in re.findall(r"^\s*(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)", body, re.M)]
    return [(n, v) for n, v in values if not n.startswith("test")]


def _enum_text(decl: str, values: list[tuple[str, int]], lib: bytes, what: str) -> str:
    names = [n for n, _ in sorted(values, key=lambda nv: nv[1])]
    table = _reflected_names(lib, names)
    if table is None or not _is_subsequence(names, table):
        raise TTCheckError(f"{what}: libtt_metal.so 0.81.1 has no enum table listing {', '.join(names)} in this order "
                           f"(found {table})", construct="host check",
                           fix="correct ENUMS in realcheck/host.py against the library")
    return f"{decl} {{ {', '.join(f'{n} = {v}' for n, v in values)} }};"


# The generator's version is that of the code and prelude this process loaded (a process started before an edit
# must not write its output under the edited code's key).
_PRELUDE_TEXT = PRELUDE.read_text()
_GENERATOR = hashlib.sha256(Path(__file__).read_bytes() + _PRELUDE_TEXT.encode()).hexdigest()


def host_headers() -> HostHeaders:
    """Generate (once per library and generator version) the host headers host.cpp is compiled against."""
    lib_path = libtt_metal()
    version = hashlib.sha256((_GENERATOR + str(lib_path.stat().st_size)).encode()).hexdigest()[:16]
    return _host_headers(str(lib_path), version)


@lru_cache(maxsize=4)
def _host_headers(lib_path: str, version: str) -> HostHeaders:
    prelude = _PRELUDE_TEXT
    classes = re.findall(r"// @MEMBERS (\S+)", prelude)
    namespaces = re.findall(r"// @FREE (\S+)", prelude)
    members, free, declared, skipped = _declarations(exported_symbols(lib_path), classes, namespaces)
    for qual in RETURNS:
        if qual not in declared:
            raise TTCheckError(f"libtt_metal.so 0.81.1 exports no {qual}(...) with parameter types the check knows",
                               construct="host check", fix="update RETURNS/KNOWN_TYPES in realcheck/host.py")
    lib = Path(lib_path).read_bytes()
    enums = "\n".join(_enum_text(decl, values, lib, name) for name, (decl, values) in ENUMS.items())
    dataformat = _enum_text("enum class DataFormat : std::uint8_t", _dataformat(headers_dir()), lib, "tt::DataFormat")
    text = prelude.replace("// @DATAFORMAT", dataformat + "  //").replace("// @ENUMS", enums + "\n//")
    for cls, decls in members.items():
        # the queue's methods are declared on the abstract MeshCommandQueue (see the prelude)
        text = re.sub(rf"// @MEMBERS {re.escape(cls)}$", lambda _: "\n    ".join(decls) or "// (no exports)", text,
                      flags=re.M)
    for ns, decls in free.items():
        text = re.sub(rf"// @FREE {re.escape(ns)}$", lambda _: "\n".join(decls), text, flags=re.M)
    root = cache_root() / f"host-decls-{version}"
    if not (root / ".complete").is_file():
        with staged_directory(root) as tmp:   # another process may build the same content: either copy serves
            inc = tmp / "tt-metalium"
            inc.mkdir()
            (inc / "host_api.hpp").write_text(text)
            for name in ("distributed.hpp", "tensor_accessor_args.hpp"):
                (inc / name).write_text('#pragma once\n#include "host_api.hpp"\n')
            (tmp / "pch.hpp").write_text("#include <tt-metalium/host_api.hpp>\n")
            (tmp / ".complete").write_text(version + "\n")
    _precompile(root)
    return HostHeaders(root, declared, skipped)


def _precompile(root: Path) -> None:
    """A precompiled pch.hpp (the declarations and the standard headers they pull in): a host check then takes
    about 0.4 s instead of 1.2 s. Without it (an error, another compiler) pch.hpp is simply parsed."""
    gch = root / "pch.hpp.gch"
    if gch.is_file():
        return
    tmp = gch.with_name(f"pch.hpp.gch.{os.getpid()}.{threading.get_ident()}")
    proc = subprocess.run([CXX, *[f for f in FLAGS if f != "-fsyntax-only"], *include_flags(root), "-x", "c++-header",
                           str(root / "pch.hpp"), "-o", str(tmp)], capture_output=True, text=True)
    if proc.returncode == 0:
        os.replace(tmp, gch)
    else:
        tmp.unlink(missing_ok=True)


def include_flags(root: Path) -> list[str]:
    sdk = headers_dir() / "tt_metal"
    return [f"-I{root}", f"-I{sdk / 'api'}", f"-I{sdk / 'hostdevcommon' / 'api'}"]


# Calls without which the program compiles but does not do its job, in the order they must come.
_PROTOCOL = [  # (call, pattern, what is wrong when it is missing; None = checked per buffer below)
    ("MeshDevice::create_unit_mesh", r"MeshDevice::create_unit_mesh\(", "never opens the device"),
    ("CreateProgram", r"\bCreateProgram\(", "never creates the program"),
    ("EnqueueWriteMeshBuffer", r"\bEnqueueWriteMeshBuffer\(", None),
    ("MeshWorkload::add_program", r"\.add_program\(", "never adds the program to the workload: nothing would run"),
    ("EnqueueMeshWorkload", r"\bEnqueueMeshWorkload\(", "never enqueues the workload: nothing would run"),
    ("EnqueueReadMeshBuffer", r"\bEnqueueReadMeshBuffer\(", None),
    ("Finish", r"\bFinish\(", "never waits for the command queue"),
    ("MeshDevice::close", r"->close\(\)", "never closes the device"),
]
# A mesh kernel (plan "mesh"): the mesh is opened, the shards written, then one program per chip added.
_MESH_PROTOCOL = [_PROTOCOL[i] for i in (2, 1, 3, 4, 5, 6, 7)]
_MESH_PROTOCOL.insert(0, ("MeshDevice::create", r"MeshDevice::create\(", "never opens the mesh"))


def check_protocol(code: str, plan: dict) -> list[str]:
    """The host program against tt.plan.json: every buffer, circular buffer (index, format, page size), kernel and
    runtime-arg call the plan needs is there, and the device calls come in a working order."""
    problems, last = [], (-1, "")
    mesh = plan.get("mesh")
    for header in ("host_api.hpp", "distributed.hpp", "tensor_accessor_args.hpp"):
        if not re.search(rf"^\s*#\s*include\s*<tt-metalium/{re.escape(header)}>", code, re.M):
            problems.append(f"host.cpp does not #include <tt-metalium/{header}>")
    for call, pattern, missing in _MESH_PROTOCOL if mesh else _PROTOCOL:
        m = re.search(pattern, code)
        if m is None:
            if missing:
                problems.append(f"host.cpp {missing} ({call} is never called)")
            continue
        if m.start() < last[0]:
            problems.append(f"host.cpp calls {call} before {last[1]}, which must come first")
        last = max(last, (m.start(), call))
    if mesh:
        problems += _check_mesh(code, plan)
    for b in plan.get("buffers", []):
        name = re.escape(b["name"])
        if b.get("distribution", {}).get("kind") == "sharded":
            problems += _check_sharded(code, b)
            continue
        m = re.search(rf"\b{name}_config\{{\.page_size = (\w+),.*?\b{name}\s*=\s*distributed::MeshBuffer::create\("
                      rf"\s*distributed::ReplicatedBufferConfig\{{\.size = ([^}}]+)\}}", code, re.S)
        if m is None:
            problems.append(f"host.cpp never creates the device buffer {b['name']} (distributed::MeshBuffer::create)")
        elif (m.group(1), m.group(2)) != (str(b["page_size"]), str(b["bytes"])):
            problems.append(f"host.cpp creates device buffer {b['name']} with (page size, size) = "
                            f"({m.group(1)}, {m.group(2)}), but the plan says ({b['page_size']}, {b['bytes']})")
        if b["io"] in ("input", "inout") and not re.search(rf"\bEnqueueWriteMeshBuffer\(\s*cq,\s*{name}\b", code):
            problems.append(f"host.cpp never writes input {b['name']} to the device "
                            "(distributed::EnqueueWriteMeshBuffer)")
        if b["io"] in ("output", "inout") and not re.search(
                rf"\bEnqueueReadMeshBuffer\(\s*cq,\s*\w+,\s*{name}\b", code):
            problems.append(f"host.cpp never reads output {b['name']} back (distributed::EnqueueReadMeshBuffer)")
    for cb in plan.get("cbs", []):
        idx = cb["index"]
        m = re.search(rf"\bCircularBufferConfig\(\s*(\d+),\s*\{{\{{\s*{idx},\s*tt::DataFormat::(\w+)\s*\}}\}}\s*\)"
                      rf"\s*\.set_page_size\(\s*{idx},\s*(\d+)\s*\)", code)
        want = (str(cb["bytes"]), cb["format"], str(cb["page_size"]))
        if m is None:
            problems.append(f"host.cpp never creates circular buffer c_{idx} ({cb['name']}) as the plan says: "
                            f"CircularBufferConfig({want[0]}, {{{{{idx}, tt::DataFormat::{want[1]}}}}})"
                            f".set_page_size({idx}, {want[2]})")
        elif m.groups() != want:
            problems.append(f"host.cpp creates circular buffer c_{idx} ({cb['name']}) with (total bytes, format, page "
                            f"size) = {m.groups()}, but the plan and the kernels compiled for it use {want}")
    for role, k in plan.get("kernels", {}).items():
        if not re.search(rf"\b{role}\s*=\s*CreateKernel\(\s*program,\s*artifact_dir \+ \"/{re.escape(k['file'])}\"",
                         code):
            problems.append(f"host.cpp never creates the {role} kernel from {k['file']} (CreateKernel)")
        if not re.search(rf"\bSetRuntimeArgs\(\s*program,\s*{role}\b", code):
            problems.append(f"host.cpp never sets the {role} kernel's runtime args (SetRuntimeArgs)")
    return problems


def _check_mesh(code: str, plan: dict) -> list[str]:
    """A mesh kernel's host program opens the plan's mesh and adds one program per chip."""
    mesh, problems = plan["mesh"], []
    rows, cols = mesh["shape"]
    if not re.search(rf"MeshDevice::create\(\s*distributed::MeshDeviceConfig\(\s*distributed::MeshShape\(\s*{rows},\s*"
                     rf"{cols}\s*\)\s*\)\s*\)", code):
        problems.append(f"host.cpp does not open the plan's {rows}x{cols} mesh "
                        f"(MeshDevice::create(MeshDeviceConfig(MeshShape({rows}, {cols}))))")
    if not re.search(rf"for \(uint32_t chip = 0; chip < {mesh['chips']}; \+\+chip\)", code) or not re.search(
            rf"MeshCoordinate coord\(chip / {cols}, chip % {cols}\).*?\.add_program\(\s*distributed::"
            r"MeshCoordinateRange\(coord, coord\)", code, re.S):
        problems.append(f"host.cpp does not add one program per chip of the {rows}x{cols} mesh (workload.add_program("
                        "MeshCoordinateRange(coord, coord), ...) for each chip)")
    return problems


def _check_sharded(code: str, b: dict) -> list[str]:
    """A sharded buffer is created with the plan's global size and page matrices."""
    name, d = re.escape(b["name"]), b["distribution"]
    m = re.search(rf"\b{name}_config\{{\.page_size = (\w+),.*?\b{name}\s*=\s*distributed::MeshBuffer::create\("
                  r"\s*distributed::ShardedBufferConfig\{\.global_size = (\d+),\s*\.global_buffer_shape = "
                  r"Shape2D\((\d+), (\d+)\),\s*\.shard_shape = Shape2D\((\d+), (\d+)\)", code, re.S)
    if m is None:
        return [f"host.cpp never creates the sharded device buffer {b['name']} (distributed::ShardedBufferConfig)"]
    want = (str(b["page_size"]), str(b["bytes"]), *map(str, d["buffer_shape"]), *map(str, d["shard_shape"]))
    if m.groups() != want:
        return [f"host.cpp creates sharded buffer {b['name']} with (page size, global size, buffer shape, shard shape) "
                f"= {m.groups()}, but the plan says {want}"]
    return []


def check_host(host_cpp: Path, plan: dict | None = None) -> HostCheck:
    if shutil.which(CXX) is None:
        raise TTCheckError(f"{CXX} is not installed", construct="host check", fix="apt-get install g++")
    headers = host_headers()
    host_cpp = Path(host_cpp)
    # -include: the precompiled declarations come first (host.cpp's own #includes of them are then no-ops; that
    # it has them is checked in check_protocol)
    proc = subprocess.run([CXX, *FLAGS, *include_flags(headers.include), "-include", str(headers.include / "pch.hpp"),
                           str(host_cpp)], capture_output=True, text=True)
    code = re.sub(r"//[^\n]*", "", host_cpp.read_text())
    checked = {}
    for qual, syms in sorted(headers.declared.items()):
        short = qual.removeprefix(_D).removeprefix(_T).replace("MeshCommandQueueBase::", "MeshCommandQueue::")
        if re.search(rf"\b{re.escape(short.rpartition('::')[2])}\b", code):
            checked[short] = syms[0]
    for template, method in (("EnqueueWriteMeshBuffer", "enqueue_write_mesh_buffer"),
                             ("EnqueueReadMeshBuffer", "enqueue_read_mesh_buffer")):
        if re.search(rf"\b{template}\(", code):   # templates in distributed.hpp [R] over the exported queue method
            checked[template] = headers.declared[f"{_D}MeshCommandQueueBase::{method}"][0]
    if re.search(r"->address\(\)", code):
        checked["MeshBuffer::address"] = "inline in the SDK headers (declared by hand; not exported, not checked)"
    problems = []
    if proc.returncode != 0:
        errors = [m for m in _ERROR.finditer(proc.stderr) if Path(m.group("file")).name == host_cpp.name]
        first = errors[0] if errors else _ERROR.search(proc.stderr)
        if first is None:
            problems.append(f"host.cpp: {CXX} failed: {proc.stderr.strip()[:400]}")
        else:
            problems.append(f"{Path(first.group('file')).name}:{first.group('line')}: {first.group('msg')} "
                            "(against the TT-Metalium 0.81.1 host API)")
        problems += [f"{Path(m.group('file')).name}:{m.group('line')}: {m.group('msg')}" for m in errors[1:5]]
    if plan is not None:
        problems += check_protocol(code, plan)
    return HostCheck(not problems, checked, problems)

