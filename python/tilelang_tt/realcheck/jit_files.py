"""The per-kernel files TT-Metalium's JIT (``tt_metal/jit_build/genfiles.cpp``, 0.81.1) generates beside a kernel.

* data-movement kernels: ``kernel_includes.hpp`` (``#include "<kernel>"``);
* compute kernels: ``chlkc_{unpack,math,pack,isolate_sfpu}.cpp`` (``#define TRISC_X``, ``defines_generated.h``,
  the kernel) and ``defines_generated.h`` (user defines, then ``NOC_MODE``);
* every kernel: ``chlkc_descriptors.h`` with the CB data formats and tile geometry of the program (taken from
  the plan, i.e. from what the host program creates), DST accumulation/sync mode, math fidelity, approx mode.

The formats of these files follow the format strings embedded in libtt_metal.so 0.81.1.
"""

from __future__ import annotations

from pathlib import Path

from ..device import DATA_FORMAT_ENUM, FACE, FACES_PER_TILE, MATH_FIDELITY_ENUM, TILE, TILE_FORMATS

# Data formats and tile geometry come from the hardware table (device.py).
DATA_FORMAT = DATA_FORMAT_ENUM
TILE_BYTES = {f.value: f.tile_bytes for f in TILE_FORMATS.values()}
DEFAULT_TILE_BYTES = 1088           # tt_hlk_desc's default tile size for CBs without a format (genfiles)
FIDELITY = MATH_FIDELITY_ENUM


def _array(out: list, typ: str, name: str, values) -> None:
    out.append(f"{typ} {name}[{len(values)}] = {{\n    {','.join(str(v) for v in values)}\n}};\n")


def descriptors(num_cbs: int, formats: dict[int, int], fp32_acc: bool, full_sync: bool, fidelity: int,
                approx: bool) -> str:
    fmts = [formats.get(i, 255) for i in range(num_cbs)]
    n = num_cbs
    faces, partial, face_r = [FACES_PER_TILE] * n, [0] * n, [FACE] * n
    narrow, rows, cols = [0] * n, [TILE] * n, [TILE] * n
    sizes = [TILE_BYTES.get(f, DEFAULT_TILE_BYTES) for f in fmts]

    def unpack_dst(f):       # genfiles get_unpack_dst_formats
        if f == 255:
            return 255
        if f == 0:
            return 0 if fp32_acc else 5
        return 5 if f in (6, 7, 15) else 1 if f in (2, 3, 11) else f

    def pack_src(f):         # genfiles get_pack_src_formats
        if f == 255:
            return 255
        if fp32_acc:
            return 0 if f in (0, 5, 6, 7) else f
        return 5 if f in (6, 7, 15, 0) else 1 if f in (2, 3, 11) else f

    faces_c = [min(cols[i] // FACE, faces[i]) for i in range(n)]
    faces_r = [faces[i] // faces_c[i] for i in range(n)]
    scalars = (f"constexpr ckernel::MathFidelity MATH_FIDELITY = static_cast<ckernel::MathFidelity>({fidelity});\n"
               f"constexpr bool APPROX = {'true' if approx else 'false'};\n")
    o = ["#pragma once\n\n", "#if defined(UCK_CHLKC_MATH)\n", '#include "llk_defs.h"\n', scalars, "#endif\n\n",
         "#if defined(UCK_CHLKC_PACK)\n", '#include "llk_defs.h"\n', scalars, "#endif\n\n",
         "#if !defined(UCK_CHLKC_PACK)\n"]
    _array(o, "constexpr uint8_t", "unpack_src_format", fmts)
    _array(o, "constexpr uint8_t", "unpack_dst_format", [unpack_dst(f) for f in fmts])
    geometry = (("tile_num_faces", "uint8_t", faces), ("partial_face", "uint8_t", partial),
                ("tile_face_r_dim", "uint8_t", face_r), ("narrow_tile", "uint8_t", narrow),
                ("tile_r_dim", "uint8_t", rows), ("tile_c_dim", "uint8_t", cols), ("tile_size", "uint16_t", sizes),
                ("num_faces_r_dim", "uint8_t", faces_r), ("num_faces_c_dim", "uint8_t", faces_c))
    for name, typ, vals in geometry:
        _array(o, f"constexpr {typ}", f"unpack_{name}", vals)
    o.append("#endif\n\n#if !defined(UCK_CHLKC_MATH) && !defined(UCK_CHLKC_UNPACK)\n")
    _array(o, "constexpr unsigned char", "pack_src_format", [pack_src(f) for f in fmts])
    _array(o, "constexpr unsigned char", "pack_dst_format", fmts)
    for name, typ, vals in geometry:
        _array(o, f"constexpr {typ}", f"pack_{name}", vals)
    o.append("#if defined(UCK_CHLKC_PACK)\n")
    _array(o, "constexpr uint8_t", "unpack_src_format", fmts)
    o.append("#endif\n#endif\n\n")
    o.append("#if defined(UCK_CHLKC_MATH) || defined(UCK_CHLKC_PACK) || defined(UCK_CHLKC_UNPACK) || "
             "defined(UCK_CHLKC_ISOLATE_SFPU)\n")
    o.append(f"constexpr bool DST_ACCUM_MODE = {'true' if fp32_acc else 'false'};\n"
             f"#define DST_SYNC_MODE DstSync::Sync{'Full' if full_sync else 'Half'}\n#endif\n")
    return "".join(o)


def write(out: Path, kernel: Path, compute: bool, num_cbs: int, cb_formats: dict[int, int], fp32_acc: bool = False,
          full_sync: bool = False, fidelity: int = 4, approx: bool = False, defines: dict[str, str] | None = None):
    out.mkdir(parents=True, exist_ok=True)
    include = f'#include "{kernel}"\n'
    if compute:
        for macro, name in (("TRISC_UNPACK", "chlkc_unpack.cpp"), ("TRISC_MATH", "chlkc_math.cpp"),
                            ("TRISC_PACK", "chlkc_pack.cpp"), ("TRISC_ISOLATE_SFPU", "chlkc_isolate_sfpu.cpp")):
            (out / name).write_text(f'#define {macro}\n#include "defines_generated.h"\n{include}')
        lines = [f"#define {k} {v}\n" for k, v in (defines or {}).items()] + ["#define NOC_MODE 0\n"]
        (out / "defines_generated.h").write_text("".join(lines))
    else:
        (out / "kernel_includes.hpp").write_text(include)
    (out / "chlkc_descriptors.h").write_text(descriptors(num_cbs, cb_formats, fp32_acc, full_sync, fidelity, approx))
