"""TileLang dtypes <-> TT-Metalium data formats: a thin API over the hardware table in ``device.py``."""

from .device import FORMATS, DataFormat
from .errors import TTUnsupportedError

__all__ = ["FORMATS", "DataFormat", "data_format"]


def data_format(dtype, construct: str = "dtype", source: str | None = None) -> DataFormat:
    key = str(dtype)
    if key not in FORMATS:
        raise TTUnsupportedError(
            f"dtype {key!r} has no supported TT data format", construct=construct, source=source,
            fix=f"use one of {sorted(FORMATS)}")
    return FORMATS[key]
