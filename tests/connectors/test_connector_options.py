"""Connector options: NES keys, canonical keys, defaults; every bad key or value is named."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from streamctl.planner.options import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    ConnectorOptionError,
    normalize_sink_options,
    normalize_source_options,
    redact,
    secret_keys,
)
from streamctl.secret_options import SECRET_WORDS, URL_SECRET_OPTIONS
from streamctl.spark.specs import SinkSpec, SourceSpec

pytestmark = pytest.mark.quick


def test_nes_statement_keys_are_accepted_and_canonicalised() -> None:
    config = normalize_source_options(
        "File",
        {
            "`SOURCE`.FILE_PATH": "small/stream8.csv",
            "PARSER.`TYPE`": "csv",
            "PARSER.FIELD_DELIMITER": "|",
            "parser.allow_commas_in_strings": "false",
        },
    )
    assert config == {
        "file_path": "small/stream8.csv",
        "format": "CSV",
        "field_delimiter": "|",
        "tuple_delimiter": "\n",
        "allow_delimiter_in_quotes": False,
    }


def test_short_canonical_keys_and_defaults() -> None:
    assert normalize_source_options("INLINE", {"data": "1,2\n", "field_delimiter": "\\t"}) == {
        "data": "1,2\n",
        "format": "CSV",
        "field_delimiter": "\t",
        "tuple_delimiter": "\n",
        "allow_delimiter_in_quotes": True,
    }


def test_generator_options_as_in_the_suite() -> None:
    config = normalize_source_options(
        "GENERATOR",
        {
            "`SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES": "ALL",
            "`SOURCE`.SEED": 1,
            "`SOURCE`.GENERATOR_RATE_TYPE": "FIXED",
            "`SOURCE`.GENERATOR_RATE_CONFIG": "emit_rate 1000",
            "`SOURCE`.MAX_RUNTIME_MS": 1000000,
            "PARSER.`TYPE`": "CSV",
            "`SOURCE`.GENERATOR_SCHEMA": "SEQUENCE UINT64 0 10 1,\n SEQUENCE FLOAT64 0 2 1",
        },
    )
    assert config["stop_when"] == "ALL"
    assert config["seed"] == 1
    assert config["max_runtime_ms"] == 1000000
    assert config["generator_schema"] == "SEQUENCE UINT64 0 10 1, SEQUENCE FLOAT64 0.0 2.0 1.0"
    assert config["rate_config"] == "emit_rate 1000.0"


def test_normalisation_is_idempotent_for_every_type() -> None:
    samples = {
        "FILE": {"file_path": "/data"},
        "INLINE": {"data": ""},
        "GENERATOR": {"generator_schema": "SEQUENCE INT8 -3 3 2", "stop_when": "ONE"},
        "TCP": {"host": "localhost", "port": "9000"},
        "KAFKA": {"bootstrap_servers": "k:9092", "topic": "t", "kafka.client.id": "x"},
    }
    for source_type, raw in samples.items():
        once = normalize_source_options(source_type, raw)
        assert normalize_source_options(source_type, once) == once


def test_every_option_has_a_valid_default_or_is_required() -> None:
    for tables in (SOURCE_OPTIONS, SINK_OPTIONS):
        for options in tables.values():
            keys = [spec.key for spec in options]
            assert len(keys) == len(set(keys))
            for spec in options:
                if spec.default is not None:
                    assert spec.convert(spec.key, spec.default) == spec.default


@pytest.mark.parametrize(
    ("kind", "type_name", "raw", "named"),
    [
        ("source", "FILE", {"file_path": "x", "bogus": 1}, ["bogus", "file_path"]),
        ("source", "FILE", {}, ["file_path", "required"]),
        ("source", "FILE", {"file_path": ""}, ["file_path", "''"]),
        ("source", "FILE", {"file_path": "x", "format": "XML"}, ["format", "'XML'", "PARQUET"]),
        (
            "source",
            "FILE",
            {"file_path": "x", "field_delimiter": "ab"},
            ["field_delimiter", "'ab'"],
        ),
        ("source", "FILE", {"file_path": "x", "field_delimiter": '"'}, ["field_delimiter"]),
        ("source", "FILE", {"file_path": "x", "SOURCE.TYPE": "CSV"}, ["SOURCE.TYPE"]),
        ("source", "FILE", {"file_path": "x", "SOURCE.FILE_PATH": "y"}, ["twice", "file_path"]),
        ("source", "FILE", {"file_path": "x", "allow_delimiter_in_quotes": "maybe"}, ["'maybe'"]),
        ("source", "INLINE", {"data": 5}, ["data", "5"]),
        ("source", "INLINE", {"data": "1", "format": "PARQUET"}, ["format", "'PARQUET'"]),
        ("source", "TCP", {"host": "h", "port": 0}, ["port", "0", "65535"]),
        ("source", "TCP", {"host": "h", "port": "x"}, ["port", "'x'"]),
        ("source", "TCP", {"host": "h", "port": 1, "tuple_delimiter": ";"}, ["tuple_delimiter"]),
        ("source", "TCP", {"port": 1}, ["host", "required"]),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE UINT8 0 300 1", "stop_when": "ALL"},
            ["generator_schema", "300", "UINT8"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE VARSIZED 0 3 1", "stop_when": "ALL"},
            ["generator_schema", "VARSIZED"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "ALTERNATING INT32 1 0 1 2 3", "stop_when": "ALL"},
            ["generator_schema", "ALTERNATING"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE INT8 0 120 100", "stop_when": "ALL"},
            ["overflows", "INT8"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "RANDOMSTR 5 2", "stop_when": "ONE"},
            ["generator_schema", "RANDOMSTR 5 2"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE UINT64 0 1 1", "stop_when": "SOME"},
            ["stop_when", "'SOME'", "NONE"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE UINT64 0 1 1", "stop_when": "ALL", "seed": -1},
            ["seed", "-1"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE UINT64 0 1 1", "stop_when": "ALL", "rate_type": "SINUS"},
            ["rate_config", "amplitude"],
        ),
        (
            "source",
            "GENERATOR",
            {"generator_schema": "SEQUENCE UINT64 0 1 1", "stop_when": "ALL", "rate_config": "x"},
            ["rate_config", "'x'"],
        ),
        (
            "source",
            "KAFKA",
            {"bootstrap_servers": "k:1", "topic": "t", "kafka.sasl.jaas.config": "secret"},
            ["kafka.sasl.jaas.config", "sasl_password"],
        ),
        ("source", "KAFKA", {"bootstrap_servers": "k:1"}, ["topic", "topic_pattern"]),
        (
            "source",
            "KAFKA",
            {"bootstrap_servers": "k:1", "topic": "t", "sasl_username": "u"},
            ["sasl_username", "sasl_password"],
        ),
        (
            "source",
            "KAFKA",
            {"bootstrap_servers": "k:1", "topic": "t", "starting_offsets": "x"},
            ["x"],
        ),
        ("source", "MQTT", {}, ["MQTT", "KAFKA"]),
        ("sink", "FILE", {"file_path": "o", "format": "AVRO"}, ["format", "'AVRO'"]),
        ("sink", "FILE", {"file_path": "o", "quote_strings": 2}, ["quote_strings", "2"]),
        ("sink", "VOID", {"file_path": "o"}, ["file_path", "none"]),
        ("sink", "CHECKSUM", {"format": "CSV"}, ["format", "file_path"]),
        ("sink", "POSTGRESQL", {"table": "t"}, ["url", "dbname"]),
        (
            "sink",
            "POSTGRESQL",
            {"url": "postgresql://h/d", "table": "bad name"},
            ["table", "'bad name'"],
        ),
        (
            "sink",
            "POSTGRESQL",
            {"url": "postgresql://h/d", "table": "t", "port": 70000},
            ["port", "70000"],
        ),
        ("sink", "POSTGRESQL", {"url": "postgresql://h/d"}, ["table", "required"]),
        ("sink", "KAFKA", {}, ["KAFKA", "POSTGRESQL"]),
    ],
)
def test_bad_keys_and_values_are_named(
    kind: str, type_name: str, raw: dict[str, object], named: list[str]
) -> None:
    normalize = normalize_source_options if kind == "source" else normalize_sink_options
    with pytest.raises(ConnectorOptionError) as raised:
        normalize(type_name, raw)
    for text in named:
        assert text in str(raised.value)


def test_nothing_but_connector_option_errors() -> None:
    weird_values: list[object] = [None, [], {}, object(), float("nan"), True, b"x", -(10**30)]
    for tables, normalize in (
        (SOURCE_OPTIONS, normalize_source_options),
        (SINK_OPTIONS, normalize_sink_options),
    ):
        for type_name, options in tables.items():
            for spec in options:
                for value in weird_values:
                    with contextlib.suppress(ConnectorOptionError):
                        normalize(type_name, {spec.key: value})
    with pytest.raises(ConnectorOptionError):
        normalize_source_options("FILE", [("file_path", "x")])  # type: ignore[arg-type]
    with pytest.raises(ConnectorOptionError):
        normalize_source_options("FILE", {1: "x"})  # type: ignore[dict-item]


def test_secrets_are_marked_and_redacted() -> None:
    assert secret_keys("POSTGRESQL") == {"password", "url"}
    assert {"sasl_password", "ssl_truststore_password"} <= secret_keys("KAFKA")
    assert secret_keys("FILE") == set()
    config = normalize_sink_options(
        "POSTGRESQL", {"host": "db", "dbname": "d", "table": "t", "password": "hunter2"}
    )
    assert redact("POSTGRESQL", config)["password"] == "***"
    assert redact("POSTGRESQL", config)["url"] is None


def test_the_secret_vocabulary_names_every_secret_option() -> None:
    """streamctl.secret_options names secret options without the table (it is a leaf): every
    name of a secret option holds a secret word, or is one of URL_SECRET_OPTIONS."""
    names = {
        name.lower()
        for specs in (*SOURCE_OPTIONS.values(), *SINK_OPTIONS.values())
        for spec in specs
        if spec.secret
        for name in (spec.key, *(n.rpartition(".")[2] for n in spec.nes_names))
    }
    wordless = {name for name in names if not any(word in name for word in SECRET_WORDS)}
    assert tuple(sorted(wordless)) == URL_SECRET_OPTIONS


def test_specs_normalise_their_config_and_schema() -> None:
    spec = SourceSpec(7, "file", {"SOURCE.FILE_PATH": "x"}, [{"name": "a", "type": "text"}])
    assert spec.type == "FILE"
    assert spec.config["file_path"] == "x"
    assert spec.schema == ({"name": "a", "type": "VARSIZED", "nullable": True},)
    with pytest.raises(ConnectorOptionError):
        SinkSpec("s", "FILE", {"file_path": "o"}, [])
    with pytest.raises(ConnectorOptionError):
        SinkSpec("s", "FILE", {"file_path": "o"}, [{"name": "a", "type": "INT128"}])


def test_file_sink_directory_defaults_to_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamctl.sink_files import file_sink_directory, sink_root

    monkeypatch.setenv("STREAMCTL_STATE_DIR", str(tmp_path))
    spec = SinkSpec("results", "FILE", {}, [{"name": "a", "type": "INT8"}])
    assert spec.config["file_path"] is None
    assert sink_root(spec) == tmp_path / "sinks" / "results"
    assert file_sink_directory(spec, "query 7") == tmp_path / "sinks" / "results" / "query_7"
