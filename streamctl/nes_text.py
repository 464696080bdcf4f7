"""NebulaStream's CSV output text and its checksum (pure Python, no pyspark).

NES's CSV formatter (``nes-sinks/src/SinksParsing/CSVFormat.cpp`` with
``DataType::formattedBytesToString`` and ``Util::formatFloat`` in nebulastream/nebulastream)
writes a tuple as its fields joined by ``,`` and ended by ``\\n``, no header:

* integers in decimal (``UINT8``/``INT8`` as numbers, not characters);
* floating point values with ``fmt::format("{:.6f}")``, then trailing zeros dropped but one
  digit kept after the point: ``3.141``, ``153.0``, ``-1.826087``;
* ``BOOLEAN`` as ``true``/``false``; ``CHAR`` and ``VARSIZED`` as their characters, in double
  quotes when the sink quotes strings; a NULL as ``NULL``.

NES's checksum sink (``nes-plugins/Sinks/ChecksumSink/ChecksumSink.cpp`` with
``nes-systests/.../Checksum.cpp``) feeds that formatted text to ``Checksum::add``: the number
of tuples is the number of ``\\n`` characters, the checksum the sum of all bytes, each taken as
a (signed) ``char`` and accumulated into a ``size_t`` -- i.e. modulo 2**64. Rows
(1,1,12) ... (1,5,56) give ``5 1505``.

The functions here are that format and that checksum; sinks use them through Spark UDFs, the
readers use :func:`parse_value` to read the text back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, canonical_type

__all__ = [
    "NULL_TEXT",
    "Checksum",
    "format_float",
    "format_row",
    "format_value",
    "line_byte_sum",
    "parse_value",
    "plain_value",
]

NULL_TEXT = "NULL"
_CHECKSUM_MODULUS = 2**64


def format_float(value: float) -> str:
    """NES's ``formatFloat``: six decimals, trailing zeros dropped down to one (``153.0``)."""
    text = f"{value:.6f}"
    point = text.find(".")
    if point < 0:
        return text  # inf, nan
    stripped = text.rstrip("0")
    return stripped + "0" if stripped.endswith(".") else stripped


def format_value(nes_type: str, value: Any, quote_strings: bool = False) -> str:
    """One field as NES's CSV formatter writes it."""
    if value is None:
        return NULL_TEXT
    if nes_type in FLOAT_TYPES:
        return format_float(float(value))
    if nes_type in INTEGER_TYPES:
        return str(int(value))
    if nes_type == "BOOLEAN":
        return "true" if value else "false"
    text = str(value)
    return f'"{text}"' if quote_strings else text


def format_row(
    types: Sequence[str], row: Sequence[Any], delimiter: str = ",", quote_strings: bool = False
) -> str:
    """One tuple as NES's CSV formatter writes it, without the ending ``\\n``."""
    return delimiter.join(
        format_value(nes_type, value, quote_strings)
        for nes_type, value in zip(types, row, strict=True)
    )


def parse_value(nes_type: str, text: str) -> Any:
    """Read back a field written by :func:`format_value` (``NULL`` is None)."""
    nes_type = canonical_type(nes_type)
    if text == NULL_TEXT:
        return None
    if nes_type in INTEGER_TYPES:
        return int(text)
    if nes_type in FLOAT_TYPES:
        return float(text)
    if nes_type == "BOOLEAN":
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text


def _signed_byte_sum(text: str) -> int:
    data = text.encode("utf-8")
    return sum(data) - 256 * sum(1 for byte in data if byte >= 0x80)


@dataclass(frozen=True)
class Checksum:
    """NES's checksum sink result: tuples seen and the byte checksum of their CSV text."""

    tuples: int = 0
    checksum: int = 0

    @classmethod
    def of_lines(cls, lines: Iterable[str]) -> Checksum:
        """The checksum of formatted tuples (each line without its ``\\n``)."""
        count = 0
        total = 0
        for line in lines:
            count += 1
            total += line_byte_sum(line)
        return cls(count, total % _CHECKSUM_MODULUS)

    def __add__(self, other: Checksum) -> Checksum:
        return Checksum(
            self.tuples + other.tuples, (self.checksum + other.checksum) % _CHECKSUM_MODULUS
        )

    def line(self) -> str:
        """As the suite's expected results write it: ``<tuples> <checksum>``."""
        return f"{self.tuples} {self.checksum}"


def line_byte_sum(line: str) -> int:
    """Checksum contribution of one formatted tuple (with its ``\\n``), before the modulus."""
    return _signed_byte_sum(line) + ord("\n")


def plain_value(value: Any) -> Any:
    """A value as read from Spark, with UINT64's ``Decimal`` (scale 0) turned into ``int``."""
    return int(value) if isinstance(value, Decimal) else value
