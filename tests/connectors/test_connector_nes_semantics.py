"""NebulaStream semantics reproduced in pure Python: the generator's rows and the checksum sink.

The expected values are those of the conformance suite (sources/Generator.test,
sinks/InlineSink.test), so these tests pin our reading of NES's source code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance import needs_suite, suite_testdata

from streamctl.nes_text import (
    Checksum,
    format_float,
    format_row,
    format_value,
    parse_value,
)
from streamctl.planner.generator_schema import (
    GeneratorSchemaError,
    parse_generator_schema,
    parse_rate,
)
from streamctl.spark.generator import GeneratorPlan, mt19937

pytestmark = pytest.mark.quick

TESTDATA = suite_testdata()


def plan(
    schema: str, stop: str, *, max_runtime_ms: int = -1, data_dir: str | None = None
) -> GeneratorPlan:
    return GeneratorPlan(
        parse_generator_schema(schema), stop, 1, parse_rate("FIXED", None), max_runtime_ms, data_dir
    )


def checksum(lines: list[str]) -> str:
    return Checksum.of_lines(lines).line()


def test_checksum_of_the_inline_sink_example() -> None:
    rows = [(1, 1, 12), (1, 2, 23), (1, 3, 34), (1, 4, 45), (1, 5, 56)]
    lines = [format_row(["UINT64"] * 3, row) for row in rows]
    assert checksum(lines) == "5 1505"
    assert (Checksum.of_lines(lines[:2]) + Checksum.of_lines(lines[2:])).line() == "5 1505"


def test_checksum_counts_bytes_as_signed_chars() -> None:
    # 'é' is 0xC3 0xA9: as signed chars -61 and -87, summed into a size_t (mod 2**64).
    assert Checksum.of_lines(["é"]).checksum == (0xC3 - 256 + 0xA9 - 256 + 10) % 2**64


def test_sequences_stop_as_nes_does() -> None:
    assert list(plan("SEQUENCE UINT64 0 10 1, SEQUENCE UINT64 0 5 1", "ALL").rows()) == [
        "0,0", "1,1", "2,2", "3,3", "4,4", "5,5", "6,5", "7,5", "8,5", "9,5",
    ]  # fmt: skip
    mixed = plan(
        "SEQUENCE UINT64 0 10 1, SEQUENCE UINT32 0 9 1, SEQUENCE UINT16 0 8 1, "
        "SEQUENCE UINT8 0 7 1, SEQUENCE INT64 0 6 1, SEQUENCE INT32 0 5 1, "
        "SEQUENCE INT16 0 4 1, SEQUENCE INT8 0 3 1, SEQUENCE FLOAT64 0 2 1, "
        "SEQUENCE FLOAT32 0 1 1",
        "ALL",
    )
    rows = list(mixed.rows())
    assert rows[0] == "0,0,0,0,0,0,0,0,0,0"
    assert rows[-1] == "9,9,8,7,6,5,4,3,2,1"
    assert len(rows) == 10


@pytest.mark.parametrize(
    ("schema", "stop", "expected"),
    [
        ("SEQUENCE UINT64 0 10000 1, SEQUENCE UINT64 0 100 1", "ALL", "10000 4032240"),
        ("SEQUENCE UINT64 0 100 1, SEQUENCE UINT64 0 200 1", "ALL", "200 60740"),
        ("SEQUENCE UINT64 0 100 1, SEQUENCE UINT64 0 200 1", "ONE", "100 25440"),
    ],
)
def test_generator_checksums_of_the_suite(schema: str, stop: str, expected: str) -> None:
    generated = plan(schema, stop)
    assert checksum(list(generated.rows())) == expected
    assert generated.row_limit() == int(expected.split()[0])


@needs_suite
def test_random_fields_follow_nes_mt19937_stream() -> None:
    text = plan(
        "SEQUENCE UINT64 0 20 1, WORDLIST small/wordlist.csv, RANDOMSTR 1 6",
        "ONE",
        data_dir=str(TESTDATA),
    )
    rows = list(text.rows())
    assert rows[:4] == ["0,black,MI/JLF", "1,purple,Q", "2,purple,Ht8GZ", "3,orange,+lSUL"]
    assert rows[-1] == "19,yellow,IgiKX"
    assert len(rows) == 20


def test_mt19937_matches_the_cpp_reference_value() -> None:
    # The C++ standard requires the 10000th value of a default-seeded mt19937 to be 4123659995.
    rng = mt19937(5489)
    for _ in range(9999):
        rng.getrandbits(32)
    assert rng.getrandbits(32) == 4123659995


def test_stop_policies_and_runtime_limit() -> None:
    assert list(plan("NORMAL_DISTRIBUTION FLOAT64 0 1", "ALL").rows()) == []  # no sequence
    assert plan("NORMAL_DISTRIBUTION FLOAT64 0 1", "ONE").row_limit() is None
    assert plan("SEQUENCE INT32 0 5 1", "NONE").is_bounded() is False
    timed = plan("NORMAL_DISTRIBUTION FLOAT64 0 10", "ONE", max_runtime_ms=2000)
    assert timed.row_limit() == 2000  # emit_rate 1000 for 2 s
    assert len(list(timed.rows())) == 2000


def test_row_function_agrees_with_rows_on_sequences() -> None:
    generated = plan("SEQUENCE FLOAT64 0 1 0.1, SEQUENCE INT16 -5 5 3", "ALL")
    rows = list(generated.rows())
    row = generated.row_function()
    assert [row(i) for i in range(len(rows))] == rows
    # A stopped sequence keeps writing its first position at or past the end:
    # 0.1 added ten times is 0.9999999999999999 (written as 1), once more 1.0999999999999999.
    assert rows[-1] == "1,7"
    assert row(100) == "1.1,7"


def test_generator_schema_errors() -> None:
    for schema in ("", "SEQUENCE UINT64 0 1", "SEQUENCE UINT64 0 1 x", "GAUSS FLOAT64 0 1"):
        with pytest.raises(GeneratorSchemaError):
            parse_generator_schema(schema)
    with pytest.raises(GeneratorSchemaError):
        parse_rate("SINUS", "amplitude 5")


def test_nes_text_format() -> None:
    assert [format_float(v) for v in (3.141, 153.0, -1.8260869565, 0.125, 0.0)] == [
        "3.141", "153.0", "-1.826087", "0.125", "0.0",
    ]  # fmt: skip
    assert format_value("BOOLEAN", True) == "true"
    assert format_value("INT32", None) == "NULL"
    assert format_value("VARSIZED", "a b", quote_strings=True) == '"a b"'
    assert parse_value("UINT64", "18446744073709551615") == 2**64 - 1
    assert parse_value("FLOAT32", "NULL") is None


def test_committed_files_follow_the_spark_metadata_log(tmp_path: Path) -> None:
    from streamctl.sink_files import _spark_metadata_files

    log_dir = tmp_path / "_spark_metadata"
    log_dir.mkdir()

    def entry(name: str, action: str = "add") -> str:
        return json.dumps({"path": f"file://{tmp_path}/{name}", "action": action})

    (log_dir / "8").write_text("v1\n" + entry("old.txt"))  # superseded by the compaction
    (log_dir / "9.compact").write_text("v1\n" + entry("a.txt") + "\n" + entry("b.txt"))
    (log_dir / "10").write_text("v1\n" + entry("c%20d.txt") + "\n" + entry("a.txt", "delete"))
    (log_dir / ".11.tmp").write_text("v1\n" + entry("uncommitted.txt"))
    assert _spark_metadata_files(log_dir) == [tmp_path / "b.txt", tmp_path / "c d.txt"]


def test_kafka_reader_options() -> None:
    from streamctl.planner.options import normalize_source_options
    from streamctl.spark.source_readers import kafka_reader_options

    config = normalize_source_options(
        "KAFKA",
        {
            "bootstrap_servers": "k1:9092,k2:9092",
            "topic": "events",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "u",
            "sasl_password": 'p"w',
            "kafka.client.id": "streamctl",
        },
    )
    options = kafka_reader_options(config)
    assert options["kafka.bootstrap.servers"] == "k1:9092,k2:9092"
    assert options["subscribe"] == "events"
    assert options["startingOffsets"] == "earliest"
    assert options["kafka.client.id"] == "streamctl"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p\\"w";'
    )
