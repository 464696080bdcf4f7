"""NebulaStream's generator source options: ``GENERATOR_SCHEMA`` fields and the rate (pure
Python: no pyspark, no I/O).

The connector option table (:mod:`streamctl.planner.options`) validates and normalizes a
generator source's ``generator_schema`` and ``rate_config`` with :func:`parse_generator_schema`,
:func:`format_generator_schema` and :func:`parse_rate`; the agent generates the rows with
:mod:`streamctl.spark.generator`, whose docstring gives NES's semantics of each field.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from streamctl.limits import MAX_RANDOM_STRING_LENGTH
from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, canonical_type, integer_range

__all__ = [
    "GeneratorRate",
    "GeneratorSchemaError",
    "NormalField",
    "RandomStringField",
    "SequenceField",
    "WordListField",
    "format_generator_schema",
    "parse_generator_schema",
    "parse_rate",
    "to_float32",
]

StopPolicy = Literal["ALL", "ONE", "NONE"]
STOP_POLICIES: Final[tuple[str, ...]] = ("ALL", "ONE", "NONE")
RATE_TYPES: Final[tuple[str, ...]] = ("FIXED", "SINUS")


class GeneratorSchemaError(ValueError):
    """A generator schema or rate configuration that NES would refuse; the message says why."""


Number = int | float


@dataclass(frozen=True)
class SequenceField:
    """``SEQUENCE <type> <start> <end> <step>``."""

    nes_type: str
    start: Number
    end: Number
    step: Number

    def spec(self) -> str:
        return f"SEQUENCE {self.nes_type} {self.start!r} {self.end!r} {self.step!r}"

    def increments_until_stop(self) -> int | None:
        """Steps until the position reaches ``end`` (None: never; an estimate for floats).

        Exact for integers. Floating point positions round at every step, which can move the
        stop by a step or, when the step is absorbed by rounding, prevent it; the rows
        themselves are always generated with NES's rounding (see
        ``streamctl.spark.generator``).
        """
        if self.start >= self.end:
            return 0
        if self.step <= 0:
            return None
        return math.ceil((self.end - self.start) / self.step)

    def rows_until_stop(self) -> int | None:
        """Rows written until this field is stopped (its last moving row included)."""
        increments = self.increments_until_stop()
        return None if increments is None else max(increments, 1)


@dataclass(frozen=True)
class NormalField:
    """``NORMAL_DISTRIBUTION <FLOAT32|FLOAT64> <mean> <stddev>``."""

    nes_type: str
    mean: float
    stddev: float

    def spec(self) -> str:
        return f"NORMAL_DISTRIBUTION {self.nes_type} {self.mean!r} {self.stddev!r}"


@dataclass(frozen=True)
class WordListField:
    """``WORDLIST <path>`` (relative paths are resolved against the source's data dir)."""

    path: str

    def spec(self) -> str:
        return f"WORDLIST {self.path}"


@dataclass(frozen=True)
class RandomStringField:
    """``RANDOMSTR <min length> <max length>``."""

    min_length: int
    max_length: int

    def spec(self) -> str:
        return f"RANDOMSTR {self.min_length} {self.max_length}"


GeneratorField = SequenceField | NormalField | WordListField | RandomStringField


@dataclass(frozen=True)
class GeneratorRate:
    """Tuples per second: ``FIXED`` at ``rate``; ``SINUS`` around an average of ``rate``."""

    kind: str
    rate: float
    frequency: float | None = None

    def config_text(self) -> str:
        if self.kind == "FIXED":
            return f"emit_rate {self.rate!r}"
        return f"amplitude {self.rate!r}, frequency {self.frequency!r}"


# --- parsing ---------------------------------------------------------------------------------

_INTEGER_TEXT = re.compile(r"^-?[0-9]+$")
_UNSIGNED_TEXT = re.compile(r"^[0-9]+$")
_FLOAT_TEXT = re.compile(r"^-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")


_MAX_INTEGER_DIGITS = 20
"""More significant digits than any 64-bit integer has (``UINT64``: 20)."""


def decimal_integer(text: str) -> int | None:
    """The integer a decimal text (``[+-]?[0-9]+``, matched by the caller) stands for, or None
    when it has more than 20 significant digits: past every 64-bit range, so out of range for
    every caller, and read without Python's limit (it refuses texts of 4,300 digits and more,
    leading zeros counted)."""
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > _MAX_INTEGER_DIGITS:
        return None
    return -int(digits) if text.startswith("-") else int(digits)


def _parse_number(text: str, nes_type: str, what: str, line: str) -> Number:
    if nes_type in INTEGER_TYPES:
        if not _INTEGER_TEXT.match(text):
            raise GeneratorSchemaError(f"{what} {text!r} of {line!r} is not a {nes_type} integer")
        low, high = integer_range(nes_type)
        value = decimal_integer(text)
        if value is None:
            raise GeneratorSchemaError(f"{what} {text[:40]!r}... of a line is outside {nes_type}")
        if not low <= value <= high:
            raise GeneratorSchemaError(f"{what} {text!r} of {line!r} is outside {nes_type}")
        return value
    if not _FLOAT_TEXT.match(text):
        raise GeneratorSchemaError(f"{what} {text!r} of {line!r} is not a number")
    value_f = float(text)
    if not math.isfinite(value_f):
        raise GeneratorSchemaError(f"{what} {text[:40]!r} of a line is not a finite number")
    return to_float32(value_f) if nes_type == "FLOAT32" else value_f


def _numeric_type(text: str, kind: str, line: str, allowed: frozenset[str]) -> str:
    try:
        nes_type = canonical_type(text)
    except ValueError:
        nes_type = ""
    if nes_type not in allowed:
        raise GeneratorSchemaError(
            f"{kind} type {text!r} in {line!r} is not supported; expected one of "
            f"{', '.join(sorted(allowed))}"
        )
    return nes_type


def _parse_sequence(words: list[str], line: str) -> SequenceField:
    if len(words) != 5:
        raise GeneratorSchemaError(f"{line!r}: expected SEQUENCE <type> <start> <end> <step>")
    nes_type = _numeric_type(words[1], "SEQUENCE", line, INTEGER_TYPES | FLOAT_TYPES)
    start, end, step = (
        _parse_number(text, nes_type, what, line)
        for text, what in zip(words[2:], ("start", "end", "step"), strict=True)
    )
    field = SequenceField(nes_type, start, end, step)
    if nes_type in INTEGER_TYPES:
        _check_no_overflow(field, line)
    elif not all(math.isfinite(v) for v in (start, end, step)):
        raise GeneratorSchemaError(f"{line!r}: start, end and step must be finite")
    elif start < end and step > 0 and not math.isfinite((end - start) / step):
        raise GeneratorSchemaError(f"{line!r}: more steps from start to end than can be counted")
    return field


def _check_no_overflow(field: SequenceField, line: str) -> None:
    """Refuse integer sequences whose position would wrap around (NES wraps silently)."""
    if field.start >= field.end or field.step == 0:
        return
    if field.step < 0:
        raise GeneratorSchemaError(
            f"{line!r}: a negative step never reaches end {field.end}; it would wrap around"
        )
    increments = field.increments_until_stop()
    assert increments is not None
    _, high = integer_range(field.nes_type)
    if int(field.start) + increments * int(field.step) > high:
        raise GeneratorSchemaError(
            f"{line!r}: the position overflows {field.nes_type} before it reaches end {field.end}"
        )


def _parse_normal(words: list[str], line: str) -> NormalField:
    if len(words) != 4:
        raise GeneratorSchemaError(
            f"{line!r}: expected NORMAL_DISTRIBUTION <FLOAT32|FLOAT64> <mean> <stddev>"
        )
    nes_type = _numeric_type(words[1], "NORMAL_DISTRIBUTION", line, FLOAT_TYPES)
    mean = float(_parse_number(words[2], "FLOAT64", "mean", line))
    stddev = float(_parse_number(words[3], "FLOAT64", "stddev", line))
    if stddev < 0:
        raise GeneratorSchemaError(f"{line!r}: stddev must be non-negative")
    return NormalField(nes_type, mean, stddev)


def _parse_wordlist(words: list[str], line: str) -> WordListField:
    if len(words) != 2:
        raise GeneratorSchemaError(f"{line!r}: expected WORDLIST <path>")
    return WordListField(words[1])


def _parse_random_string(words: list[str], line: str) -> RandomStringField:
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses
    if len(words) != 3 or not all(_UNSIGNED_TEXT.match(w) for w in words[1:]):
        raise GeneratorSchemaError(f"{line!r}: expected RANDOMSTR <min length> <max length>")
    low, high = (decimal_integer(w) for w in words[1:])
    if low is None or high is None or max(low, high) > MAX_RANDOM_STRING_LENGTH:
        raise GeneratorSchemaError(
            f"{line[:80]!r}: a length is longer than {MAX_RANDOM_STRING_LENGTH} characters"
        )
    if low <= 0 or high <= 0 or low > high:
        raise GeneratorSchemaError(f"{line!r}: need 0 < min length <= max length")
    return RandomStringField(low, high)


_FIELD_PARSERS: dict[str, Callable[[list[str], str], GeneratorField]] = {
    "SEQUENCE": _parse_sequence,
    "NORMAL_DISTRIBUTION": _parse_normal,
    "WORDLIST": _parse_wordlist,
    "RANDOMSTR": _parse_random_string,
}


def parse_generator_schema(text: str) -> tuple[GeneratorField, ...]:
    """Parse ``GENERATOR_SCHEMA`` (fields separated by ``,`` or newlines)."""
    lines = [part.strip() for part in re.split(r"[,\n]", str(text))]
    lines = [line for line in lines if line]
    if not lines:
        raise GeneratorSchemaError("the generator schema is empty")
    fields: list[GeneratorField] = []
    for line in lines:
        words = line.split()
        parser = _FIELD_PARSERS.get(words[0].upper())
        if parser is None:
            raise GeneratorSchemaError(
                f"unknown generator field {words[0]!r} in {line!r}; expected one of "
                f"{', '.join(_FIELD_PARSERS)}"
            )
        fields.append(parser(words, line))
    return tuple(fields)


def format_generator_schema(fields: Sequence[GeneratorField]) -> str:
    """The canonical text of a parsed schema (parsing it again gives the same fields)."""
    return ", ".join(field.spec() for field in fields)


def parse_rate(kind: str, config: str | None) -> GeneratorRate:
    """Parse ``GENERATOR_RATE_TYPE`` with ``GENERATOR_RATE_CONFIG``.

    ``FIXED``: ``emit_rate <tuples/s>`` (default ``emit_rate 1000``); ``SINUS``:
    ``amplitude <A>`` and ``frequency <F>`` separated by ``,`` or newlines.
    """
    kind = str(kind).upper()
    if kind not in RATE_TYPES:
        raise GeneratorSchemaError(f"rate type {kind!r}; expected one of {', '.join(RATE_TYPES)}")
    text = "emit_rate 1000" if config is None else str(config)
    settings: dict[str, float] = {}
    for part in re.split(r"[,\n]", text):
        words = part.split()
        if not words:
            continue
        if len(words) != 2 or not _FLOAT_TEXT.match(words[1]):
            raise GeneratorSchemaError(f"rate config {text!r}: expected '<key> <number>' pairs")
        number = float(words[1])
        if not math.isfinite(number):
            raise GeneratorSchemaError(f"rate config {text[:80]!r}: {words[0]} is not finite")
        settings[words[0].lower()] = number
    expected = {"FIXED": {"emit_rate"}, "SINUS": {"amplitude", "frequency"}}[kind]
    if set(settings) != expected:
        raise GeneratorSchemaError(
            f"rate config {text!r} for {kind}: expected {' and '.join(sorted(expected))}"
        )
    if kind == "FIXED":
        if settings["emit_rate"] <= 0:
            raise GeneratorSchemaError(f"rate config {text!r}: emit_rate must be positive")
        return GeneratorRate("FIXED", settings["emit_rate"])
    if settings["amplitude"] <= 0:
        raise GeneratorSchemaError(f"rate config {text!r}: amplitude must be positive")
    return GeneratorRate("SINUS", settings["amplitude"], settings["frequency"])


# --- numbers ---------------------------------------------------------------------------------


def to_float32(value: float) -> float:
    """``value`` rounded to single precision (FLOAT32), as NES stores it."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)
