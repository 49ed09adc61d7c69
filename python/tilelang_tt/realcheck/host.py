"""Check that every TT-Metalium host call in a generated ``host.cpp`` exists in the real ``libtt_metal.so`` 0.81.1.

The wheel ships no host headers, so the host program cannot be compiled against the real SDK here. Instead,
every host API the program calls is looked up among the library's exported symbols (``nm -D --demangle``) with
the parameter types the generated call needs. ``HOST_API`` is the one table of what the generator may call;
an API-looking call in ``host.cpp`` that the table does not know (``EnqueueProgram``, ``CreateDevice``, ...)
fails the check with its name. Members defined inline in the SDK's headers are not exported; the table says
so instead of pretending to check them.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .sdk import TTCheckError, libtt_metal

_VARIANT_CORES = "std::variant<tt::xy_pair, tt::tt_metal::CoreRange, tt::tt_metal::CoreRangeSet> const&"
_M = "tt::tt_metal::distributed::"

# name used in host.cpp -> exported symbols (demangled prefixes) it needs; None = inline in the SDK headers.
HOST_API: dict[str, tuple[str, ...] | None] = {
    "create_unit_mesh": (f"{_M}MeshDevice::create_unit_mesh(int, unsigned long, unsigned long, unsigned long, "
                         "tt::tt_metal::DispatchCoreConfig const&",),
    "mesh_command_queue": (f"{_M}MeshDevice::mesh_command_queue(std::optional<unsigned char>) const",),
    "MeshBuffer::create": (f"{_M}MeshBuffer::create(std::variant<{_M}ReplicatedBufferConfig, "
                           f"{_M}ShardedBufferConfig> const&, {_M}DeviceLocalBufferConfig const&, {_M}MeshDevice*",),
    "CreateProgram": ("tt::tt_metal::CreateProgram()",),
    "CoreRangeSet": ("tt::tt_metal::CoreRangeSet::CoreRangeSet(std::vector<tt::tt_metal::CoreRange",),
    "CoreRange": ("tt::tt_metal::CoreRange::CoreRange(tt::xy_pair const&, tt::xy_pair const&)",),
    "CreateCircularBuffer": (f"tt::tt_metal::CreateCircularBuffer(tt::tt_metal::Program&, {_VARIANT_CORES}, "
                             "tt::tt_metal::CircularBufferConfig const&)",),
    "CircularBufferConfig": ("tt::tt_metal::CircularBufferConfig::CircularBufferConfig(unsigned int, "
                             "std::map<unsigned char, tt::DataFormat",),
    "set_page_size": ("tt::tt_metal::CircularBufferConfig::set_page_size(unsigned char, unsigned int)",),
    "TensorAccessorArgs": (f"tt::tt_metal::TensorAccessorArgs::TensorAccessorArgs({_M}MeshBuffer const&, "
                           "Flags<tensor_accessor::ArgConfig>)",),
    "append_to": ("tt::tt_metal::TensorAccessorArgs::append_to(std::vector<unsigned int, std::allocator<unsigned int> >&) const",),
    "CreateKernel": ("tt::tt_metal::CreateKernel(tt::tt_metal::Program&, std::__cxx11::basic_string<char, "
                     f"std::char_traits<char>, std::allocator<char> > const&, {_VARIANT_CORES}, "
                     "std::variant<tt::tt_metal::DataMovementConfig, tt::tt_metal::ComputeConfig> const&)",),
    "SetRuntimeArgs": (f"tt::tt_metal::SetRuntimeArgs(tt::tt_metal::Program const&, unsigned int, {_VARIANT_CORES}, "
                       "std::span<unsigned int const",),
    # templates in distributed.hpp: they call the command queue's virtual enqueue_{write,read}_mesh_buffer
    "EnqueueWriteMeshBuffer": (f"{_M}MeshCommandQueueBase::enqueue_write_mesh_buffer(std::shared_ptr<{_M}MeshBuffer> "
                               "const&, void const*, bool)",),
    "EnqueueReadMeshBuffer": (f"{_M}MeshCommandQueueBase::enqueue_read_mesh_buffer(void*, std::shared_ptr<{_M}MeshBuffer> "
                              "const&, bool)",),
    "MeshWorkload": (f"{_M}MeshWorkload::MeshWorkload()",),
    "add_program": (f"{_M}MeshWorkload::add_program({_M}MeshCoordinateRange const&, tt::tt_metal::Program&&)",),
    "MeshCoordinateRange": (f"{_M}MeshCoordinateRange::MeshCoordinateRange({_M}MeshShape const&)",),
    "shape": (f"{_M}MeshDevice::shape() const",),
    "EnqueueMeshWorkload": (f"{_M}EnqueueMeshWorkload({_M}MeshCommandQueue&, {_M}MeshWorkload&, bool)",),
    "Finish": (f"{_M}Finish({_M}MeshCommandQueue&",),
    "close": (f"{_M}MeshDevice::close()",),
    "address": None,   # MeshBuffer::address(): inline in mesh_buffer.hpp
}

# How each API is spelled at a call site in host.cpp.
_CALL = {
    "create_unit_mesh": r"MeshDevice::create_unit_mesh\(", "mesh_command_queue": r"->mesh_command_queue\(",
    "MeshBuffer::create": r"MeshBuffer::create\(", "CreateProgram": r"\bCreateProgram\(",
    "CoreRangeSet": r"\bCoreRangeSet\b", "CoreRange": r"\bCoreRange\(", "CreateCircularBuffer": r"\bCreateCircularBuffer\(",
    "CircularBufferConfig": r"\bCircularBufferConfig\(", "set_page_size": r"\.set_page_size\(",
    "TensorAccessorArgs": r"\bTensorAccessorArgs\(", "append_to": r"\.append_to\(", "CreateKernel": r"\bCreateKernel\(",
    "SetRuntimeArgs": r"\bSetRuntimeArgs\(", "EnqueueWriteMeshBuffer": r"\bEnqueueWriteMeshBuffer\(",
    "EnqueueReadMeshBuffer": r"\bEnqueueReadMeshBuffer\(", "MeshWorkload": r"\bMeshWorkload\b",
    "add_program": r"\.add_program\(", "MeshCoordinateRange": r"\bMeshCoordinateRange\(", "shape": r"->shape\(\)",
    "EnqueueMeshWorkload": r"\bEnqueueMeshWorkload\(", "Finish": r"\bFinish\(", "close": r"->close\(\)",
    "address": r"->address\(\)",
}
# Anything that looks like a TT-Metalium host API call; each must be one of HOST_API.
_API_LIKE = re.compile(r"\b((?:Create|Enqueue|Set|Get|Close|Finish|Allocate|Read|Write|Load)[A-Z]?\w*)\s*\(")


@dataclass
class HostCheck:
    ok: bool
    checked: dict[str, str]       # api -> matched symbol, or "inline" / "MISSING"
    problems: list[str]


@lru_cache(maxsize=1)
def exported_symbols(lib: str | None = None) -> tuple[str, ...]:
    path = lib or str(libtt_metal())
    try:
        proc = subprocess.run(["nm", "-D", "--demangle", "--defined-only", path], capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        raise TTCheckError(f"cannot list the symbols of {path}: {err}", construct="host check",
                           fix="install binutils (nm)") from None
    return tuple(line.split(" ", 2)[2] for line in proc.stdout.splitlines() if line.count(" ") >= 2)


def check_host(host_cpp: Path, symbols: tuple[str, ...] | None = None) -> HostCheck:
    symbols = symbols if symbols is not None else exported_symbols()
    code = re.sub(r"//[^\n]*", "", Path(host_cpp).read_text())
    checked, problems = {}, []
    for name in sorted(set(_API_LIKE.findall(code))):
        if name not in HOST_API:
            problems.append(f"host.cpp calls {name}(), which is not a TT-Metalium 0.81 host API the generator may use "
                            f"(libtt_metal.so 0.81.1 exports {'it' if any(f'::{name}(' in s for s in symbols) else 'no such function'})")
    for api, pattern in _CALL.items():
        if not re.search(pattern, code):
            continue
        needed = HOST_API[api]
        if needed is None:
            checked[api] = "inline in the SDK headers (not exported; not checkable here)"
            continue
        for prefix in needed:
            match = next((s for s in symbols if s.startswith(prefix)), None)
            if match is None:
                problems.append(f"host.cpp uses {api}, but libtt_metal.so 0.81.1 exports no `{prefix}...`")
                checked[api] = "MISSING"
            else:
                checked[api] = match
    return HostCheck(not problems, checked, problems)
