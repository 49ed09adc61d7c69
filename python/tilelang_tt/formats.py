"""TileLang dtypes <-> TT-Metalium data formats (DataFormat enum values and tile sizes from the 0.81 wheel)."""

from dataclasses import dataclass

from .errors import TTUnsupportedError


@dataclass(frozen=True)
class DataFormat:
    name: str          # tt::DataFormat enumerator
    value: int         # its numeric value (tensix_types.h)
    tile_bytes: int    # bytes of one 32x32 tile
    element_bytes: int


FORMATS: dict[str, DataFormat] = {
    "bfloat16": DataFormat("Float16_b", 5, 2048, 2),
    "float16": DataFormat("Float16", 1, 2048, 2),
    "float32": DataFormat("Float32", 0, 4096, 4),
}


def data_format(dtype, construct: str = "dtype", source: str | None = None) -> DataFormat:
    key = str(dtype)
    if key not in FORMATS:
        raise TTUnsupportedError(
            f"dtype {key!r} has no supported TT data format", construct=construct, source=source,
            fix=f"use one of {sorted(FORMATS)}")
    return FORMATS[key]
