"""Compile every generated kernel against the real TT-Metalium 0.81 headers, the way the JIT build would.

Each kernel is compiled through the real firmware wrapper of the processor the plan assigns it
(``ncrisck.cc`` for the reader on RISCV_1, ``brisck.cc`` for the writer on RISCV_0, ``trisck.cc`` three times
for the compute kernel: UNPACK, MATH, PACK), with the JIT's flags, warnings and defines, the compile-time args
the host program passes (TensorAccessorArgs expanded exactly as the host computes them), and a
``chlkc_descriptors.h`` holding the program's CB data formats. The compiler is Debian's
``riscv64-unknown-elf-g++`` (GCC 12, rv32im/ilp32, so ``int32_t`` is ``long`` as in SFPI) in
``-fsyntax-only`` mode: what it cannot see is listed in docs/real_sdk.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..artifact import staged_directory
from ..device import get_device
from ..progress import bar
from . import jit_files, sfpi_stub
from .sdk import TTCheckError, cache_root, headers_dir

CXX = "riscv64-unknown-elf-g++"
COMMON = ("-std=c++17 -ffast-math -fno-finite-math-only -fsigned-zeros -fno-associative-math -fno-exceptions "
          "-fno-rtti -fno-use-cxa-atexit").split()
WARN = ("-Wall -Werror -Wno-error=deprecated-declarations -Wno-error=multistatement-macros -Wno-error=parentheses "
        "-Wno-error=unused-but-set-variable -Wno-unused-variable -Wno-unused-function").split()
ARCH = {
    "wormhole_b0": dict(define="ARCH_WORMHOLE", llk="wormhole_b0", inc="wormhole", defs="wormhole/wormhole_b0_defines",
                        dev=["-DIS_NOT_POW2_NUM_DRAM_BANKS=1", "-DLOG_BASE_2_OF_NUM_L1_BANKS=6", "-DNUM_DRAM_BANKS=12",
                             "-DNUM_L1_BANKS=64", "-DPCIE_NOC_X=0", "-DPCIE_NOC_Y=3"]),
    "blackhole": dict(define="ARCH_BLACKHOLE", llk="blackhole", inc="blackhole", defs="blackhole/blackhole_defines",
                      dev=["-DLOG_BASE_2_OF_NUM_DRAM_BANKS=3", "-DIS_NOT_POW2_NUM_L1_BANKS=1", "-DNUM_DRAM_BANKS=8",
                           "-DNUM_L1_BANKS=130", "-DPCIE_NOC_X=19", "-DPCIE_NOC_Y=24"]),
}
_ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.*)$", re.M)


@dataclass
class TUResult:
    kernel: str        # kernels/reader.cpp
    unit: str          # ncrisc | brisc | trisc0 (unpack) | trisc1 (math) | trisc2 (pack)
    ok: bool
    seconds: float
    output: str

    def first_error(self) -> str:
        m = _ERROR.search(self.output)
        if m is None:
            lines = [ln for ln in self.output.splitlines() if ln.strip()]
            return lines[0] if lines else "compiler failed without a message"
        return f"{m.group('file')}:{m.group('line')}: {m.group('msg')}"


def toolchain_available() -> bool:
    return shutil.which(CXX) is not None and Path("/usr/lib/picolibc/riscv64-unknown-elf/include").is_dir()


def _cxx_prefix() -> list[str]:
    if not toolchain_available():
        raise TTCheckError(f"{CXX} with picolibc is not installed", construct="real-header check",
                           fix="apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf g++-12-multilib")
    cfg = cache_root() / "rv32_cxxconfig"
    if not (cfg / "bits" / "c++config.h").is_file():
        # Debian's bare riscv GCC ships no libstdc++: borrow the host's headers with a 32-bit, no-OS target config.
        src = Path("/usr/include/x86_64-linux-gnu/c++/12/32/bits")
        if not src.is_dir():
            raise TTCheckError("the 32-bit libstdc++ configuration is missing", construct="real-header check",
                               fix="apt-get install g++-12-multilib")
        with staged_directory(cfg) as tmp:
            shutil.copytree(src, tmp / "bits")
            (tmp / "bits" / "os_defines.h").write_text(
                "#ifndef _GLIBCXX_OS_DEFINES\n#define _GLIBCXX_OS_DEFINES 1\n#endif\n")
            shutil.copy(tmp / "bits" / "gthr-single.h", tmp / "bits" / "gthr-default.h")
            config = tmp / "bits" / "c++config.h"
            config.write_text(config.read_text().replace("#define _GLIBCXX_HAS_GTHREADS 1", "/* no gthreads */"))
    return [CXX, "-march=rv32im", "-mabi=ilp32", "-isystem", "/usr/include/c++/12", "-isystem", str(cfg),
            "-isystem", "/usr/lib/picolibc/riscv64-unknown-elf/include",
            "-Wno-attributes=gnu::rvtt_l1_ptr", "-Wno-attributes=gnu::rvtt_reg_ptr"]


def gcc12_overlay(llk: str) -> Path:
    """Headers the check's GCC 12 cannot parse, rewritten without changing their meaning, searched first.

    ``sfpu/ckernel_sfpu_fill.h`` ends an ``if constexpr`` chain in a template with ``static_assert(false, ...)``:
    accepted by the SDK's SFPI toolchain (GCC >= 13, P2593) but rejected by GCC 12 at the template's definition,
    so any kernel including ``fill.h`` would fail the check. The copy makes the assertion value-dependent
    (``INSTRUCTION_MODE != INSTRUCTION_MODE``): still false whenever that branch is instantiated."""
    out = cache_root() / f"gcc12_overlay-0.81.1-{llk}"
    target = out / "sfpu" / "ckernel_sfpu_fill.h"
    if not target.is_file():
        source = headers_dir() / "tt_metal" / "tt-llk" / f"tt_llk_{llk}" / "common" / "inc" / "sfpu" / "ckernel_sfpu_fill.h"
        text = source.read_text()
        patched = text.replace('static_assert(false, "INSTRUCTION_MODE', 'static_assert(INSTRUCTION_MODE != '
                                                                        'INSTRUCTION_MODE, "INSTRUCTION_MODE')
        for name in ("ckernel_sfpu_converter.h", "ckernel_sfpu_load_config.h"):   # its siblings, from the SDK
            patched = patched.replace(f'#include "{name}"', f'#include "{source.parent / name}"')
        with staged_directory(out) as tmp:
            (tmp / "sfpu").mkdir(parents=True)
            (tmp / "sfpu" / "ckernel_sfpu_fill.h").write_text(patched)
    return out


def sfpi_stub_dir() -> Path:
    out = cache_root() / "sfpi_stub-0.81.1-v2"
    if not (out / "sfpi.h").is_file():
        with staged_directory(out) as tmp:
            sfpi_stub.generate(headers_dir() / "tt_metal", tmp)
    return out


def compile_args_for(plan: dict, role: str) -> list[int]:
    """The compile-time args the host program passes: TensorAccessorArgs(buffer) = [ArgsConfig, aligned page]."""
    dev = get_device(plan["device"]["arch"])
    buffers = {b["name"]: b for b in plan["buffers"]}
    out = []
    for arg in plan["kernels"][role]["compile_args"]:
        b = buffers[arg["tensor_accessor"]]
        dram = b["placement"] == "DRAM"
        align = dev.dram_alignment if dram else dev.l1_alignment
        out += [2 if dram else 0, -(-b["page_size"] // align) * align]
    return out


def units(plan: dict, artifact: Path, work: Path) -> list[tuple[str, str, Path, list[str]]]:
    """(kernel, unit, cwd, argv) for every translation unit the JIT would build."""
    arch = ARCH[plan["device"]["arch"]]
    r = headers_dir()
    tm = r / "tt_metal"
    base_inc = ["-I.", "-I..", f"-I{r}", f"-I{r}/ttnn", f"-I{r}/ttnn/cpp", f"-I{tm}", f"-I{tm}/include",
                f"-I{tm}/hw/inc", f"-I{tm}/hostdevcommon/api", f"-I{tm}/hw/inc/debug", f"-I{tm}/api/",
                f"-I{tm}/api/tt-metalium/"]
    hal_inc = [f"-I{tm}/hw/ckernels/{arch['llk']}/metal/common", f"-I{tm}/hw/ckernels/{arch['llk']}/metal/llk_io",
               f"-I{tm}/hw/inc/internal/tt-1xx", f"-I{tm}/hw/inc/internal/tt-1xx/{arch['inc']}",
               f"-I{tm}/hw/inc/internal/tt-1xx/{arch['defs']}", f"-I{tm}/hw/inc/internal/tt-1xx/{arch['inc']}/noc",
               f"-I{tm}/tt-llk/tt_llk_{arch['llk']}/common/inc", f"-I{tm}/tt-llk/tt_llk_{arch['llk']}/llk_lib",
               f"-I{tm}/tt-llk/common", f"-I{tm}/tt-llk/tools/include"]
    fw = tm / "hw" / "firmware" / "src" / "tt-1xx"
    common_defs = arch["dev"] + ["-DTENSIX_FIRMWARE", "-DLOCAL_MEM_EN=0"]
    cb_formats = {cb["index"]: jit_files.DATA_FORMAT[cb["format"]] for cb in plan["cbs"]}
    num_cbs = plan["device"]["num_cbs"]
    out = []
    for role in ("reader", "writer", "compute"):
        k = plan["kernels"][role]
        source = (artifact / k["file"]).resolve()
        kdir = work / role
        compute = role == "compute"
        compute_cfg = dict(fp32_acc=bool(k.get("fp32_dest_acc_en", False)),
                           fidelity=jit_files.FIDELITY[k.get("math_fidelity", "HiFi4")]) if compute else {}
        jit_files.write(kdir, source, compute, num_cbs, cb_formats, **compute_cfg)
        ct = compile_args_for(plan, role)
        cta = [f"-DKERNEL_COMPILE_TIME_ARGS={','.join(map(str, ct))}"] if ct else []
        if compute:
            sfpi = sfpi_stub_dir()
            for t, name in ((0, "UNPACK"), (1, "MATH"), (2, "PACK")):
                argv = ["-fsyntax-only", "-O3", *COMMON, *WARN, *base_inc, f"-I{sfpi}",
                        f"-I{gcc12_overlay(arch['llk'])}", *hal_inc,
                        f"-I{tm}/hw/ckernels/{arch['llk']}/metal/llk_api",
                        f"-I{tm}/hw/ckernels/{arch['llk']}/metal/llk_api/llk_sfpu", f"-I{fw}", str(fw / "trisck.cc"),
                        *common_defs, f"-DPROCESSOR_INDEX={t + 2}", "-DPROGRAMMABLE_CORE_TYPE=0",
                        f"-DUCK_CHLKC_{name}", f"-DCOMPILE_FOR_TRISC={t}", f"-D{arch['define']}",
                        "-DDISPATCH_MESSAGE_ADDR=0", "-DKERNEL_BUILD", *cta]
                out.append((k["file"], f"trisc{t} ({name.lower()})", kdir / f"trisc{t}", argv))
        else:
            proc = 1 if k["processor"] == "RISCV_1" else 0
            risc = "ncrisc" if proc == 1 else "brisc"
            noc = 1 if k["noc"] == "RISCV_1_default" else 0
            argv = ["-fsyntax-only", "-Os", *COMMON, *WARN, "-fno-tree-loop-distribute-patterns", *base_inc, *hal_inc,
                    f"-I{fw}", str(fw / f"{risc}k.cc"), *common_defs, f"-DPROCESSOR_INDEX={proc}",
                    "-DPROGRAMMABLE_CORE_TYPE=0", f"-DCOMPILE_FOR_{risc.upper()}", f"-D{arch['define']}",
                    "-DDISPATCH_MESSAGE_ADDR=0", "-DKERNEL_BUILD", f"-DNOC_INDEX={noc}", "-DNOC_MODE=0", *cta]
            out.append((k["file"], risc, kdir / risc, argv))
    return out


# Translation units this process has compiled, by fingerprint: (ok, compiler output). Artifacts of a test session
# share many kernels (the same TileLang kernel compiled for each test that runs it); a unit with the same flags,
# JIT files, kernel source and local headers compiles the same way, so it is compiled once.
_COMPILED: dict[str, tuple[bool, str]] = {}
_COMPILED_LOCK = threading.Lock()


def _fingerprint(argv: list[str], cwd: Path, work: Path, source: Path) -> str:
    """What a unit's compile depends on besides the SDK: its flags (the scratch directory abstracted), the JIT files
    written for it (the kernel's path abstracted), the kernel source and the headers beside it."""
    h = hashlib.sha256()
    for a in argv:
        h.update(a.replace(str(work), "<work>").encode() + b"\0")
    for f in sorted(p for p in cwd.parent.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + f.read_text().replace(str(source), "<kernel>").encode() + b"\0")
    h.update(source.read_bytes())
    for f in sorted(source.parent.glob("*.h")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def check_kernels(plan: dict, artifact: Path, jobs: int | None = None) -> list[TUResult]:
    import time

    prefix = _cxx_prefix()
    with tempfile.TemporaryDirectory(prefix="tt-check-") as tmp:
        todo = units(plan, Path(artifact), Path(tmp))

        def run(unit):
            kernel, name, cwd, argv = unit
            cwd.mkdir(parents=True, exist_ok=True)
            key = _fingerprint(argv, cwd, Path(tmp), (Path(artifact) / kernel).resolve())
            with _COMPILED_LOCK:
                done = _COMPILED.get(key)
            if done is not None:
                return TUResult(kernel, name, done[0], 0.0, done[1])
            t0 = time.perf_counter()
            proc = subprocess.run(prefix + argv, cwd=cwd, capture_output=True, text=True)
            with _COMPILED_LOCK:
                _COMPILED[key] = (proc.returncode == 0, proc.stdout + proc.stderr)
            return TUResult(kernel, name, proc.returncode == 0, time.perf_counter() - t0, proc.stdout + proc.stderr)

        with ThreadPoolExecutor(max_workers=jobs or max(2, os.cpu_count() or 2)) as pool:
            return list(bar(pool.map(run, todo), total=len(todo), desc=f"{plan['kernel']}: kernels",
                            unit="TU", leave=False))
