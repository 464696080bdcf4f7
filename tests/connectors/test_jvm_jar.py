"""streamctl's jar (:mod:`streamctl.spark.jvm_functions`): built from the sources beside it,
on every session's classpath, and its typed JSON parse taken where it should be (that its
values are the general rules' values is ``test_json_typed_parse``'s)."""

from __future__ import annotations

from typing import Any

import pytest

from streamctl.spark import jvm_functions
from streamctl.spark.jvm_functions import (
    float_text_function,
    jar_digest,
    json_fields_function,
    json_layout,
    source_digest,
)

COLUMNS = [("ID", "BIGINT"), ("V", "DOUBLE"), ("S", "STRING")]


@pytest.mark.quick
def test_the_jar_is_built_from_the_sources_beside_it() -> None:
    assert jar_digest() == source_digest(), "run scripts/build_jvm_jar.sh after editing the sources"


def _parse(spark: Any, lines: list[str]) -> list[Any]:
    function = json_fields_function(spark, COLUMNS)
    assert function is not None, "every session build_spark_session makes has the jar"
    frame = spark.createDataFrame([(line,) for line in lines], "value string")
    layout = f"X'{json_layout(COLUMNS).encode().hex()}'"  # the layout's UTF-8 bytes
    parsed = frame.selectExpr(f"{function}(CAST(value AS BINARY), {layout}) AS j")
    return [None if row.j is None else tuple(row.j) for row in parsed.collect()]


def test_the_typed_parse_takes_complete_tuples_in_any_key_case(spark: Any) -> None:
    """NES upper-cases unquoted names, so a source's keys are mostly in another case than its
    columns: those tuples are the typed parse's, not the general rules'."""
    assert _parse(
        spark,
        [
            '{"ID": 1, "V": 0.5, "S": "x"}',
            '{"id": 2, "v": 1e3, "s": "y", "other": [1, {"a": null}]}',
            '{"Id": -3, "v": 7, "s": 2.50}',  # a number as Spark writes it back
            '{"ID": 4, "ID": 5, "V": 0, "S": true}',
        ],
    ) == [(1, 0.5, "x"), (2, 1000.0, "y"), (-3, 7.0, "2.5"), (5, 0.0, "true")]


@pytest.mark.parametrize(
    "line",
    [
        '{"ID": 1, "V": 0.5}',  # a column missing
        '{"ID": null, "V": 0.5, "S": "x"}',
        '{"ID": 1.0, "V": 0.5, "S": "x"}',  # a float in an integer column
        '{"ID": "1", "V": 0.5, "S": "x"}',  # a number in a string: the general rules' own
        '{"ID": 9223372036854775808, "V": 0.5, "S": "x"}',  # past 64 bits
        '{"ID": 1, "V": NaN, "S": "x"}',
        '{"ID": 1, "V": 0.5, "S": {"x": 1}}',  # nested: the general rules' JSON text
        '{"id": 1, "Id": 1, "V": 0.5, "S": "x"}',  # no exact key, and case twins
        '{"id": 1, "V": 0.5, "S": "x", "a": 1, "A": 2}',  # case twins elsewhere
        '{"ID": 1, "ID": "x", "V": 0.5, "S": "x"}',  # twice, once not an integer
        '{"ID": 1, "V": 0.5, "S": "x"} {}',  # more after the object
        "[1, 2]",
        '{"ID": 1, "V": 0.5, "S": "x"',
        "{'ID': 1, 'V': 0.5, 'S': 'x'}",  # Spark's JSON reads single quotes: the general rules
        '{"\u0131d": 1, "V": 0.5, "S": "x"}',  # dotless i: case outside ASCII
    ],
)
def test_the_typed_parse_leaves_the_rest_to_the_general_rules(spark: Any, line: str) -> None:
    assert _parse(spark, [line]) == [None]


COMPLETE = '{"ID": 1, "V": 0.5, "S": "x"}'


@pytest.mark.parametrize(
    "raw",
    [
        b"\xef\xbb\xbf" + COMPLETE.encode(),  # a byte order mark
        COMPLETE.encode("utf-16-le"),  # Jackson would guess these encodings
        COMPLETE.encode("utf-16-be"),
        b"\xff\xfe" + COMPLETE.encode("utf-16-le"),
        COMPLETE.replace('"x"', '"\xc1\x81"').encode("latin-1"),  # overlong 'A'
        COMPLETE.replace('"x"', '"\xf4\x90\x80\x80"').encode("latin-1"),  # past U+10FFFF
        COMPLETE.replace('"x"', '"\xed\xa0\x80"').encode("latin-1"),  # a surrogate
        COMPLETE.replace('"S"', '"\xc1\x93"').encode("latin-1"),  # an overlong key 'S'
        COMPLETE.replace('"x"', '"\xe9"').encode("latin-1"),  # cut short
    ],
)
def test_bytes_the_general_rules_decode_otherwise_are_theirs(spark: Any, raw: bytes) -> None:
    """The general rules decode UTF-8 (malformed bytes as U+FFFD); Jackson alone would guess
    another encoding or pass malformed bytes."""
    function = json_fields_function(spark, COLUMNS)
    frame = spark.createDataFrame([(raw.hex(),)], "hex string")
    layout = f"X'{json_layout(COLUMNS).encode().hex()}'"
    parsed = frame.selectExpr(f"{function}(unhex(hex), {layout}) AS j").collect()
    assert parsed[0].j is None


def test_valid_utf8_beyond_ascii_is_the_typed_parse_s(spark: Any) -> None:
    line = COMPLETE.replace('"x"', '"\u00e9\u20ac\U0001f600"')
    assert _parse(spark, [line]) == [(1, 0.5, "\u00e9\u20ac\U0001f600")]


class _SessionWithoutTheJar:
    """A Spark Connect session whose server lacks the jar: it registers a Java UDF without
    loading its class, and running it fails."""

    def __init__(self) -> None:
        self.registered: list[str] = []
        self.udf = self

    def registerJavaFunction(self, name: str, java_class: str, return_type: Any) -> None:
        self.registered.append(name)

    def sql(self, text: str) -> Any:
        raise RuntimeError("[CANNOT_LOAD_FUNCTION_CLASS] Cannot load class io.streamctl...")


@pytest.mark.quick
def test_a_session_without_the_jar_gets_spark_expressions_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = _SessionWithoutTheJar()
    with caplog.at_level("WARNING", logger="streamctl.spark.jvm_functions"):
        assert float_text_function(session) is None  # type: ignore[arg-type]
        assert json_fields_function(session, COLUMNS) is None  # type: ignore[arg-type]
        assert float_text_function(session) is None  # type: ignore[arg-type]
    # probed once per session: the float text and the jar's digest, registered once each
    assert session.registered == ["streamctl_nes_float_text", "streamctl_jar_digest"]
    warnings = [record for record in caplog.records if "--jars" in record.getMessage()]
    assert len(warnings) == 1


def test_the_json_keys_are_read_with_the_factory_of_spark_from_json(spark: Any) -> None:
    """``NesJsonKeys`` reads a JSON tuple's keys as ``from_json`` does: with a Jackson factory
    of the same features and limits as Spark's own (``JSONOptions`` with from_json's
    defaults), so the same texts are JSON objects to both."""
    jvm = spark.sparkContext._jvm
    options = jvm.org.apache.spark.sql.catalyst.json.JSONOptions(
        jvm.PythonUtils.toScalaMap({}), "UTC", "_corrupt_record"
    )
    sparks, ours = options.buildJsonFactory(), jvm.io.streamctl.NesJsonKeys.factory()
    for features in ("getParserFeatures", "getFormatParserFeatures", "getGeneratorFeatures"):
        assert getattr(ours, features)() == getattr(sparks, features)(), features
    read_limits = ("getMaxNestingDepth", "getMaxNumberLength", "getMaxStringLength",
                   "getMaxNameLength", "getMaxDocumentLength")  # fmt: skip
    for constraints, limits in (
        ("streamReadConstraints", read_limits),
        ("streamWriteConstraints", ("getMaxNestingDepth",)),
    ):
        theirs, mine = getattr(sparks, constraints)(), getattr(ours, constraints)()
        for limit in limits:
            assert getattr(mine, limit)() == getattr(theirs, limit)(), (constraints, limit)


def test_a_session_with_another_build_of_the_jar_plans_expressions(
    spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Spark Connect server started with another release's jar has the classes, some with
    other signatures: the probe tells the builds apart by the digest each jar records, and
    such a session gets Spark expressions, not calls that fail in its queries."""
    assert jvm_functions._probe(spark) is not None  # this build: the jar's functions
    monkeypatch.setattr(jvm_functions, "jar_digest", lambda: "0" * 64)
    assert jvm_functions._probe(spark) is None
    assert "another build" in caplog.text
