"""TileLang dtypes <-> TT-Metalium data formats: a thin API over the hardware table in ``device.py``."""

from .device import (BLOCK_FLOAT_STORAGE, FLOAT8_DTYPES, FLOAT8_READ_FORMAT, FLOAT8_WRITE_FORMAT, FORMATS,
                     INDEX_FORMATS, INT_OUTPUT_FORMATS, READ_ONLY_FORMATS, STORAGE_TILE_FORMAT, TILE_FORMATS,
                     TILE_INT_AS_FLOAT, DataFormat)
from .errors import TTUnsupportedError

__all__ = ["FORMATS", "TILE_FORMATS", "DataFormat", "data_format", "tensor_format", "tile_format"]


def tile_format(dtype, construct: str = "dtype", source: str | None = None) -> DataFormat:
    """The format of a tile buffer of ``dtype``: its data format, or the float format an int32 fragment computes
    in (``device.TILE_INT_AS_FLOAT``)."""
    if str(dtype) in TILE_INT_AS_FLOAT:
        return TILE_FORMATS[TILE_INT_AS_FLOAT[str(dtype)]]
    if str(dtype) in FLOAT8_DTYPES:      # as the reader fills it from a float8 tensor (compute-written: Float32)
        return TILE_FORMATS[FLOAT8_READ_FORMAT]
    return data_format(dtype, construct, source)


def data_format(dtype, construct: str = "dtype", source: str | None = None) -> DataFormat:
    key = str(dtype)
    if key not in FORMATS:
        extra = ""
        if key in INDEX_FORMATS:
            extra = (f"; {key} tensors are index tensors (block tables, offsets) whose elements T.copy offsets "
                     f"read (X[Table[b, j] * 32, 0]), never a computed value")
        elif key in READ_ONLY_FORMATS:
            extra = (f"; {key} tensors are read-only weights (stored as {READ_ONLY_FORMATS[key]}) that a T.Parallel "
                     f"casts to a float dtype, never a computed result")
        fix = f"use one of {sorted(FORMATS)}"
        raise TTUnsupportedError(
            f"dtype {key!r} has no supported TT data format{extra}", construct=construct, source=source, fix=fix)
    return FORMATS[key]


def tensor_format(dtype, annotated: str | None, io: str, construct: str, source: str | None = None) -> DataFormat:
    """The tile format of a tensor: ``annotated`` (T.TTShard(format=...)) if given, else its dtype's format.
    ``io``: "input" for tensors the kernel only reads (int8 allowed), else "output"."""
    key = str(dtype)
    if annotated:
        allowed = BLOCK_FLOAT_STORAGE.get(key, ())
        if annotated not in allowed:
            raise TTUnsupportedError(
                f"a {key} tensor cannot be stored as {annotated}", construct=construct, source=source,
                fix=f"{key} tensors may be stored as {list(allowed)}" if allowed else
                    "store block-float tensors as bfloat16 / float32 / int8 in TileLang")
        if key == "int8" and io != "input":
            data_format(dtype, construct, source)   # the read-only error
        return TILE_FORMATS[STORAGE_TILE_FORMAT.get(annotated, annotated)]
    if key in FLOAT8_DTYPES:
        if io == "inout":
            raise TTUnsupportedError(
                f"float8 {construct} is read and written by the kernel: TT has no float8 format, so the host writes "
                f"float8 inputs as bfloat16 pages and reads float8 results from float32 pages it rounds",
                construct=construct, source=source, fix="write the results into a separate float8 tensor")
        return TILE_FORMATS[FLOAT8_READ_FORMAT if io == "input" else FLOAT8_WRITE_FORMAT]
    if key in READ_ONLY_FORMATS and io == "input":
        return TILE_FORMATS[READ_ONLY_FORMATS[key]]
    if key in INDEX_FORMATS and io == "input":
        return TILE_FORMATS[INDEX_FORMATS[key]]
    if key in INT_OUTPUT_FORMATS and io == "output":
        return TILE_FORMATS[INT_OUTPUT_FORMATS[key]]
    return data_format(dtype, construct, source)
