"""Reading what FILE and CHECKSUM sinks committed, without Spark (a leaf: imports nothing from
streamctl but :mod:`streamctl.nes_text`, :mod:`streamctl.nes_types` and, for the default sink
directory, :mod:`streamctl.config`).

Protocol: the sink writers (:mod:`streamctl.spark.sink_writers`) write into the directories named
here (:func:`file_sink_directory`, :func:`checksum_directory`); tests, the benchmarks and the
systest runner (:mod:`streamctl.systest.runner`) read results back with
:func:`read_file_sink_lines`, :func:`read_file_sink_rows` (CSV and JSON;
:func:`streamctl.spark.sink_writers.read_file_sink` reads Parquet too) and :func:`read_checksum`. A
sink is given as anything with its catalog ``name``, ``type``, canonical ``config`` and
``schema`` (:class:`FileSink`: a :class:`~streamctl.spark.specs.SinkSpec`, or a sink as the
coordinator answers it).

Only what a committed batch made visible is read:

* ``FILE`` (append mode): the files listed in the Spark file sink's metadata log
  (``_spark_metadata``: the latest compaction plus later batches) of each query directory
  ``<sink root>/<query name>`` (:func:`sink_root`).
* ``FILE`` (complete mode): the snapshot ``_snapshots/batch-<id>`` that
  ``_snapshots/LATEST`` names.
* ``CHECKSUM``: the per-batch ``batch-<id>.json`` files (or ``latest.json`` in complete mode),
  summed.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from streamctl.nes_text import NULL_TEXT, Checksum, parse_value
from streamctl.nes_types import STRING_TYPES, canonical_type

__all__ = [
    "LATEST",
    "SNAPSHOTS",
    "FileSink",
    "SinkFileError",
    "checksum_directory",
    "committed_files",
    "file_sink_directory",
    "read_checksum",
    "read_file_sink_lines",
    "read_file_sink_rows",
    "sink_root",
    "split_sink_line",
]

SNAPSHOTS: Final = "_snapshots"
"""A complete-mode FILE sink's snapshots directory, in the query's directory."""

LATEST: Final = "LATEST"
"""The file in :data:`SNAPSHOTS` naming the batch id of the committed snapshot."""


class SinkFileError(RuntimeError):
    """A sink's output that cannot be read as asked (not a local file, not text, a line that
    does not split into the sink's columns); the message says why."""


@dataclass(frozen=True)
class AnsweredSink:
    """A sink as the coordinator answers it (``CreateSink``, ``GetSink``, ``CREATE SINK``):
    what a frontend hands the readers."""

    name: str
    type: str
    config: Mapping[str, Any]
    schema: Sequence[Mapping[str, Any]]

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> AnsweredSink:
        return cls(answer["name"], answer["type"], answer["config"], answer["schema"])


class FileSink(Protocol):
    """What the readers need of a sink."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def config(self) -> Mapping[str, Any]: ...

    @property
    def schema(self) -> Sequence[Mapping[str, Any]]: ...


# --- where sinks write -----------------------------------------------------------------------


def _path_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", name) or "_"


def sink_root(spec: FileSink) -> Path:
    """A FILE sink's directory: option ``file_path``, else ``<state dir>/sinks/<sink name>``.

    The default lets ``CREATE SINK ... TYPE File`` work without options, as in NebulaStream's
    suite; ``STREAMCTL_STATE_DIR`` (``streamctl.config``) must then be the same for the agent
    writing and the process reading.
    """
    from streamctl.config import state_dir

    configured = spec.config["file_path"]
    return Path(configured).absolute() if configured else state_dir() / "sinks" / spec.name


def file_sink_directory(spec: FileSink, query_name: str) -> Path:
    """Where a query writes a FILE sink: ``<sink root>/<query name>``."""
    return sink_root(spec) / _path_part(query_name)


def checksum_directory(spec: FileSink, query_name: str, checkpoint_dir: str) -> Path:
    """Where a query keeps its CHECKSUM results."""
    if spec.config["file_path"]:
        return Path(spec.config["file_path"]).absolute() / _path_part(query_name)
    return Path(checkpoint_dir).absolute() / "checksum"


# --- FILE ------------------------------------------------------------------------------------


def _committed_files(directory: Path) -> list[Path]:
    """Data files of a query's FILE sink output that a committed batch made visible."""
    latest = directory / SNAPSHOTS / LATEST
    if latest.exists():
        snapshot = directory / SNAPSHOTS / f"batch-{int(latest.read_text()):020d}"
        return sorted(p for p in snapshot.iterdir() if p.is_file() and p.name[0] not in "._")
    return _spark_metadata_files(directory / "_spark_metadata")


def _spark_metadata_files(log_dir: Path) -> list[Path]:
    """Files listed by a Spark file sink's metadata log (latest compaction plus later batches)."""
    if not log_dir.is_dir():
        return []
    batches: dict[int, Path] = {}
    compacted: dict[int, Path] = {}
    for entry in log_dir.iterdir():
        match = re.fullmatch(r"([0-9]+)(\.compact)?", entry.name)
        if match:
            (compacted if match.group(2) else batches)[int(match.group(1))] = entry
    start = -1
    logs: list[Path] = []
    if compacted:
        start = max(compacted)
        logs.append(compacted[start])
    logs.extend(batches[batch] for batch in sorted(batches) if batch > start)
    files: dict[str, bool] = {}
    for log_file in logs:
        for line in log_file.read_text(encoding="utf-8").splitlines()[1:]:
            if not line.strip():
                continue
            status = json.loads(line)
            files[status["path"]] = status.get("action", "add") != "delete"
    return [_local_path(uri) for uri, present in sorted(files.items()) if present]


def _local_path(uri: str) -> Path:
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise SinkFileError(f"cannot read {uri!r} without Spark: not a local file")
    return Path(urllib.parse.unquote(parsed.path))


def _query_directories(spec: FileSink, query_name: str | None) -> list[Path]:
    if query_name is not None:
        return [file_sink_directory(spec, query_name)]
    base = sink_root(spec)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and p.name[0] not in "._")


def _text_lines(files: Iterable[Path]) -> Iterator[str]:
    """The lines of text files whose lines end in ``\n`` (as Spark's text writer ends them;
    ``str.splitlines`` would also split at ``\r``, ``\x85``, ``\u2028``... inside strings)."""
    for path in files:
        text = path.read_bytes().decode("utf-8")  # not read_text: it turns "\r" into "\n"
        yield from text.removesuffix("\n").split("\n") if text else ()


def read_file_sink_lines(spec: FileSink, query_name: str | None = None) -> list[str]:
    """The committed text lines (CSV or JSON) of a FILE sink: one query's, or all queries'."""
    if spec.type != "FILE" or spec.config["format"] == "PARQUET":
        raise SinkFileError(f"{spec.type} sink {spec.name!r} has no text lines")
    lines: list[str] = []
    for directory in _query_directories(spec, query_name):
        lines.extend(_text_lines(_committed_files(directory)))
    return lines


def committed_files(spec: FileSink, query_name: str | None = None) -> list[Path]:
    """The data files of a FILE sink that committed batches made visible: one query's, or all
    queries'."""
    return [f for d in _query_directories(spec, query_name) for f in _committed_files(d)]


def read_file_sink_rows(spec: FileSink, query_name: str | None = None) -> list[tuple[Any, ...]]:
    """The committed rows of a CSV or JSON FILE sink as tuples of Python values (NULL is
    None).

    Only files of committed batches are read (the metadata log, or the latest snapshot).
    """
    if spec.type != "FILE":
        raise SinkFileError(f"{spec.type} sink {spec.name!r} is not a FILE sink")
    types = [canonical_type(column["type"]) for column in spec.schema]
    lines = read_file_sink_lines(spec, query_name)
    if spec.config["format"] == "JSON":
        return [_json_row(json.loads(line), spec.schema) for line in lines]
    delimiter = spec.config["field_delimiter"]
    quoted = bool(spec.config["quote_strings"])
    return [
        tuple(
            _csv_value(t, text, quoted)
            for t, text in zip(types, split_sink_line(line, types, delimiter, quoted), strict=True)
        )
        for line in lines
    ]


def _csv_value(nes_type: str, text: str, quoted: bool) -> Any:
    """A CSV field as written by a FILE sink: ``NULL`` is None; a string in quotes (sinks
    with ``quote_strings``) loses them and ``""`` inside is ``"``."""
    if quoted and nes_type in STRING_TYPES and text != NULL_TEXT:
        if len(text) >= 2 and text[0] == text[-1] == '"':
            return text[1:-1].replace('""', '"')
        return text
    return parse_value(nes_type, text)


def split_sink_line(line: str, types: Sequence[str], delimiter: str, quoted: bool) -> list[str]:
    """The fields of a CSV line written by a FILE sink.

    NES writes strings as they are, so an unquoted string may contain the delimiter: with one
    string column the surplus pieces belong to it; with several the line is ambiguous.
    """
    if quoted:
        pattern = re.escape(delimiter) + r'(?=(?:[^"]*"[^"]*")*[^"]*$)'
        return re.split(pattern, line)
    pieces = line.split(delimiter)
    surplus = len(pieces) - len(types)
    if surplus == 0:
        return pieces
    strings = [i for i, t in enumerate(types) if t in STRING_TYPES]
    if surplus < 0 or len(strings) != 1:
        raise SinkFileError(
            f"cannot split the sink line {line!r} into {len(types)} fields; write strings "
            "quoted (option quote_strings) when they may contain the delimiter"
        )
    at = strings[0]
    return [
        *pieces[:at],
        delimiter.join(pieces[at : at + surplus + 1]),
        *pieces[at + surplus + 1 :],
    ]


def _json_row(value: Mapping[str, Any], schema: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """A JSON line of a FILE sink as a tuple (:func:`streamctl.spark.sink_writers.nes_json_line`: a
    nullable column's value is its CSV text as a JSON string, ``"NULL"`` for NULL -- so a
    nullable ``VARSIZED`` value ``NULL`` reads as NULL, NES's format cannot tell them apart;
    a missing key, as Spark's own JSON writer left it for NULL, is NULL too)."""
    row = []
    for column in schema:
        item = value.get(column["name"])
        nes_type = canonical_type(column["type"])
        if isinstance(item, str) and column["nullable"] and item == NULL_TEXT:
            item = None
        elif isinstance(item, str) and nes_type not in STRING_TYPES:
            item = parse_value(nes_type, item)
        row.append(item)
    return tuple(row)


# --- CHECKSUM --------------------------------------------------------------------------------


def read_checksum(directory: str | Path) -> Checksum:
    """The checksum of everything a CHECKSUM sink committed (``0 0`` before the first batch)."""
    path = Path(directory)
    latest = path / "latest.json"
    parts = [latest] if latest.exists() else sorted(path.glob("batch-*.json"))
    total = Checksum()
    for part in parts:
        stored = json.loads(part.read_text(encoding="utf-8"))
        total = total + Checksum(stored["tuples"], stored["checksum"])
    return total
