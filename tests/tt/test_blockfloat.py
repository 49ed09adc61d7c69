"""Bfp8_b / Bfp4_b / integer tiles (python/tilelang_tt/blockfloat.py, src/tt/sim/blockfloat.cpp).

The reference codec below is written from the format description in docs/formats.md, one datum at a time, with
exact rationals (fractions.Fraction) and Python's own round-half-even, and shares no code with blockfloat.py.
Error bound stated and checked (host rounding, W magnitude bits, shared exponent E, ulp = 2^(E-127-(W-1))):
|dequant - x| <= ulp/2 + 2^(E-127-23) <= (2^-W + 2^-23) * max|x in the 16-datum block| (the 2^-23 term: tt-metal
shifts the 24-bit significand before rounding, dropping a sticky bit), except a datum whose magnitude saturates at
2^W-1, where |error| < ulp. Every datum: |error| <= 2^-(W-1) * max|x in its block|.
"""

import math
import os
import subprocess
import sys
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tilelang_tt import blockfloat as bf

REPO = Path(__file__).resolve().parents[2]
W_OF = {"Bfp8_b": 7, "Bfp4_b": 3}
BFP = sorted(W_OF)


# ---- independent scalar reference, from the format description -----------------------------------------------
def ref_encode_block(bits16, w, rounding):
    """16 float32 bit patterns -> (shared exponent, list of sign|magnitude codes)."""
    fields = [(b >> 31, (b >> 23) & 0xFF, b & 0x7FFFFF) for b in bits16]
    if rounding == "host":
        shared = max(e for _, e, _ in fields)
        codes = []
        for s, e, m in fields:
            if e == 0:                                   # zero or denormal: encodes as 0
                codes.append(0)
                continue
            sig24 = (1 << 23) + m                        # 24-bit significand register, exponent 255 included
            kept = sig24 // 2 ** (shared - e)            # bits shifted out of the register are lost (no sticky bit)
            q = min(round(Fraction(kept, 2 ** (24 - w))), 2 ** w - 1)   # round(): ties to even
            codes.append(s << w | q if q else 0)
        return shared, codes
    # device: E8M6 with round-half-away, then BFP8 with round-half-away, BFP4 = BFP8 magnitude // 16
    e8m6 = []
    for s, e, m in fields:
        if e == 0:
            e8m6.append((0, 0, 0))
        elif e == 255:
            e8m6.append((s, 255, 64))                    # NaN -> Inf
        else:
            q7 = math.floor(Fraction((1 << 23) + m, 2 ** 17) + Fraction(1, 2))
            e8m6.append((s, e + 1, 64) if q7 == 128 else (s, e, q7))
    shared = max(e for _, e, _ in e8m6)
    codes = []
    for s, e, q7 in e8m6:
        mag = math.floor(Fraction(q7, 2 ** (shared - e)) + Fraction(1, 2)) if q7 else 0
        if w == 3:
            mag //= 16
        codes.append(s << w | mag if mag else 0)
    return shared, codes


def ref_decode_datum(code, shared, w, decode):
    """One sign|magnitude code and its shared exponent -> float32 bit pattern."""
    s, mag = code >> w, code & (2 ** w - 1)
    if mag == 0:
        if decode == "host":
            return s << 31                               # -0.0 for sign 1
        return 0xFF800000 if s else 0                    # device: BF16 0xff80 = -Inf
    e = shared
    while mag < 2 ** (w - 1):                            # normalise: top magnitude bit becomes the hidden 1
        mag *= 2
        e -= 1
    frac = mag - 2 ** (w - 1)                            # w-1 fraction bits
    if decode == "host":
        if e < 0:
            return 0
    else:
        e %= 256                                         # the unpacker's 8-bit exponent register
    return s << 31 | e << 23 | frac << (23 - (w - 1))


def ref_encode_tile(tile_f32, fmt, rounding):
    """1024 float32 in face order -> tile bytes: 64 exponents, then datums (Bfp4_b: even datum in low nibble)."""
    w = W_OF[fmt]
    bits = [int(b) for b in np.asarray(tile_f32, dtype=np.float32).view(np.uint32)]  # float() would quiet sNaNs
    exps, codes = [], []
    for i in range(64):
        e, c = ref_encode_block(bits[16 * i:16 * i + 16], w, rounding)
        exps.append(e)
        codes += c
    if w == 7:
        body = codes
    else:
        body = [codes[2 * j] | codes[2 * j + 1] << 4 for j in range(512)]
    return bytes(exps + body)


def ref_decode_tile(tile_bytes, fmt, decode):
    w = W_OF[fmt]
    out = []
    for k in range(1024):
        code = tile_bytes[64 + k] if w == 7 else (tile_bytes[64 + k // 2] >> (4 * (k % 2))) & 0xF
        out.append(ref_decode_datum(code, tile_bytes[k // 16], w, decode))
    return np.array(out, dtype=np.uint32)


# ---- test data ---------------------------------------------------------------------------------------------------
def random_tiles(n, seed):
    """Float32 tiles with per-row scales from 2^-140 to 2^120, ties, sticky-bit ties, zeros, -0, denormals, Inf,
    NaN and arbitrary bit patterns."""
    rng = np.random.default_rng(seed)
    scale = np.exp2(rng.integers(-140, 120, (n, 64, 1))).astype(np.float32)
    x = (rng.standard_normal((n, 64, 16)).astype(np.float32) * scale).reshape(n, 1024)
    b = x.view(np.uint32)
    r = rng.random(b.shape)
    b[r < 0.02] = rng.integers(0, 2 ** 32, int((r < 0.02).sum()), dtype=np.uint64).astype(np.uint32)
    b[(r >= 0.02) & (r < 0.04)] = 0x80000000
    b[(r >= 0.04) & (r < 0.06)] &= 0x807FFFFF                            # denormals
    b[(r >= 0.06) & (r < 0.065)] |= 0x7F800000                           # Inf / NaN
    for lo, hi, pattern in ((0.1, 0.2, 0x10000), (0.2, 0.3, 0x100000), (0.3, 0.35, 0x8000),
                            (0.35, 0.4, 0x10001), (0.4, 0.45, 0x100001)):  # exact and sticky ties
        m = (r >= lo) & (r < hi)
        b[m] = (b[m] & 0xFFFE0000 & ~np.uint32(pattern)) | pattern
    return x


def random_bfp_bytes(n, fmt, seed):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (n, bf.tile_bytes(fmt)), dtype=np.uint8)
    raw[:, :64] = rng.choice(np.array([0, 1, 2, 3, 5, 6, 7, 100, 127, 128, 200, 254, 255], np.uint8), (n, 64))
    return raw


# ---- bit-for-bit against the reference -------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", BFP)
@pytest.mark.parametrize("rounding", ["host", "device"])
def test_encode_matches_reference(fmt, rounding):
    tiles = random_tiles(6, seed=len(fmt) * 10 + len(rounding))
    got = bf.encode_bfp_tiles(tiles, fmt, rounding)
    for t in range(tiles.shape[0]):
        want = np.frombuffer(ref_encode_tile(tiles[t], fmt, rounding), dtype=np.uint8)
        assert np.array_equal(got[t], want), (t, np.flatnonzero(got[t] != want)[:8])


@pytest.mark.parametrize("fmt", BFP)
@pytest.mark.parametrize("decode", ["host", "device"])
def test_decode_matches_reference(fmt, decode):
    raw = random_bfp_bytes(4, fmt, seed=7)
    encoded = bf.encode_bfp_tiles(random_tiles(2, seed=8), fmt)
    data = np.concatenate([raw, encoded])
    got = bf.decode_bfp_tiles(data, fmt, decode).view(np.uint32)
    for t in range(data.shape[0]):
        want = ref_decode_tile(bytes(data[t]), fmt, decode)
        assert np.array_equal(got[t], want), (t, np.flatnonzero(got[t] != want)[:8])


def test_layout_constants():
    f = bf.FORMATS
    assert (f["Bfp8_b"]["enum"], f["Bfp4_b"]["enum"], f["Int8"]["enum"], f["UInt8"]["enum"]) == (6, 7, 14, 30)
    assert (f["Int32"]["enum"], f["UInt32"]["enum"]) == (8, 24)
    assert f["Bfp8_b"]["tile_bytes"] == 64 + 1024 and f["Bfp4_b"]["tile_bytes"] == 64 + 512
    assert [f[k]["tile_bytes"] for k in ("Int8", "UInt8", "Int32", "UInt32")] == [1024, 1024, 4096, 4096]
    # exponent byte i <-> face row i: put one distinct power of two in each face row of a 32x32 tile
    a = np.zeros((32, 32), np.float32)
    for face in range(4):
        for row in range(16):
            a[(face // 2) * 16 + row, (face % 2) * 16 + 3] = 2.0 ** (face * 16 + row - 40)
    t = bf.to_tiles(a, "Bfp8_b")
    assert list(t[:64]) == [127 + i - 40 for i in range(64)]
    assert all(t[64 + 16 * i + 3] == 0x40 for i in range(64)) and np.count_nonzero(t[64:]) == 64
    t4 = bf.to_tiles(a, "Bfp4_b")
    assert all(t4[64 + 8 * i + 1] == 0x40 for i in range(64))    # datum 3 of a row: high nibble of byte 1


# ---- round trips, edge cases, bounds ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", BFP)
@pytest.mark.parametrize("rounding", ["host", "device"])
def test_representable_round_trip(fmt, rounding):
    """Values m * 2^(E-127-(w-1)) with |m| < 2^w and one exponent per row come back exactly."""
    w = W_OF[fmt]
    rng = np.random.default_rng(3)
    e = rng.integers(w, 250, (4, 64, 1))                                  # every datum stays normal
    m = rng.integers(-(2 ** w - 1), 2 ** w, (4, 64, 16))
    m[:, :, 0] = 2 ** (w - 1)                                             # pin the row's exponent to e
    x = (m * np.exp2(e - 127.0 - (w - 1))).astype(np.float32).reshape(4, 1024)
    back = bf.decode_bfp_tiles(bf.encode_bfp_tiles(x, fmt, rounding), fmt)
    assert np.array_equal(back.view(np.uint32), x.view(np.uint32))


@pytest.mark.parametrize("fmt", BFP)
def test_edge_cases(fmt):
    w = W_OF[fmt]
    rows = np.zeros((64, 16), np.float32)
    rows[1] = np.float32(-0.0)                                                        # negative zero
    rows[2] = np.array([2 ** -130, -(2 ** -140), 1e-45, 0] * 4, np.float32)          # denormals only
    rows[3, :2] = [np.finfo(np.float32).max, -np.finfo(np.float32).max]             # max exponent
    rows[4] = [2.0 ** 100, 1.0, 2.0 ** -100, -3.0] + [2.0 ** -20] * 12               # huge and tiny
    rows[5, :3] = [np.inf, -np.inf, 1.0]
    rows[6, :2] = [np.nan, 1.0]
    rows[7, :2] = [2.0 ** 127 * (2 - 2 ** -20), 2.0 ** -126]                          # saturating magnitude
    data = bf.encode_bfp_tiles(rows.reshape(1, 1024), fmt)[0]
    exps, back = data[:64], bf.decode_bfp_tiles(data, fmt)[0].reshape(64, 16)
    assert exps[0] == 0 and exps[1] == 0 and not np.any(back[:3].view(np.uint32))     # all +0.0, no -0.0
    assert exps[2] == 0                                                               # denormals flushed
    assert exps[3] == 254 and back[3, 0] == (2 - 2.0 ** -(w - 1)) * 2.0 ** 127 and back[3, 1] == -back[3, 0]
    assert exps[4] == 227 and back[4, 0] == 2.0 ** 100 and not np.any(back[4, 1:])    # tiny ones vanish
    assert exps[5] == 255 and back[5, 0] == np.inf and back[5, 1] == -np.inf and back[5, 2] == 0
    assert exps[6] == 255 and np.isnan(back[6, 0]) and back[6, 1] == 0                # host keeps NaN
    assert back[7, 0] == (2 - 2.0 ** -(w - 1)) * 2.0 ** 127 and back[7, 1] == 0
    dev = bf.decode_bfp_tiles(bf.encode_bfp_tiles(rows.reshape(1, 1024), fmt, "device"), fmt)[0].reshape(64, 16)
    assert np.isinf(dev[6, 0]) and not np.any(dev[1].view(np.uint32))                 # device: NaN -> Inf, +0
    # a negative-zero code: tt-metal's host unpack gives -0.0, the hardware unpacker -Inf
    neg0 = np.zeros(bf.tile_bytes(fmt), np.uint8)
    neg0[:64], neg0[64] = 127, 0x80 if w == 7 else 0x08
    assert bf.decode_bfp_tiles(neg0, fmt, "host")[0, 0].view(np.uint32) == 0x80000000
    assert bf.decode_bfp_tiles(neg0, fmt, "device")[0, 0] == -np.inf


@pytest.mark.parametrize("fmt", BFP)
def test_error_bound_vs_torch(fmt):
    import torch
    w = W_OF[fmt]
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 64, 96, generator=g) * torch.exp2(torch.randint(-20, 20, (3, 64, 1), generator=g).float())
    q = bf.quantize(x, fmt)
    err = np.abs(q.astype(np.float64) - x.numpy().astype(np.float64))
    blocks = bf.tilize(x.numpy()).reshape(-1, 16)
    shared = np.frexp(np.abs(blocks).max(axis=1))[1] - 1                  # unbiased shared exponent E-127
    ulp = np.exp2(shared - (w - 1))[:, None].repeat(16, 1)
    e = bf.tilize(err).reshape(-1, 16)
    saturated = np.abs(blocks) > (2 ** w - 0.5) * ulp
    assert 0 < saturated.sum() < saturated.size
    assert np.all(e[~saturated] <= (ulp / 2 + ulp * 2.0 ** (w - 1 - 23))[~saturated])
    assert np.all(e[saturated] < ulp[saturated])
    assert np.all(e <= np.abs(blocks).max(axis=1, keepdims=True) * 2.0 ** -(w - 1))


def test_public_api_shapes_and_torch():
    import torch
    x = torch.randn(2, 32, 64, dtype=torch.bfloat16)
    data = bf.to_tiles(x, "Bfp8_b")
    assert data.dtype == np.uint8 and data.size == 2 * 2 * 1088
    back = bf.from_tiles(data.tobytes(), "Bfp8_b", x.shape)
    assert back.shape == (2, 32, 64) and back.dtype == np.float32
    assert np.array_equal(back, bf.from_tiles(data, "Bfp8_b", (2, 32, 64)))
    with pytest.raises(ValueError, match=r"shape \(32, 48\) is not \(\.\.\., H, W\) with H, W multiples of 32"):
        bf.to_tiles(np.zeros((32, 48), np.float32), "Bfp8_b")
    with pytest.raises(ValueError, match=r"4351 bytes is not 4 Bfp8_b tiles of 1088 B"):
        bf.from_tiles(data[:-1], "Bfp8_b", (2, 32, 64))
    with pytest.raises(ValueError, match="unknown tile format 'Bfp2_b'"):
        bf.to_tiles(np.zeros((32, 32)), "Bfp2_b")


def test_integer_formats():
    rng = np.random.default_rng(4)
    i8 = rng.integers(-128, 128, (64, 32), dtype=np.int8)
    raw = bf.to_tiles(i8, "Int8")
    assert raw.size == 2 * 1024
    flat = bf.tilize(i8).reshape(-1).astype(np.int64)
    for k in range(0, flat.size, 37):                                     # sign-magnitude, -128 saturates
        v = max(int(flat[k]), -127)
        assert raw[k] == (0x80 | -v if v < 0 else v)
    assert np.array_equal(bf.from_tiles(raw, "Int8", i8.shape), np.maximum(i8, -127))
    for fmt, dtype in (("UInt8", np.uint8), ("Int32", np.int32), ("UInt32", np.uint32)):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, (2, 32, 64), dtype=dtype, endpoint=True)
        data = bf.to_tiles(a, fmt)
        assert data.size == 4 * bf.tile_bytes(fmt)
        assert np.array_equal(data.view(dtype), bf.tilize(a).reshape(-1))
        assert np.array_equal(bf.from_tiles(data, fmt, a.shape), a)
    import torch
    assert np.array_equal(bf.from_tiles(bf.to_tiles(torch.arange(1024, dtype=torch.int32).reshape(32, 32), "Int32"),
                                        "Int32", (32, 32)), np.arange(1024).reshape(32, 32))
    with pytest.raises(TypeError, match="integer tile formats take integer arrays, not float32"):
        bf.to_tiles(np.zeros((32, 32), np.float32), "Int8")
    with pytest.raises(ValueError, match=r"values out of range for UInt8 \[0, 255\]: 300\.\.300"):
        bf.to_tiles(np.full((32, 32), 300), "UInt8")


# ---- the standalone C++ implementation -------------------------------------------------------------------------
DRIVER = r"""
#include "tt_sim/blockfloat.hpp"
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char** argv) {
    if (argc != 5) return 2;
    const char mode = argv[1][0];
    const uint8_t fmt = static_cast<uint8_t>(std::atoi(argv[2]));
    FILE* in = std::fopen(argv[3], "rb");
    FILE* out = std::fopen(argv[4], "wb");
    if (!in || !out || !tt_sim::bfp::is_bfp(fmt)) return 3;
    const size_t tb = tt_sim::bfp::tile_bytes(fmt);
    std::vector<uint8_t> bytes(tb);
    std::vector<float> floats(tt_sim::bfp::kTileElems);
    for (;;) {
        if (mode == 'p') {
            if (std::fread(floats.data(), 4, floats.size(), in) != floats.size()) break;
            tt_sim::bfp::pack_bfp_tile(floats.data(), fmt, bytes.data());
            std::fwrite(bytes.data(), 1, tb, out);
        } else {
            if (std::fread(bytes.data(), 1, tb, in) != tb) break;
            tt_sim::bfp::unpack_bfp_tile(bytes.data(), fmt, floats.data());
            std::fwrite(floats.data(), 4, floats.size(), out);
        }
    }
    std::fclose(in);
    std::fclose(out);
    return 0;
}
"""


@pytest.fixture(scope="module")
def cxx_driver(tmp_path_factory):
    d = tmp_path_factory.mktemp("bfp_cxx")
    (d / "driver.cpp").write_text(DRIVER)
    exe = d / "driver"
    from tilelang_tt.emulator import sim_install

    generated = sim_install().include          # tt_sim/hw_constants.hpp, generated from device.py at build time
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1", "-I", str(REPO / "src/tt/sim/include"),
                    "-I", str(generated), str(d / "driver.cpp"), str(REPO / "src/tt/sim/blockfloat.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    return exe, d


@pytest.mark.parametrize("fmt", BFP)
def test_cxx_matches_python_device(cxx_driver, fmt):
    exe, d = cxx_driver
    enum = bf.FORMATS[fmt]["enum"]
    tiles = random_tiles(16, seed=21)
    (d / "f.bin").write_bytes(tiles.tobytes())
    subprocess.run([str(exe), "p", str(enum), str(d / "f.bin"), str(d / "p.bin")], check=True)
    packed = np.fromfile(d / "p.bin", dtype=np.uint8).reshape(16, -1)
    assert np.array_equal(packed, bf.encode_bfp_tiles(tiles, fmt, "device"))
    raw = np.concatenate([random_bfp_bytes(16, fmt, seed=22), packed, bf.encode_bfp_tiles(tiles, fmt, "host")])
    (d / "r.bin").write_bytes(raw.tobytes())
    subprocess.run([str(exe), "u", str(enum), str(d / "r.bin"), str(d / "u.bin")], check=True)
    unpacked = np.fromfile(d / "u.bin", dtype=np.uint32).reshape(-1, 1024)
    assert np.array_equal(unpacked, bf.decode_bfp_tiles(raw, fmt, "device").view(np.uint32))


# ---- optional: the real tt-metal 0.81.1 host conversion, when the ttnn wheel is cached --------------------------
ORACLE = r"""
import ctypes, sys, numpy as np
lib, out = sys.argv[1], sys.argv[2]
for dep in sys.argv[3:]:
    ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
L = ctypes.CDLL(lib + "/libtt_metal.so")
class Vec(ctypes.Structure):
    _fields_ = [("b", ctypes.c_void_p), ("e", ctypes.c_void_p), ("c", ctypes.c_void_p)]
NULLOPT = ctypes.create_string_buffer(4096)          # a zeroed std::optional<Tile> is std::nullopt
SPAN = "St4spanIK{}Lm18446744073709551615EEbbRKSt8optionalI{}"
def fn(name):
    f = getattr(L, name)
    f.restype = ctypes.c_void_p
    f.argtypes = [ctypes.POINTER(Vec), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_bool, ctypes.c_bool, ctypes.c_void_p]
    return f
def call(f, arr, ctype):
    v = Vec()
    f(ctypes.byref(v), arr.ctypes.data, arr.size, False, False, ctypes.addressof(NULLOPT))
    n = (v.e - v.b) // 4
    return np.ctypeslib.as_array(ctypes.cast(v.b, ctypes.POINTER(ctype)), (n,)).copy()
x = np.load(out + "/x.npy")
for enum, bits in ((6, 8), (7, 4)):
    pack = fn("_Z17pack_as_bfp_tilesILN2tt10DataFormatE%dEfESt6vectorIjSaIjEE" % enum
              + SPAN.format("T0_", "NS0_8tt_metal4TileEE"))
    unpack = fn("_Z32unpack_bfp%d_tiles_into_float_vec" % bits + SPAN.format("j", "N2tt8tt_metal4TileEE"))
    p = call(pack, x, ctypes.c_uint32)
    np.save(out + "/p%d.npy" % enum, p.view(np.uint8))
    np.save(out + "/u%d.npy" % enum, call(unpack, p, ctypes.c_float))
    raw = np.load(out + "/r%d.npy" % enum).reshape(-1).view(np.uint32)
    np.save(out + "/ru%d.npy" % enum, call(unpack, raw, ctypes.c_float))
"""
MOCK_N150 = """arch:
  0: wormhole_b0
chips:
  0: [0, 0, 0, 0]
chip_unique_ids:
  0: 10226774059
ethernet_connections: []
ethernet_connections_to_remote_devices: []
chips_with_mmio:
  - 0: 0
harvesting:
  0: {noc_translation: true, harvest_mask: 32, dram_harvesting_mask: 0, eth_harvesting_mask: 0, pcie_harvesting_mask: 0}
chip_to_boardtype:
  0: n150
boards:
  -
    - board_id: 72059269369835563
    - board_type: n150
    - chips: [0]
"""


def test_matches_tt_metal_0_81_host_conversion(tmp_path):
    """pack_as_bfp_tiles / unpack_bfp{8,4}_tiles_into_float_vec of the real libtt_metal.so (mock n150 cluster,
    no device); the wheel comes from PyPI (pinned by hash) as for `tilelang-tt check`."""
    from tilelang_tt.realcheck import sdk
    root = sdk.sdk_root()           # downloads and verifies the wheel when it is not cached yet
    wheel = sdk.wheel_path()
    with zipfile.ZipFile(wheel) as zf:
        libs = [m for m in zf.namelist() if m.startswith("ttnn.libs/")
                or (m.startswith("ttnn/build/lib/lib") and not m.startswith("ttnn/build/lib/libtt_metal"))]
        zf.extractall(tmp_path, libs)
    order = ["libnuma", "libhwloc", "libevent_core", "libevent_pthreads", "libopen-pal", "libpmix", "libmpi"]
    deps = [str(tmp_path / m) for o in order for m in libs if Path(m).name.startswith(o + "-")]
    deps += [str(tmp_path / "ttnn/build/lib" / n) for n in ("libtracy.so.0.14.1", "libtt_stl.so", "libtt-umd.so.0")]
    tiles = random_tiles(24, seed=31)
    np.save(tmp_path / "x.npy", tiles.reshape(-1))
    for fmt in BFP:
        np.save(tmp_path / f"r{bf.FORMATS[fmt]['enum']}.npy", random_bfp_bytes(24, fmt, seed=32))
    (tmp_path / "oracle.py").write_text(ORACLE)
    (tmp_path / "n150.yaml").write_text(MOCK_N150)
    env = dict(os.environ, TT_METAL_RUNTIME_ROOT=str(root / "ttnn"),
               TT_METAL_MOCK_CLUSTER_DESC_PATH=str(tmp_path / "n150.yaml"))
    proc = subprocess.run([sys.executable, str(tmp_path / "oracle.py"), str(root / "ttnn/build/lib"), str(tmp_path),
                           *deps], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for fmt in BFP:
        enum = bf.FORMATS[fmt]["enum"]
        packed = np.load(tmp_path / f"p{enum}.npy").reshape(24, -1)
        assert np.array_equal(packed, bf.encode_bfp_tiles(tiles, fmt, "host"))
        assert np.array_equal(np.load(tmp_path / f"u{enum}.npy").view(np.uint32),
                              bf.decode_bfp_tiles(packed, fmt, "host").view(np.uint32).reshape(-1))
        raw = np.load(tmp_path / f"r{enum}.npy")
        assert np.array_equal(np.load(tmp_path / f"ru{enum}.npy").view(np.uint32),
                              bf.decode_bfp_tiles(raw, fmt, "host").view(np.uint32).reshape(-1))
