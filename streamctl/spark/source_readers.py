"""Physical sources as Spark streaming DataFrames (imports pyspark).

Protocol: an agent starting a query reads each physical source of the query, with a
``staging_dir`` of its own for that (query, source): a logical source's only physical source
as :func:`source_relation` (its parsing not yet analysed: the planner analyses it with the
query's operators), several with :func:`read_source` each, unioned into the query's input;
:func:`is_bounded` tells it whether every input ends, so the query can run
with ``trigger(availableNow=True)`` and reach ``FINISHED``. The DataFrame has exactly the
logical source's columns with the Spark types of ``streamctl.spark.spark_types``.

How each source type is read:

* ``FILE``: CSV and JSON tuples are read as text lines (Spark's text file source, the tuple
  delimiter as line separator) and parsed with NebulaStream's rules
  (:func:`streamctl.spark.tuples.parse_lines`); Parquet with Spark's Parquet source. A path
  naming a file is read once (bounded): it is given to Spark as a glob matching exactly that
  file. A directory is watched: files appearing in it later are read too (unbounded; write
  them elsewhere and move them in, as Spark requires).
* ``INLINE``: the tuples of the config are written once into ``staging_dir`` under a name
  derived from their content, then read like a one-file ``FILE`` source (bounded).
* ``GENERATOR``: a generator that stops is generated up front, row for row as NebulaStream
  does (:mod:`streamctl.spark.generator`), into a staged CSV file read like ``INLINE``. One
  that never stops is Spark's ``rate`` source (its ``rowsPerSecond`` is the generator's rate)
  mapped by a Python UDF computing row ``k`` on its own.
* ``TCP``: Spark's socket source: lines from ``host:port``, parsed like CSV/JSON lines.
  Limits: the socket source keeps nothing, so a restarted query does not see the lines read
  before (no replay: at most once for those lines), it is not for production per Spark's own
  documentation, and it never ends (unbounded) even when the server closes the connection.
* ``KAFKA``: Spark's Kafka source (each message value holds one or more tuples separated by
  the tuple delimiter). The Kafka connector jars must be on the Spark classpath when the
  session starts: set ``STREAMCTL_SPARK_KAFKA_JARS`` (see :func:`kafka_jars_conf`); nothing is
  downloaded at run time.

Exactly once. File, inline, bounded generator, rate and Kafka sources are replayable: Spark
records each micro-batch's offsets (files read, row numbers, Kafka offsets) in the query's
checkpoint before running it and reads the same data again when the batch is replayed after a
restart. That holds only if the paths stay the same, so ``staging_dir`` must be stable across
restarts of the query -- e.g. inside the query's checkpoint directory, on storage every agent
that may run the query can reach.

Parsing CSV and JSON tuples follows NebulaStream's rules, stated in
:mod:`streamctl.spark.tuples`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from streamctl.planner.generator_schema import (
    GeneratorSchemaError,
    WordListField,
    parse_generator_schema,
    parse_rate,
)
from streamctl.spark.generator import GeneratorPlan
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.specs import ConnectorError, SourceSpec
from streamctl.spark.sql_text import Relation
from streamctl.spark.tuples import conform, java_regex_literal, parse_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "KAFKA_JARS_ENV",
    "MAX_MATERIALIZED_CHARACTERS",
    "MAX_MATERIALIZED_ROWS",
    "generator_plan",
    "is_bounded",
    "kafka_jars_conf",
    "kafka_reader_options",
    "parse_lines",
    "read_source",
    "source_relation",
]

KAFKA_JARS_ENV: Final = "STREAMCTL_SPARK_KAFKA_JARS"
"""Comma-separated paths of the Kafka connector jars (spark-sql-kafka-0-10, kafka-clients,
spark-token-provider-kafka-0-10, commons-pool2) that agents put on the Spark classpath."""

_GENERATOR_TEXT: Final[Mapping[str, Any]] = {
    "format": "CSV",
    "field_delimiter": ",",
    "tuple_delimiter": "\n",
    "allow_delimiter_in_quotes": False,
}
"""Parser options of the CSV text that generators write."""

MAX_MATERIALIZED_ROWS: Final = 20_000_000
"""Most rows a stopping generator may produce (they are written to a staged file first)."""
MAX_MATERIALIZED_CHARACTERS: Final = 1 << 30
"""Most text a stopping generator may produce up front (long ``RANDOMSTR`` rows reach it long
before :data:`MAX_MATERIALIZED_ROWS`)."""

_KAFKA_PROVIDER: Final = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


# --- entry points ----------------------------------------------------------------------------


def is_bounded(spec: SourceSpec) -> bool:
    """Whether the source ends: a file, inline data, a stopping generator.

    A ``FILE`` path is a watched directory when it is one here (URIs: when it ends in ``/``).
    """
    if spec.type == "FILE":
        return not _is_directory(str(spec.config["file_path"]))
    if spec.type == "INLINE":
        return True
    if spec.type == "GENERATOR":
        return generator_plan(spec).is_bounded()
    return False


def read_source(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> DataFrame:
    """A streaming DataFrame of the physical source, with the logical source's columns,
    analysed with the settings in force (the session's own, outside
    :func:`~streamctl.spark.translate.spark_conf`).

    Raises :class:`ConnectorError` when the source cannot be read here (missing file, jar).
    """
    return source_relation(session, spec, staging_dir).frame()


def source_relation(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> Relation:
    """:func:`read_source` before Spark analyses its parsing: Spark's reader of the source
    and the steps over it, for the planner to continue (:func:`streamctl.spark.translate.build`
    analyses them with the query's operators, as one query under its settings)."""
    readers: dict[str, Callable[[SparkSession, SourceSpec, Path], Relation]] = {
        "FILE": _read_file,
        "INLINE": _read_inline,
        "GENERATOR": _read_generator,
        "TCP": _read_tcp,
        "KAFKA": _read_kafka,
    }
    return readers[spec.type](session, spec, Path(staging_dir))


def kafka_jars_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings putting the Kafka connector jars of ``STREAMCTL_SPARK_KAFKA_JARS`` on the
    classpath (for the agent's session builder); empty when the variable is unset.

    Raises :class:`ConnectorError` naming a listed jar that does not exist.
    """
    value = (os.environ if environ is None else environ).get(KAFKA_JARS_ENV, "").strip()
    if not value:
        return {}
    jars = [part.strip() for part in value.split(",") if part.strip()]
    missing = [jar for jar in jars if not _is_remote(jar) and not Path(jar).is_file()]
    if missing:
        raise ConnectorError(f"{KAFKA_JARS_ENV} lists jars that do not exist: {missing}")
    return {"spark.jars": ",".join(jars)}


# --- FILE ------------------------------------------------------------------------------------


def _is_remote(path: str) -> bool:
    return "://" in path


def _literal_glob(path: str) -> str:
    """A Hadoop glob matching exactly the file ``path``.

    Spark's file stream source reads directories; given a glob it reads the matching files.
    Glob characters are escaped, and the last letter or digit of the name is put in brackets
    so that the path is a glob even when it has no special character.
    """
    escaped = ["\\" + char if char in "\\*?[]{}" else char for char in path]
    name_start = path.rfind("/") + 1
    for index in range(len(path) - 1, name_start - 1, -1):
        if path[index].isascii() and path[index].isalnum():
            escaped[index] = f"[{path[index]}]"
            break
    else:
        if not escaped[-1].startswith("\\"):
            escaped[-1] = "\\" + escaped[-1]
    return "".join(escaped)


def _is_directory(path: str) -> bool:
    return path.endswith("/") if _is_remote(path) else Path(path).expanduser().is_dir()


def _spark_path(path: str) -> str:
    """The path to give Spark: a directory as it is, a file as its literal glob.

    Local paths are made absolute; a missing local file is a :class:`ConnectorError`.
    """
    if _is_directory(path):
        return path if _is_remote(path) else str(Path(path).expanduser().absolute())
    if _is_remote(path):
        return _literal_glob(path)
    local = Path(path).expanduser().absolute()
    if not local.is_file():
        raise ConnectorError(f"source file {str(local)!r} does not exist (option 'file_path')")
    return _literal_glob(str(local))


def _read_file(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> Relation:
    path = _spark_path(str(spec.config["file_path"]))
    if spec.config["format"] == "PARQUET":
        frame = session.readStream.schema(_input_schema(spec.schema)).parquet(path)
        return conform(frame, spec)
    return parse_lines(_text_lines(session, path, spec.config), spec)


def _text_lines(session: SparkSession, path: str, config: Mapping[str, Any]) -> DataFrame:
    # Always the tuple delimiter: Spark's default also ends lines at "\r", which NES does not.
    reader = session.readStream.format("text").option("lineSep", config["tuple_delimiter"])
    return reader.load(path)


def _input_schema(schema: Sequence[Mapping[str, Any]]) -> Any:
    """The Spark schema with every column nullable (NOT NULL is checked after reading)."""
    return spark_schema({**column, "nullable": True} for column in schema)


# --- INLINE and bounded GENERATOR: staged files ----------------------------------------------


def _staged_file(staging_dir: Path, stem: str, identity: Any, write: Callable[[Any], None]) -> str:
    """Write a file once under a name derived from ``identity``; return its literal glob.

    Idempotent across restarts: an existing file of that name is the same content and is
    kept (so Spark's checkpoint, which remembers the path, does not read it again).
    """
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    staging_dir.mkdir(parents=True, exist_ok=True)
    target = staging_dir / f"{stem}-{digest}.txt"
    if not target.exists():
        handle, temporary = tempfile.mkstemp(dir=staging_dir, prefix=f".{stem}-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                write(out)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return _literal_glob(str(target.absolute()))


def _read_inline(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> Relation:
    data = str(spec.config["data"])
    identity = {"id": spec.id, "data": data, "delimiter": spec.config["tuple_delimiter"]}
    path = _staged_file(staging_dir, f"inline-{spec.id}", identity, lambda out: out.write(data))
    return parse_lines(_text_lines(session, path, spec.config), spec)


def generator_plan(spec: SourceSpec) -> GeneratorPlan:
    """The generator of a ``GENERATOR`` source (default seed: derived from the source id)."""
    config = spec.config
    seed = config["seed"]
    if seed is None:
        seed = zlib.crc32(str(spec.id).encode())
    return GeneratorPlan(
        fields=parse_generator_schema(config["generator_schema"]),
        stop_policy=config["stop_when"],
        seed=int(seed),
        rate=parse_rate(config["rate_type"], config["rate_config"]),
        max_runtime_ms=int(config["max_runtime_ms"]),
        data_dir=config["data_dir"],
    )


def _read_generator(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> Relation:
    try:
        plan = generator_plan(spec)
        if not plan.is_bounded():
            return parse_lines(_generated_lines(session, plan), spec, _GENERATOR_TEXT)
        path = _staged_generator_rows(plan, spec, staging_dir)
    except GeneratorSchemaError as error:  # e.g. a WORDLIST file that cannot be read here
        raise ConnectorError(f"generator source {spec.id}: {error}") from None
    return parse_lines(_text_lines(session, path, _GENERATOR_TEXT), spec, _GENERATOR_TEXT)


def _staged_generator_rows(plan: GeneratorPlan, spec: SourceSpec, staging_dir: Path) -> str:
    """The rows of a stopping generator, written once into a staged file (its glob)."""
    limit = plan.row_limit()
    if limit is not None and limit > MAX_MATERIALIZED_ROWS:
        raise ConnectorError(
            f"generator source {spec.id} emits {limit} rows before it stops, more than the "
            f"{MAX_MATERIALIZED_ROWS} that are generated up front; use stop_when NONE"
        )

    def write(out: Any) -> None:
        written = 0
        for count, row in enumerate(plan.rows(), start=1):
            if count > MAX_MATERIALIZED_ROWS:
                raise ConnectorError(
                    f"generator source {spec.id} did not stop within {MAX_MATERIALIZED_ROWS} rows"
                )
            written += len(row) + 1
            if written > MAX_MATERIALIZED_CHARACTERS:
                raise ConnectorError(
                    f"generator source {spec.id} writes more than {MAX_MATERIALIZED_CHARACTERS} "
                    "characters before it stops (they are generated up front); use stop_when NONE"
                )
            out.write(row + "\n")

    identity = {"id": spec.id, "plan": repr(plan)}
    return _staged_file(staging_dir, f"generator-{spec.id}", identity, write)


class _GeneratedRow:
    """Picklable UDF body: row ``k`` of an unbounded generator as CSV text."""

    def __init__(self, plan: GeneratorPlan) -> None:
        self.plan = plan
        self._row: Callable[[int], str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"plan": self.plan}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.plan, self._row = state["plan"], None

    def __call__(self, index: int) -> str:
        if self._row is None:
            self._row = self.plan.row_function()
        return self._row(index)


def _generated_lines(session: SparkSession, plan: GeneratorPlan) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    if any(isinstance(field, WordListField) for field in plan.fields):
        plan.row_function()  # fail here, not in a task, when a word list cannot be read
    rows_per_second = max(1, round(plan.rate.rate))
    ticks = session.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
    row_text = F.udf(_GeneratedRow(plan), StringType(), useArrow=False)
    return ticks.select(row_text(F.col("value")).alias("value"))


# --- TCP and KAFKA ---------------------------------------------------------------------------


def _read_tcp(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> Relation:
    lines = (
        session.readStream.format("socket")
        .option("host", spec.config["host"])
        .option("port", spec.config["port"])
        .load()
    )
    return parse_lines(lines, spec)


def _check_kafka_available(session: SparkSession) -> None:
    jvm = getattr(getattr(session, "sparkContext", None), "_jvm", None)
    if jvm is None:
        return  # Spark Connect: the server's classpath decides, errors surface at start
    try:
        jvm.java.lang.Class.forName(_KAFKA_PROVIDER)
    except Exception:
        raise ConnectorError(
            "KAFKA sources need Spark's Kafka connector on the classpath, which this Spark "
            f"session lacks: set {KAFKA_JARS_ENV} to the paths of spark-sql-kafka-0-10, "
            "kafka-clients, spark-token-provider-kafka-0-10 and commons-pool2 jars (matching "
            "the Spark version) before the agent starts; streamctl never downloads them"
        ) from None


def _jaas_config(mechanism: str | None, username: str, password: str) -> str:
    module = (
        "org.apache.kafka.common.security.scram.ScramLoginModule"
        if (mechanism or "").upper().startswith("SCRAM")
        else "org.apache.kafka.common.security.plain.PlainLoginModule"
    )
    quoted_user, quoted_password = (json.dumps(value) for value in (username, password))
    return f"{module} required username={quoted_user} password={quoted_password};"


def kafka_reader_options(config: Mapping[str, Any]) -> dict[str, str]:
    """Spark Kafka source options of a canonical KAFKA source config."""
    options: dict[str, str] = {
        "kafka.bootstrap.servers": config["bootstrap_servers"],
        "startingOffsets": config["starting_offsets"],
        "failOnDataLoss": str(config["fail_on_data_loss"]).lower(),
    }
    if config["topic"] is not None:
        options["subscribe"] = config["topic"]
    else:
        options["subscribePattern"] = config["topic_pattern"]
    optional = {
        "maxOffsetsPerTrigger": "max_offsets_per_trigger",
        "kafka.security.protocol": "security_protocol",
        "kafka.sasl.mechanism": "sasl_mechanism",
        "kafka.ssl.truststore.location": "ssl_truststore_location",
        "kafka.ssl.truststore.password": "ssl_truststore_password",
        "kafka.ssl.keystore.location": "ssl_keystore_location",
        "kafka.ssl.keystore.password": "ssl_keystore_password",
        "kafka.ssl.key.password": "ssl_key_password",
    }
    for spark_key, key in optional.items():
        if config[key] is not None:
            options[spark_key] = str(config[key])
    if config["sasl_username"] is not None:
        options["kafka.sasl.jaas.config"] = _jaas_config(
            config["sasl_mechanism"], config["sasl_username"], config["sasl_password"]
        )
    options.update({k: str(v) for k, v in config.items() if k.startswith("kafka.")})
    return options


def _read_kafka(session: SparkSession, spec: SourceSpec, staging_dir: Path) -> Relation:
    from pyspark.sql import functions as F

    _check_kafka_available(session)
    messages = (
        session.readStream.format("kafka").options(**kafka_reader_options(spec.config)).load()
    )
    delimiter = java_regex_literal(spec.config["tuple_delimiter"])
    lines = messages.select(
        F.explode(F.split(F.col("value").cast("string"), delimiter, -1)).alias("value")
    )
    return parse_lines(lines, spec)
