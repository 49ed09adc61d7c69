"""Block-float (Bfp8_b, Bfp4_b) and integer (Int8, UInt8, Int32, UInt32) tiles, bit-exact, vectorised with NumPy.

A 32x32 tile is four 16x16 faces (face 0 = rows 0-15/cols 0-15, face 1 = rows 0-15/cols 16-31, face 2, face 3),
each face row-major: datum k of a tile (k = 0..1023, "face order") is face k//256, face row (k//16)%16, column k%16.
A BFP tile is ``[64 exponent bytes][datum section]``: exponent byte i is shared by datums 16i..16i+15 (one face row),
then one byte per datum (Bfp8_b: sign bit 7, 7-bit magnitude) or one nibble per datum (Bfp4_b: sign bit 3, 3-bit
magnitude; datum 2j in the low nibble of byte j). A datum means ``(-1)^s * mag * 2^(E-127) / 2^(W-1)`` (W = 7 or 3
magnitude bits, no hidden bit). docs/formats.md has the drawing, the sources and the two rounding rules:

* ``rounding="host"`` is tt-metal 0.81's host conversion (``pack_as_bfp_tiles`` / ``convert_u32_to_bfp``): shared
  exponent = max biased exponent of the 16 float32 values (NaN/Inf count as 255), magnitude = (1.mantissa) shifted
  right by ``shared - exp``, rounded to nearest with ties to even, saturated at 2^W-1; zero and denormal inputs
  encode as 0; the sign of a zero magnitude is cleared.
* ``rounding="device"`` is the Tensix packer (ISA Packers/FormatConversion.md): DST value rounded to E8M6 (nearest,
  ties away from zero; denormals -> +0, NaN -> Inf), shared exponent = max, magnitude rounded to nearest with ties
  away from zero when shifted; Bfp4_b truncates that Bfp8 magnitude to its top 3 bits. The C++ emulator
  (src/tt/sim/blockfloat.cpp) packs this way.

Decoding has the same two flavours: ``decode="host"`` is tt-metal's ``unpack_bfp{8,4}_tiles_into_float_vec``
(sign 1/magnitude 0 -> -0.0, an exponent that underflows below 0 -> +0.0), ``decode="device"`` is the unpacker's
``BFP8ToBF16`` (sign 1/magnitude 0 -> -Inf, the 8-bit exponent wraps). They agree on everything host packing makes.
"""

from __future__ import annotations

import numpy as np

from .device import FACE, TILE, TILE_ELEMS, TILE_FORMATS

# A view of the hardware table (device.TILE_FORMATS) for the formats handled here; no constant is spelled here.
#   enum: tt::DataFormat value; tile_bytes: one 32x32 tile (host Tile::get_tile_size); exp_bytes: shared-exponent
#   section of a tile; datum_bits; mantissa_bits: magnitude bits of a BFP datum; dtype: NumPy dtype of an integer.
FORMATS: dict[str, dict] = {
    f.name: {"enum": f.value, "tile_bytes": f.tile_bytes, "exp_bytes": f.exponent_bytes, "datum_bits": f.datum_bits,
             "mantissa_bits": f.mantissa_bits, "kind": "bfp" if f.kind == "bfp" else "int",
             **({"dtype": np.dtype(f.int_dtype).type} if f.kind == "int" else {})}
    for f in TILE_FORMATS.values() if f.kind in ("bfp", "int")
}


def _fmt(fmt: str) -> dict:
    if fmt not in FORMATS:
        raise ValueError(f"unknown tile format {fmt!r}; expected one of {sorted(FORMATS)}")
    return FORMATS[fmt]


# ---- tile layout: what the host program's data files hold (emulator.py) ------------------------------------------
def tilize(array: np.ndarray) -> np.ndarray:
    """Row-major (..., H, W), H and W multiples of 32 -> (ntiles, 1024) in face order, tiles row-major."""
    a = np.asarray(array)
    if a.ndim < 2 or a.shape[-2] % TILE or a.shape[-1] % TILE:
        raise ValueError(f"shape {a.shape} is not (..., H, W) with H, W multiples of {TILE}; pad it first")
    h, w = a.shape[-2:]
    t = a.reshape(-1, h // TILE, 2, FACE, w // TILE, 2, FACE)
    return np.ascontiguousarray(t.transpose(0, 1, 4, 2, 5, 3, 6)).reshape(-1, TILE_ELEMS)


def untilize(tiles: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """(ntiles, 1024) face-order tiles -> row-major array of ``shape``."""
    shape = tuple(int(s) for s in shape)
    h, w = shape[-2:]
    t = np.asarray(tiles).reshape(-1, h // TILE, w // TILE, 2, 2, FACE, FACE)
    return np.ascontiguousarray(t.transpose(0, 1, 3, 5, 2, 4, 6)).reshape(shape)


# ---- BFP encode ------------------------------------------------------------------------------------------------
def _float_bits(x) -> np.ndarray:
    try:
        import torch
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().to(torch.float32).numpy()
    except ImportError:  # pragma: no cover
        pass
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def _rows(tiles_f32_bits: np.ndarray) -> np.ndarray:
    return tiles_f32_bits.reshape(-1, FACE).astype(np.int64)


def _encode_host(u: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """tt-metal convert_u32_to_bfp<fmt, truncate=false> on rows of 16 float32 bit patterns."""
    exp = (u >> 23) & 0xFF
    shared = exp.max(axis=1, keepdims=True)
    mant = (u & 0x7FFFFF) | 0x800000
    mant = mant >> np.minimum(shared - exp, 31)
    shift = 24 - w
    rem = mant & ((1 << shift) - 1)
    q = mant >> shift
    tie = 1 << (shift - 1)
    q = q + ((rem > tie) | ((rem == tie) & ((q & 1) == 1)))
    q = np.minimum(q, (1 << w) - 1)
    q = np.where(exp == 0, 0, q)                       # +-0 and denormals -> 0
    sign = ((u >> 31) & 1) * (q != 0)                   # sign only on a nonzero magnitude
    return shared[:, 0], (sign << w) | q


def _encode_device(u: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensix packer: DST -> E8M6 (round, ties away) -> BFP8 per 16 datums (round, ties away) -> BFP4 by truncation."""
    exp = (u >> 23) & 0xFF
    special = exp == 0xFF                               # NaN -> Inf, Inf stays
    r = (((u & 0x7FFFFF) | 0x800000) + (1 << 16)) >> 17  # 1.m rounded to 7 significant bits: 64..128
    carry = r == 128
    r = np.where(carry, 64, r)
    exp = exp + carry
    r = np.where(special | (exp >= 0xFF), 64, r)
    exp = np.minimum(exp, 0xFF)
    zero = ((u >> 23) & 0xFF) == 0                      # denormals and -0 -> +0
    r = np.where(zero, 0, r)
    exp = np.where(zero, 0, exp)
    shared = exp.max(axis=1, keepdims=True)
    d = np.minimum(shared - exp, 9)
    guard = np.where(d > 0, (r >> np.maximum(d - 1, 0)) & 1, 0)
    mag = (r >> d) + guard
    if w == 3:
        mag = mag >> 4
    sign = ((u >> 31) & 1) * (mag != 0)
    return shared[:, 0], (sign << w) | mag


def encode_bfp_tiles(tiles, fmt: str, rounding: str = "host") -> np.ndarray:
    """(ntiles, 1024) face-order float32 tiles -> (ntiles, tile_bytes) uint8."""
    f = _fmt(fmt)
    if f["kind"] != "bfp":
        raise ValueError(f"{fmt} is not a block-float format")
    if rounding not in ("host", "device"):
        raise ValueError(f"rounding must be 'host' or 'device', not {rounding!r}")
    u = _rows(_float_bits(tiles).reshape(-1, TILE_ELEMS))
    w = f["mantissa_bits"]
    shared, datums = (_encode_host if rounding == "host" else _encode_device)(u, w)
    n = u.shape[0] // (TILE_ELEMS // FACE)
    out = np.empty((n, f["tile_bytes"]), dtype=np.uint8)
    out[:, :f["exp_bytes"]] = shared.reshape(n, -1).astype(np.uint8)
    d = datums.reshape(n, TILE_ELEMS).astype(np.uint8)
    if f["datum_bits"] == 8:
        out[:, f["exp_bytes"]:] = d
    else:
        out[:, f["exp_bytes"]:] = d[:, 0::2] | (d[:, 1::2] << 4)
    return out


# ---- BFP decode ------------------------------------------------------------------------------------------------
def _split_bfp(data, f: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    raw = np.ascontiguousarray(np.asarray(data, dtype=np.uint8)).reshape(-1, f["tile_bytes"])
    exps = raw[:, :f["exp_bytes"]].astype(np.int64)
    body = raw[:, f["exp_bytes"]:]
    if f["datum_bits"] == 8:
        d = body.astype(np.int64)
    else:
        d = np.empty((raw.shape[0], TILE_ELEMS), dtype=np.int64)
        d[:, 0::2] = body & 0xF
        d[:, 1::2] = body >> 4
    w = f["mantissa_bits"]
    shared = np.repeat(exps, FACE, axis=1)               # datum k uses exponent byte k // 16
    return shared, d >> w, d & ((1 << w) - 1)


def _msb(x: np.ndarray) -> np.ndarray:
    """Index of the top set bit of x (x in 1..255)."""
    return np.floor(np.log2(np.maximum(x, 1))).astype(np.int64)


def decode_bfp_tiles(data, fmt: str, decode: str = "host") -> np.ndarray:
    """(ntiles, tile_bytes) uint8 -> (ntiles, 1024) face-order float32."""
    f = _fmt(fmt)
    if f["kind"] != "bfp":
        raise ValueError(f"{fmt} is not a block-float format")
    shared, sign, mag = _split_bfp(data, f)
    w = f["mantissa_bits"]
    if decode == "host":
        lz = (w - 1) - _msb(mag)                        # shifts that bring the top bit to bit w-1
        man = (mag << (lz + 1)) & ((1 << w) - 1)        # drop the hidden bit
        e = shared - lz
        bits = (sign << 31) | (np.maximum(e, 0) << 23) | (man << (23 - w))
        bits = np.where(mag == 0, sign << 31, np.where(e < 0, 0, bits))
    elif decode == "device":
        mag8 = (mag << (7 - w)) << 1                    # BFP4 -> BFP8 by <<4, then the unpacker's Mag = datum << 1
        lz = 7 - _msb(mag8)
        e = (shared - lz) & 0xFF                        # uint8 exponent arithmetic, as BFP8ToBF16
        bf16 = (sign << 15) | (e << 7) | (((mag8 << lz) & 0xFF) & 0x7E)
        bf16 = np.where(mag8 == 0, np.where(sign == 1, 0xFF80, 0), bf16)
        bits = bf16 << 16
    else:
        raise ValueError(f"decode must be 'host' or 'device', not {decode!r}")
    return bits.astype(np.uint32).view(np.float32)


# ---- integer formats -------------------------------------------------------------------------------------------
def _int_values(array, f: dict) -> np.ndarray:
    try:
        import torch
        if isinstance(array, torch.Tensor):
            array = array.detach().cpu().numpy()
    except ImportError:  # pragma: no cover
        pass
    a = np.asarray(array)
    if a.dtype.kind == "f":
        raise TypeError(f"integer tile formats take integer arrays, not {a.dtype}; round or cast first")
    return a


def int_elements(array, fmt: str) -> np.ndarray:
    """``array`` (torch or NumPy, an integer dtype) as the NumPy dtype of the integer format ``fmt`` (UInt8, Int32,
    UInt32), same shape. Float input (TypeError) and values outside the format's range (ValueError) are refused."""
    f = _fmt(fmt)
    a = _int_values(array, f)
    return np.ascontiguousarray(a if a.dtype == f["dtype"] else _in_range(a.astype(np.int64), fmt, f))


def _in_range(v: np.ndarray, fmt: str, f: dict) -> np.ndarray:
    """Integers ``v`` as the format's dtype; ValueError when one is outside its range."""
    info = np.iinfo(f["dtype"])
    if v.size and (v.min() < info.min or v.max() > info.max):
        raise ValueError(f"values out of range for {fmt} [{info.min}, {info.max}]: {v.min()}..{v.max()}")
    return v.astype(f["dtype"])


def _encode_int(tiles: np.ndarray, fmt: str, f: dict) -> np.ndarray:
    if fmt == "Int8":   # two's complement -> sign-magnitude; -128 saturates to -127
        v = np.clip(tiles.astype(np.int64), -127, 127)
        return (np.where(v < 0, 0x80, 0) | np.abs(v)).astype(np.uint8)
    v = tiles.astype(np.int64) if tiles.dtype.kind in "iub" else tiles
    return np.ascontiguousarray(_in_range(v, fmt, f)).view(np.uint8).reshape(tiles.shape[0], -1)


def _decode_int(raw: np.ndarray, fmt: str, f: dict) -> np.ndarray:
    raw = raw.reshape(-1, f["tile_bytes"])
    if fmt == "Int8":
        mag = (raw & 0x7F).astype(np.int8)
        return np.where(raw & 0x80, -mag, mag).astype(np.int8)
    return np.ascontiguousarray(raw).view(f["dtype"]).reshape(-1, TILE_ELEMS)


# ---- public entry points ---------------------------------------------------------------------------------------
def to_tiles(array, fmt: str, rounding: str = "host") -> np.ndarray:
    """A row-major tensor (..., H, W) (torch or NumPy; H, W multiples of 32) -> flat uint8 bytes of its tiles
    in ``fmt``, tiles row-major over the tile grid and batches concatenated (the emulator's buffer layout)."""
    f = _fmt(fmt)
    if f["kind"] == "bfp":
        tiles = tilize(_float_bits(array).view(np.float32))
        return encode_bfp_tiles(tiles, fmt, rounding).reshape(-1)
    tiles = tilize(_int_values(array, f))
    return _encode_int(tiles, fmt, f).reshape(-1)


def from_tiles(data, fmt: str, shape, decode: str = "host") -> np.ndarray:
    """Bytes of tiles in ``fmt`` -> row-major array of ``shape`` (float32 for BFP, the integer dtype otherwise)."""
    f = _fmt(fmt)
    raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) \
        else np.asarray(data, dtype=np.uint8).reshape(-1)
    shape = tuple(int(s) for s in shape)
    ntiles = int(np.prod(shape, dtype=np.int64)) // TILE_ELEMS
    if raw.size != ntiles * f["tile_bytes"]:
        raise ValueError(f"{raw.size} bytes is not {ntiles} {fmt} tiles of {f['tile_bytes']} B for shape {shape}")
    tiles = decode_bfp_tiles(raw, fmt, decode) if f["kind"] == "bfp" else _decode_int(raw, fmt, f)
    return untilize(tiles, shape)


def quantize(array, fmt: str, rounding: str = "host") -> np.ndarray:
    """Round-trip through ``fmt``: the float32 values a kernel sees for a tensor stored as Bfp8_b/Bfp4_b."""
    shape = np.shape(array)
    return from_tiles(to_tiles(array, fmt, rounding), fmt, shape)


def tile_bytes(fmt: str) -> int:
    return _fmt(fmt)["tile_bytes"]
