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
nominal rate. ``ALTERNATING`` fields of the ESPAT fork are not supported. The fields and the
rate are parsed by :mod:`streamctl.planner.generator_schema` (the option table validates them
with it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES
from streamctl.planner.generator_schema import (
    GeneratorField,
    GeneratorRate,
    GeneratorSchemaError,
    NormalField,
    Number,
    RandomStringField,
    SequenceField,
    WordListField,
    to_float32,
)

__all__ = ["GeneratorPlan", "mt19937"]

BASE64_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_MT_STATE_WORDS: Final = 624


# --- numbers as NES writes them --------------------------------------------------------------


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
            value = to_float32(float(to_float32(float(rng.getrandbits(32)))) / 4294967296.0)
            return value if value < 1.0 else to_float32(math.nextafter(1.0, 0.0))
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
        return to_float32(value) if self.single else value


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
        self.round: Callable[[float], float] = to_float32 if field.nes_type == "FLOAT32" else float
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
