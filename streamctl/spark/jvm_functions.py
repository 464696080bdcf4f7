"""Spark functions of streamctl's own jar (``jvm/streamctl-spark.jar``, built from the Java
sources beside it by ``scripts/build_jvm_jar.sh``; nothing is compiled or downloaded at run
time).

Protocol:

* Every session :func:`streamctl.agent.spark_session.build_spark_session` builds has the jar
  on its classpath, on the driver and on executors (:func:`with_jar`).
* A query's builder asks for a function: :func:`csv_fields_function` for the parse of CSV
  tuples of one column layout (``NesCsvFields.java``), :func:`json_fields_function` for the
  typed JSON parse of one column layout (kinds and names: ``NesJsonFields.java``),
  :func:`json_texts_function` for the general rules over a JSON tuple's keys and their
  texts (``NesJsonTexts.java``, reading the keys with ``NesJsonKeys.java``),
  :func:`float_text_function` for NES's float text (``NesFloatText.java``). Each registers
  its Java UDF as a temporary function of the session (once per session and name) and
  returns the name, or ``None`` when the jar's classes do not load there (a Spark Connect
  server started without ``--jars`` of the jar, or with another release's jar; the first
  request of a session runs the float text and ``NesJarDigest.java`` once to find out). The
  caller then plans Spark expressions that give the same values, slower:
  :mod:`streamctl.spark.tuples`' CSV expressions
  (``tests/connectors/test_csv_fields.py`` checks the two against each other),
  ``from_json`` (``tests/connectors/test_json_typed_parse.py`` checks both against the
  general rules) and :mod:`streamctl.spark.float_text`'s stages
  (``tests/connectors/test_float_text.py``, both against Python's ``%.6f``).
* That the jar does not load is logged once per session and not tried again there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import threading
import weakref
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from streamctl.spark.spark_types import spark_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JAR",
    "csv_fields_function",
    "fields_struct",
    "float_text_function",
    "jar_digest",
    "json_fields_function",
    "json_layout",
    "json_texts_function",
    "source_digest",
    "with_jar",
]

log = logging.getLogger(__name__)

JAR: Final = Path(__file__).parent / "jvm" / "streamctl-spark.jar"
JSON_FIELDS_CLASS: Final = "io.streamctl.NesJsonFields"
CSV_FIELDS_CLASS: Final = "io.streamctl.NesCsvFields"
JSON_TEXTS_CLASS: Final = "io.streamctl.NesJsonTexts"
FLOAT_TEXT_CLASS: Final = "io.streamctl.NesFloatText"
JAR_DIGEST_CLASS: Final = "io.streamctl.NesJarDigest"
SOURCES_DIGEST_ENTRY: Final = "META-INF/streamctl-sources.sha256"
"""The jar's record of the sources it was built from (:func:`source_digest`)."""

JSON_KINDS: Final = {"BIGINT": "L", "DOUBLE": "D", "STRING": "S"}
"""The layout's kind letter of each Spark type the typed parse reads a column as."""


def source_digest() -> str:
    """SHA-256 over the jar's Java sources (names and contents, in name order)."""
    digest = hashlib.sha256()
    for source in sorted(JAR.parent.glob("*.java")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


def with_jar(config: Mapping[str, str], master: str) -> dict[str, str]:
    """``config`` with the jar on the classpath of the driver JVM and, on a cluster master, of
    the executors (entries already in ``config`` are kept, after it).

    The driver's is ``spark.driver.extraClassPath``: it takes effect when the JVM starts and
    needs nothing else, where ``spark.jars`` has even a ``local`` executor fetch the jar from
    the driver's file server at its advertised address, and a session whose address cannot
    be reached from itself (bound to 127.0.0.1, advertising another) then fails to start.
    Executors in JVMs of their own (a cluster, ``local-cluster``) take it by ``spark.jars``
    from that file server, as any jar."""
    settings = dict(config)
    driver_path = [entry for entry in config.get(_DRIVER_PATH, "").split(os.pathsep) if entry]
    settings[_DRIVER_PATH] = os.pathsep.join([str(JAR), *driver_path])
    if not _IN_PROCESS_MASTER.fullmatch(master):
        listed = [jar for jar in config.get("spark.jars", "").split(",") if jar.strip()]
        settings["spark.jars"] = ",".join([str(JAR), *listed])
    return settings


_DRIVER_PATH: Final = "spark.driver.extraClassPath"
_IN_PROCESS_MASTER: Final = re.compile(r"local(\[[^\]]*\])?")
"""Masters whose executors run in the driver's JVM (not ``local-cluster[...]``)."""


_lock = threading.Lock()
_registered: weakref.WeakKeyDictionary[Any, set[str] | None] = weakref.WeakKeyDictionary()
"""Per session: the functions registered there, or None where the jar's classes do not load."""
_FLOAT_TEXT: Final = "streamctl_nes_float_text"
_JAR_DIGEST: Final = "streamctl_jar_digest"


def _function(session: SparkSession, name: str, java_class: str, return_type: Any) -> str | None:
    """``name``, the Java UDF ``java_class`` registered in ``session`` (once), or ``None``
    where the jar's classes do not load there (:func:`_probe`, once per session)."""
    with _lock:
        probed = session in _registered
        known = _registered.get(session)
    if not probed:
        known = _probe(session)
        with _lock:
            _registered[session] = known
    if known is None:
        return None
    if name not in known:
        try:
            session.udf.registerJavaFunction(name, java_class, return_type)
        except Exception as error:  # the session's own trouble: the query fails on it anyway
            log.warning("registering %s in this Spark session failed: %s", name, error)
            return None
        with _lock:
            known.add(name)
    return name


def _probe(session: SparkSession) -> set[str] | None:
    """The float text registered and run once in ``session``, or None where that fails: a
    Spark Connect server registers a Java UDF without loading its class, and only running it
    shows whether the server has the jar, and whether it is this jar's build
    (``NesJarDigest.java``: a server started with another release's jar has the classes,
    some with other signatures)."""
    from pyspark.sql.types import StringType

    try:
        session.udf.registerJavaFunction(_FLOAT_TEXT, FLOAT_TEXT_CLASS, StringType())
        session.udf.registerJavaFunction(_JAR_DIGEST, JAR_DIGEST_CLASS, StringType())
        text, digest = session.sql(
            f"SELECT {_FLOAT_TEXT}(CAST(0.5 AS DOUBLE)), {_JAR_DIGEST}()"
        ).collect()[0]
        if text != "0.5":
            raise RuntimeError(f"{_FLOAT_TEXT}(0.5) gave {text!r}")
        if digest != jar_digest():
            raise RuntimeError(
                f"the session's jar is another build (sources {digest}, not {jar_digest()})"
            )
    except Exception as error:  # the server's error, whatever its class: fall back
        log.warning(
            "streamctl's Spark functions (%s) do not load in this Spark session, so CSV and "
            "JSON tuples and floats are read and written by Spark expressions (slower); start "
            "a Spark Connect server with --jars %s: %s",
            JAR.name,
            JAR,
            str(error).splitlines()[0] if str(error) else type(error).__name__,
        )
        return None
    return {_FLOAT_TEXT, _JAR_DIGEST}


def jar_digest() -> str:
    """The digest of the sources :data:`JAR` was built from, as the jar records it."""
    with zipfile.ZipFile(JAR) as jar:
        return jar.read(SOURCES_DIGEST_ENTRY).decode().strip()


def json_fields_function(session: SparkSession, columns: Sequence[tuple[str, str]]) -> str | None:
    """The name of the typed JSON parse of ``columns`` (name, Spark type: a key of
    :data:`JSON_KINDS`) in ``session``, or ``None`` (module docstring). The function takes
    the tuple as ``BINARY`` and the UTF-8 bytes of :func:`json_layout` of ``columns`` (a
    ``BINARY`` literal), and returns a struct of
    the columns (named so) or NULL (``NesJsonFields.java``)."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    spark_types = {"BIGINT": LongType(), "DOUBLE": DoubleType(), "STRING": StringType()}
    struct = StructType([StructField(column, spark_types[kind]) for column, kind in columns])
    digest = hashlib.sha256(json_layout(columns).encode()).hexdigest()[:20]
    return _function(session, f"streamctl_nes_json_{digest}", JSON_FIELDS_CLASS, struct)


FIELD_KINDS: Final = {
    "INT8": "I8",
    "INT16": "I16",
    "INT32": "I32",
    "INT64": "I64",
    "UINT8": "U8",
    "UINT16": "U16",
    "UINT32": "U32",
    "UINT64": "U64",
    "FLOAT32": "F32",
    "FLOAT64": "F64",
    "BOOLEAN": "BOOLEAN",
    "CHAR": "CHAR",
    "VARSIZED": "VARSIZED",
}
"""The kind of each (canonical) NES type in the layouts of the CSV parse and of the JSON
texts (``NesCsvFields.java``, ``NesJsonTexts.java``)."""
FIELDS_ERROR: Final = "_error"
"""The struct field of the first failure of a tuple, in the CSV parse's and the JSON texts'
structs (:func:`fields_struct`)."""


def field_name(position: int) -> str:
    """The struct field of the column at ``position`` (for a ``UINT64`` column: a ``BIGINT``
    of its values below 2**63; :func:`wide_field_name` has the others)."""
    return f"c{position}"


def wide_field_name(position: int) -> str:
    """The ``DECIMAL(20,0)`` struct field of a ``UINT64`` column's values of 2**63 and more
    (``NesCsvFields.java``: a decimal made from a long stays a long in Spark)."""
    return f"w{position}"


def fields_struct(nes_types: Sequence[str]) -> Any:
    """The struct the CSV parse and the JSON texts return for columns of ``nes_types``
    (canonical, in order): :data:`FIELDS_ERROR`, then the columns in their Spark types
    (:func:`field_name`), then the wide ``UINT64`` values (:func:`wide_field_name`)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    unsigned = [i for i, nes_type in enumerate(nes_types) if nes_type == "UINT64"]
    return StructType(
        [
            StructField(FIELDS_ERROR, StringType()),
            *(
                StructField(field_name(i), LongType() if i in unsigned else spark_type(t))
                for i, t in enumerate(nes_types)
            ),
            *(StructField(wide_field_name(i), spark_type("UINT64")) for i in unsigned),
        ]
    )


def csv_fields_function(session: SparkSession, nes_types: Sequence[str]) -> str | None:
    """The name of the CSV parse of columns of ``nes_types`` (canonical, in order) in
    ``session``, or ``None`` (module docstring). The function takes the tuple and its layout
    (JSON in UTF-8 bytes, a ``BINARY`` literal: ``NesCsvFields.java``) and returns
    :func:`fields_struct`."""
    struct = fields_struct(nes_types)
    digest = hashlib.sha256(struct.simpleString().encode()).hexdigest()[:20]
    return _function(session, f"streamctl_nes_csv_{digest}", CSV_FIELDS_CLASS, struct)


def json_texts_function(session: SparkSession, nes_types: Sequence[str]) -> str | None:
    """The name of the general rules over JSON tuples for columns of ``nes_types``
    (canonical, in order) in ``session``, or ``None`` (module docstring). The function takes
    the tuple as ``BINARY``, a struct of the texts the typed parse read, whether the typed
    parse took the tuple, and the layout (JSON in UTF-8 bytes, a ``BINARY`` literal:
    ``NesJsonTexts.java``), and returns
    :func:`fields_struct`."""
    struct = fields_struct(nes_types)
    digest = hashlib.sha256(struct.simpleString().encode()).hexdigest()[:20]
    return _function(session, f"streamctl_nes_json_texts_{digest}", JSON_TEXTS_CLASS, struct)


def float_text_function(session: SparkSession) -> str | None:
    """The name of NES's float text in ``session`` (a ``DOUBLE`` to its ``STRING``,
    ``NesFloatText.java``), or ``None`` (module docstring)."""
    from pyspark.sql.types import StringType

    return _function(session, _FLOAT_TEXT, FLOAT_TEXT_CLASS, StringType())


def json_layout(columns: Sequence[tuple[str, str]]) -> str:
    """The layout argument of the typed JSON parse: a JSON array of kind letter + name."""
    return json.dumps([JSON_KINDS[kind] + column for column, kind in columns])


if __name__ == "__main__":  # scripts/build_jvm_jar.sh
    if sys.argv[1:] != ["--source-digest"]:
        sys.exit("usage: python -m streamctl.spark.jvm_functions --source-digest")
    print(source_digest())
