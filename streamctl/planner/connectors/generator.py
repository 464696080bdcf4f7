"""NebulaStream's generator source, reproduced row for row (pure Python, no pyspark).

What NES does (read in ``nes-plugins/Sources/GeneratorSource/{Generator,GeneratorFields,
GeneratorSource}.cpp`` of nebulastream/nebulastream and of the ESPAT-Orga/nebulastream-espat
fork the conformance suite comes from):

* ``GENERATOR_SCHEMA`` is a list of fields separated by ``,`` or newlines. Each row is the
  fields' text joined by ``,`` and ended by ``\\n`` -- CSV text that the source's CSV parser
  then reads, exactly like a file source. Numbers are written by ``std::ostream``: integers
  in decimal, floating point numbers with ``%g`` (six significant digits).
* ``SEQUENCE <type> <start> <end> <step>`` writes its position, then adds ``step`` while the
  position is below ``end``; when the position reaches ``end`` the field is *stopped* and
  keeps writing the same value. So ``SEQUENCE UINT64 0 5 1`` writes 0,1,2,3,4,5,5,5,...
  and is stopped after its fifth row (the row that wrote 4).
* ``NORMAL_DISTRIBUTION <FLOAT32|FLOAT64> <mean> <stddev>``: libstdc++'s
  ``std::normal_distribution`` (Marsaglia polar method, caching the second value).
* ``WORDLIST <path>``: a random non-empty line of the file (``rng() % count``).
* ``RANDOMSTR <min> <max>``: ``min + rng() % (max - min + 1)`` characters, each
  ``BASE64[rng() % 64]``.
* All random fields draw, in field order, from one ``std::mt19937`` seeded with ``SEED``.
* ``STOP_GENERATOR_WHEN_SEQUENCE_FINISHES``: before generating a row the generator stops if
  ``ALL`` sequence fields are stopped (with no sequence field at all: at once), if ``ONE`` is
  (``ONE``), never for ``NONE``. ``MAX_RUNTIME_MS`` (>= 0) also ends it after that much
  wall-clock time.
* The rate (``FIXED 'emit_rate N'`` tuples/s or ``SINUS 'amplitude A, frequency F'``, whose
  rate is ``A sin(F t) + A``, on average ``A``) only paces rows in time.

Here: :class:`GeneratorPlan` yields the exact NES rows of one single random stream
(:meth:`GeneratorPlan.rows`; the sources connector materialises them when the generator
stops), and, for generators that never stop, :meth:`GeneratorPlan.row_at` computes row ``k``
on its own (sequence values in closed form, random fields from an mt19937 seeded with
``(seed, k)``), so Spark can generate any row range again after a restart. A wall-clock
``MAX_RUNTIME_MS`` is replaced by the deterministic row count NES emits in that time at the
nominal rate. ``ALTERNATING`` fields of the ESPAT fork are not supported.
"""

from __future__ import annotations

import math
import random
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from streamctl.planner.types import FLOAT_TYPES, INTEGER_TYPES, canonical_type, integer_range

__all__ = [
    "GeneratorPlan",
    "GeneratorRate",
    "GeneratorSchemaError",
    "NormalField",
    "RandomStringField",
    "SequenceField",
    "WordListField",
    "format_generator_schema",
    "parse_generator_schema",
    "parse_rate",
]

StopPolicy = Literal["ALL", "ONE", "NONE"]
STOP_POLICIES: Final[tuple[str, ...]] = ("ALL", "ONE", "NONE")
RATE_TYPES: Final[tuple[str, ...]] = ("FIXED", "SINUS")
BASE64_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_MT_STATE_WORDS: Final = 624


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
        themselves are always generated with NES's rounding (see ``_SequenceWriter``).
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
_FLOAT_TEXT = re.compile(r"^-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")


def _parse_number(text: str, nes_type: str, what: str, line: str) -> Number:
    if nes_type in INTEGER_TYPES:
        if not _INTEGER_TEXT.match(text):
            raise GeneratorSchemaError(f"{what} {text!r} of {line!r} is not a {nes_type} integer")
        low, high = integer_range(nes_type)
        value = int(text)
        if not low <= value <= high:
            raise GeneratorSchemaError(f"{what} {text!r} of {line!r} is outside {nes_type}")
        return value
    if not _FLOAT_TEXT.match(text):
        raise GeneratorSchemaError(f"{what} {text!r} of {line!r} is not a number")
    value_f = float(text)
    return _to_float32(value_f) if nes_type == "FLOAT32" else value_f


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
    if len(words) != 3 or not all(w.isdigit() for w in words[1:]):
        raise GeneratorSchemaError(f"{line!r}: expected RANDOMSTR <min length> <max length>")
    low, high = int(words[1]), int(words[2])
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
        settings[words[0].lower()] = float(words[1])
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


# --- numbers as NES writes them --------------------------------------------------------------


def _to_float32(value: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _ostream_text(value: Number, nes_type: str) -> str:
    """How ``std::ostream <<`` writes a value of the type (``%g`` for floating point)."""
    if nes_type in FLOAT_TYPES:
        return f"{value:g}"
    return str(int(value))


# --- random numbers --------------------------------------------------------------------------


def mt19937(seed: int) -> random.Random:
    """A Python ``Random`` in the state of C++ ``std::mt19937(seed)``.

    ``getrandbits(32)`` then returns exactly the values ``std::mt19937::operator()`` does.
    """
    state = [seed & 0xFFFFFFFF]
    for index in range(1, _MT_STATE_WORDS):
        previous = state[-1]
        state.append((1812433253 * (previous ^ (previous >> 30)) + index) & 0xFFFFFFFF)
    rng = random.Random()
    rng.setstate((3, (*state, _MT_STATE_WORDS), None))
    return rng


class _NormalSampler:
    """libstdc++ ``std::normal_distribution<T>`` (polar method, second value cached)."""

    def __init__(self, field: NormalField) -> None:
        self.field = field
        self.single = field.nes_type == "FLOAT32"
        self.saved: float | None = None

    def _canonical(self, rng: random.Random) -> float:
        if self.single:  # generate_canonical<float, 24>: one 32-bit draw
            value = _to_float32(float(_to_float32(float(rng.getrandbits(32)))) / 4294967296.0)
            return value if value < 1.0 else _to_float32(math.nextafter(1.0, 0.0))
        low = float(rng.getrandbits(32))  # generate_canonical<double, 53>: two draws
        value = (low + float(rng.getrandbits(32)) * 4294967296.0) / 18446744073709551616.0
        return value if value < 1.0 else math.nextafter(1.0, 0.0)

    def sample(self, rng: random.Random) -> float:
        if self.saved is not None:
            result, self.saved = self.saved, None
        else:
            while True:
                x = 2.0 * self._canonical(rng) - 1.0
                y = 2.0 * self._canonical(rng) - 1.0
                radius = x * x + y * y
                if radius <= 1.0 and radius != 0.0:
                    break
            multiplier = math.sqrt(-2.0 * math.log(radius) / radius)
            self.saved = x * multiplier
            result = y * multiplier
        value = result * self.field.stddev + self.field.mean
        return _to_float32(value) if self.single else value


def _load_words(field: WordListField, data_dir: str | None) -> list[str]:
    path = Path(field.path)
    if not path.is_absolute() and data_dir:
        path = Path(data_dir) / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise GeneratorSchemaError(f"WORDLIST {field.path}: cannot read {path}: {error}") from None
    words = [line for line in text.split("\n") if line]
    if not words:
        raise GeneratorSchemaError(f"WORDLIST {field.path}: {path} contains no words")
    return words


# --- the generator ---------------------------------------------------------------------------

FieldWriter = Callable[[int, random.Random], str]
"""Writes the text of one field of row ``index``, drawing random numbers from ``rng``."""


@dataclass(frozen=True)
class GeneratorPlan:
    """A configured generator source; see the module docstring for the semantics."""

    fields: tuple[GeneratorField, ...]
    stop_policy: str
    seed: int
    rate: GeneratorRate
    max_runtime_ms: int = -1
    data_dir: str | None = None

    def runtime_row_limit(self) -> int | None:
        """Rows NES emits within ``MAX_RUNTIME_MS`` at the nominal rate (None: no limit)."""
        if self.max_runtime_ms < 0:
            return None
        return int(self.rate.rate * self.max_runtime_ms / 1000)

    def row_limit(self) -> int | None:
        """How many rows the generator emits before it stops; None if it never stops.

        Exact for integer sequences; for floating point sequences an estimate (see
        :meth:`SequenceField.increments_until_stop`).
        """
        stops = [f.rows_until_stop() for f in self.fields if isinstance(f, SequenceField)]
        limits: list[int] = []
        if self.stop_policy == "ALL":
            if not stops:
                limits.append(0)
            elif all(stop is not None for stop in stops):
                limits.append(max(stop for stop in stops if stop is not None))
        elif self.stop_policy == "ONE":
            finite = [stop for stop in stops if stop is not None]
            if finite:
                limits.append(min(finite))
        runtime_limit = self.runtime_row_limit()
        if runtime_limit is not None:
            limits.append(runtime_limit)
        return min(limits) if limits else None

    def is_bounded(self) -> bool:
        """Whether the generator stops (by its sequences or its maximum runtime)."""
        return self.row_limit() is not None

    def rows(self) -> Iterator[str]:
        """NES's rows (CSV text without the newline) from one random stream, until it stops.

        Like NES, the stop policy is checked before each row against the sequence fields'
        stop flags, which are set by the rows themselves.
        """
        rng = mt19937(self.seed)
        sequences = [_SequenceWriter(f) for f in self.fields if isinstance(f, SequenceField)]
        by_field = iter(sequences)
        writers = [
            next(by_field) if isinstance(field, SequenceField) else self._random_writer(field)
            for field in self.fields
        ]
        runtime_limit = self.runtime_row_limit()
        index = 0
        while not self._should_stop(sequences) and (runtime_limit is None or index < runtime_limit):
            yield ",".join(write(index, rng) for write in writers)
            index += 1

    def _should_stop(self, sequences: Sequence[_SequenceWriter]) -> bool:
        stopped = sum(1 for sequence in sequences if sequence.stopped)
        if self.stop_policy == "ALL":
            return stopped == len(sequences)
        if self.stop_policy == "ONE":
            return stopped >= 1
        return False

    def row_function(self) -> Callable[[int], str]:
        """A function computing row ``index`` on its own, for generators that never stop.

        Sequence values equal those of :meth:`rows`. Random fields draw from an mt19937
        seeded with ``(seed, index)``: same distributions as NES, other values (NES draws all
        rows from one stream, which cannot be entered at an arbitrary row).
        """
        writers: list[FieldWriter] = [
            _SequenceWriter(field)
            if isinstance(field, SequenceField)
            else self._random_writer(field)
            for field in self.fields
        ]

        def row(index: int) -> str:
            rng = random.Random((self.seed << 64) | index)
            return ",".join(write(index, rng) for write in writers)

        return row

    def _random_writer(self, field: GeneratorField) -> FieldWriter:
        if isinstance(field, NormalField):
            sampler = _NormalSampler(field)
            return lambda _index, rng: _ostream_text(sampler.sample(rng), field.nes_type)
        if isinstance(field, WordListField):
            words = _load_words(field, self.data_dir)
            return lambda _index, rng: words[rng.getrandbits(32) % len(words)]
        if isinstance(field, RandomStringField):
            return _RandomStringWriter(field)
        raise TypeError(f"not a random field: {field!r}")


class _SequenceWriter:
    """A sequence field: its value in row ``index`` and whether it is stopped.

    Integers: ``start + step * min(index, increments)`` (no overflow, see the parser). Floating
    point positions are accumulated one rounded step at a time like NES, remembering the last
    position, so consecutive rows cost one addition each.
    """

    def __init__(self, field: SequenceField) -> None:
        self.field = field
        self.is_integer = field.nes_type in INTEGER_TYPES
        self.round: Callable[[float], float] = _to_float32 if field.nes_type == "FLOAT32" else float
        self.increments = field.increments_until_stop() if self.is_integer else None
        self.stopped = False
        self._steps_done = 0
        self._position: Number = field.start
        self._final_steps: int | None = 0 if field.start >= field.end else None

    def _float_position(self, steps: int) -> float:
        if steps < self._steps_done:
            self._steps_done, self._position = 0, self.field.start
        position = float(self._position)
        while self._steps_done < steps:
            position = self.round(position + self.field.step)
            self._steps_done += 1
            if position >= self.field.end:
                self._final_steps = self._steps_done
                break
        self._position = position
        return position

    def value(self, index: int) -> Number:
        field = self.field
        if self.is_integer:
            steps = index if self.increments is None else min(index, self.increments)
            return int(field.start) + steps * int(field.step)
        if self._final_steps is not None:
            return self._float_position(min(index, self._final_steps))
        return self._float_position(index)

    def __call__(self, index: int, rng: random.Random) -> str:
        text = _ostream_text(self.value(index), self.field.nes_type)
        if self.is_integer:
            self.stopped = self.increments is not None and index + 1 >= max(self.increments, 1)
        else:
            self.value(index + 1)  # the position after this row's step decides the stop flag
            self.stopped = self._final_steps is not None and index + 1 >= max(self._final_steps, 1)
        return text


class _RandomStringWriter:
    def __init__(self, field: RandomStringField) -> None:
        self.field = field

    def __call__(self, index: int, rng: random.Random) -> str:
        span = self.field.max_length - self.field.min_length + 1
        length = self.field.min_length + rng.getrandbits(32) % span
        return "".join(BASE64_ALPHABET[rng.getrandbits(32) % 64] for _ in range(length))
