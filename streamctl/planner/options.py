"""The one table of connector options, and their validation (pure Python, no pyspark).

Protocol: the coordinator calls :func:`normalize_source_options` / :func:`normalize_sink_options`
when it creates a physical source or a sink, inside its catalog transaction, and stores the
result as the entity's ``config``. Agents later build their Spark connectors from that stored,
canonical config (``streamctl.spark.specs``). Both functions are fast (no I/O, no
network, no filesystem) and raise nothing but :class:`ConnectorOptionError`.

Keys. A raw key is accepted as written in NebulaStream statements -- case-insensitive,
backticks stripped, with an optional ``SOURCE.`` / ``SINK.`` / ``PARSER.`` /
``INPUT_FORMATTER.`` / ``OUTPUT_FORMATTER.`` prefix (```SOURCE`.FILE_PATH``,
``PARSER.FIELD_DELIMITER``, ``'ALL' AS `SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES``) -- or as
the short canonical key (``file_path``, ``field_delimiter``, ``stop_when``). The result has
canonical keys only, every option of the type present (defaults filled in; ``None`` where an
optional option has no value), with typed values. Kafka sources also pass through any
``kafka.*`` key to Spark's Kafka client unchanged.

Values. Strings, numbers and booleans as the statement parser produces them: ``'|'``, ``1``,
``TRUE``, ``'true'``. Delimiters accept the escapes ``\\t``, ``\\n``, ``\\r``, ``\\\\``.

Secrets (passwords, Kafka SASL/SSL credentials) are marked in the table; :func:`secret_keys`
names them so that callers can encrypt them at rest and redact them in answers and logs. The
words that mark a credential and the masking of statement text and URLs are
:mod:`streamctl.secret_options`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from streamctl.planner import generator_schema
from streamctl.secret_options import SECRET_WORDS

__all__ = [
    "SINK_OPTIONS",
    "SOURCE_OPTIONS",
    "ConnectorOptionError",
    "OptionSpec",
    "normalize_sink_options",
    "normalize_source_options",
    "redact",
    "secret_keys",
]


class ConnectorOptionError(ValueError):
    """An unknown option key or an invalid value; the message names the key, value and rule."""


Converter = Callable[[str, Any], Any]
"""Converts a raw value of the named key to its canonical value, or raises ConnectorOptionError."""


@dataclass(frozen=True)
class OptionSpec:
    """One connector option.

    ``key`` is canonical; ``nes_names`` are the NebulaStream spellings (``PREFIX.NAME`` matches
    only with that prefix, a bare ``NAME`` with any prefix or none). ``allowed`` describes the
    valid values for error messages. ``path`` marks a local file or directory whose contents an
    agent reads as data or writes: the coordinator confines it to the file roots
    (:mod:`streamctl.domain.paths`).
    """

    key: str
    convert: Converter
    allowed: str
    default: Any = None
    required: bool = False
    secret: bool = False
    nes_names: tuple[str, ...] = ()
    description: str = ""
    path: bool = False


# --- value converters ------------------------------------------------------------------------


def _fail(key: str, value: Any, allowed: str) -> ConnectorOptionError:
    shown = repr(value) if len(repr(value)) <= 100 else repr(value)[:100] + "..."
    return ConnectorOptionError(f"option {key!r}: invalid value {shown}; expected {allowed}")


def _string(allowed: str = "a non-empty string") -> Converter:
    def convert(key: str, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _fail(key, value, allowed)
        text = str(value)
        if not text.strip():
            raise _fail(key, value, allowed)
        return text

    return convert


def _any_text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(key, value, "a string")
    return value


def _integer(minimum: int, maximum: int) -> Converter:
    allowed = f"an integer from {minimum} to {maximum}"

    def convert(key: str, value: Any) -> int:
        if isinstance(value, bool):
            raise _fail(key, value, allowed)
        is_integral_float = isinstance(value, float) and value.is_integer()
        is_integer_text = isinstance(value, str) and re.fullmatch(r"\s*[-+]?[0-9]+\s*", value)
        if is_integer_text:
            read = generator_schema.decimal_integer(str(value).strip())
            if read is None:
                raise _fail(key, value, allowed)
            number = read
        elif isinstance(value, int) or is_integral_float:
            number = int(value)
        else:
            raise _fail(key, value, allowed)
        if not minimum <= number <= maximum:
            raise _fail(key, value, allowed)
        return number

    return convert


def _positive_number(key: str, value: Any) -> float:
    allowed = "a positive number"
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise _fail(key, value, allowed) from None
    if not math.isfinite(number) or number <= 0:
        raise _fail(key, value, allowed)
    return number


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise _fail(key, value, "a boolean (true/false, 1/0, yes/no)")


def _choice(*choices: str) -> Converter:
    allowed = "one of " + ", ".join(choices)

    def convert(key: str, value: Any) -> str:
        text = str(value).strip().upper() if isinstance(value, str) else None
        if text not in choices:
            raise _fail(key, value, allowed)
        return text

    return convert


_ESCAPES = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\\\": "\\"}


def _delimiter(key: str, value: Any) -> str:
    allowed = "a single character (escapes \\t, \\n, \\r, \\\\ allowed)"
    if not isinstance(value, str):
        raise _fail(key, value, allowed)
    text = _ESCAPES.get(value, value)
    if len(text) != 1 or text == '"':
        raise _fail(key, value, allowed + ", not a double quote")
    return text


def _generator_schema(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(key, value, "a generator schema such as 'SEQUENCE UINT64 0 10 1'")
    try:
        return generator_schema.format_generator_schema(
            generator_schema.parse_generator_schema(value)
        )
    except generator_schema.GeneratorSchemaError as error:
        raise ConnectorOptionError(f"option {key!r}: invalid value {value!r}: {error}") from None


def _rate_config(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(key, value, "'emit_rate <n>' or 'amplitude <a>, frequency <f>'")
    return value.strip()


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_$]{0,62}"


def _table_name(key: str, value: Any) -> str:
    allowed = "a table name, optionally schema-qualified (letters, digits, '_', '$')"
    if not isinstance(value, str) or not re.fullmatch(rf"(?:{_IDENTIFIER}\.)?{_IDENTIFIER}", value):
        raise _fail(key, value, allowed)
    return value


def _kafka_offsets(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(key, value, "'earliest', 'latest' or a JSON object of offsets")
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    if text.startswith("{") and text.endswith("}"):
        return text
    raise _fail(key, value, "'earliest', 'latest' or a JSON object of offsets")


# --- the table -------------------------------------------------------------------------------

_PORT = _integer(1, 65535)
_UINT32 = _integer(0, 2**32 - 1)


def _parser_options(formats: tuple[str, ...]) -> tuple[OptionSpec, ...]:
    return (
        OptionSpec(
            "format",
            _choice(*formats),
            "one of " + ", ".join(formats),
            default="CSV",
            nes_names=("PARSER.TYPE", "INPUT_FORMATTER.TYPE", "INPUT_FORMAT"),
            description="how tuples are encoded",
        ),
        OptionSpec(
            "field_delimiter",
            _delimiter,
            "a single character",
            default=",",
            nes_names=("FIELD_DELIMITER",),
            description="CSV: the character between fields",
        ),
        OptionSpec(
            "tuple_delimiter",
            _delimiter,
            "a single character",
            default="\n",
            nes_names=("TUPLE_DELIMITER",),
            description="the character ending a tuple (CSV and JSON lines)",
        ),
        OptionSpec(
            "allow_delimiter_in_quotes",
            _boolean,
            "a boolean",
            default=True,
            nes_names=("ALLOW_COMMAS_IN_STRINGS",),
            description='CSV: a field in double quotes may contain the delimiter ("" is a quote)',
        ),
    )


_CSV_JSON = ("CSV", "JSON")

SOURCE_OPTIONS: Final[Mapping[str, tuple[OptionSpec, ...]]] = {
    "FILE": (
        OptionSpec(
            "file_path",
            _string("a file or directory path"),
            "a file or directory path",
            required=True,
            nes_names=("FILE_PATH",),
            description="a file (read once: bounded) or a directory (new files are read)",
            path=True,
        ),
        *_parser_options(("CSV", "JSON", "PARQUET")),
    ),
    "INLINE": (
        OptionSpec(
            "data",
            _any_text,
            "the tuples as text",
            required=True,
            nes_names=("INLINE_DATA", "DATA"),
            description="what NES's ATTACH INLINE carries, in the source's format",
        ),
        *_parser_options(_CSV_JSON),
    ),
    "GENERATOR": (
        OptionSpec(
            "generator_schema",
            _generator_schema,
            "fields such as 'SEQUENCE UINT64 0 10 1, NORMAL_DISTRIBUTION FLOAT64 0 1'",
            required=True,
            nes_names=("GENERATOR_SCHEMA",),
        ),
        OptionSpec(
            "stop_when",
            _choice(*generator_schema.STOP_POLICIES),
            "one of " + ", ".join(generator_schema.STOP_POLICIES),
            required=True,
            nes_names=("STOP_GENERATOR_WHEN_SEQUENCE_FINISHES",),
            description="stop when ALL sequences finished, ONE did, or NONE (never)",
        ),
        OptionSpec(
            "seed",
            _UINT32,
            "an integer from 0 to 4294967295",
            nes_names=("SEED",),
            description="seed of the random fields (default: derived from the source id)",
        ),
        OptionSpec(
            "rate_type",
            _choice(*generator_schema.RATE_TYPES),
            "one of " + ", ".join(generator_schema.RATE_TYPES),
            default="FIXED",
            nes_names=("GENERATOR_RATE_TYPE",),
        ),
        OptionSpec(
            "rate_config",
            _rate_config,
            "'emit_rate <n>' (FIXED) or 'amplitude <a>, frequency <f>' (SINUS)",
            default="emit_rate 1000",
            nes_names=("GENERATOR_RATE_CONFIG",),
            description="tuples per second",
        ),
        OptionSpec(
            "max_runtime_ms",
            _integer(-1, 2**31 - 1),
            "an integer from -1 (no limit) to 2147483647",
            default=-1,
            nes_names=("MAX_RUNTIME_MS",),
            description="stop after the rows of this many milliseconds at the nominal rate",
        ),
        OptionSpec(
            "flush_interval_ms",
            _integer(1, 2**31 - 1),
            "a positive integer",
            default=10,
            nes_names=("FLUSH_INTERVAL_MS",),
            description="accepted for NES compatibility; Spark batches by trigger instead",
        ),
        OptionSpec(
            "data_dir",
            _string("a directory path"),
            "a directory path",
            description="base directory of relative WORDLIST paths",
            path=True,
        ),
        OptionSpec(
            "format",
            _choice("CSV"),
            "CSV",
            default="CSV",
            nes_names=("PARSER.TYPE", "INPUT_FORMATTER.TYPE"),
            description="generators write CSV",
        ),
    ),
    "TCP": (
        OptionSpec(
            "host",
            _string("a host name or address"),
            "a host name or address",
            required=True,
            nes_names=("SOCKET_HOST",),
        ),
        OptionSpec(
            "port", _PORT, "a port from 1 to 65535", required=True, nes_names=("SOCKET_PORT",)
        ),
        *_parser_options(_CSV_JSON),
    ),
    "KAFKA": (
        OptionSpec(
            "bootstrap_servers",
            _string("host:port[,host:port...]"),
            "host:port[,host:port...]",
            required=True,
            nes_names=("BROKERS", "KAFKA.BOOTSTRAP.SERVERS"),
        ),
        OptionSpec(
            "topic", _string("a topic name"), "a topic name", nes_names=("TOPIC", "SUBSCRIBE")
        ),
        OptionSpec(
            "topic_pattern",
            _string("a Java regular expression"),
            "a Java regular expression",
            nes_names=("SUBSCRIBE_PATTERN", "SUBSCRIBEPATTERN"),
        ),
        OptionSpec(
            "starting_offsets",
            _kafka_offsets,
            "'earliest', 'latest' or a JSON object",
            default="earliest",
            nes_names=("STARTINGOFFSETS",),
        ),
        OptionSpec(
            "fail_on_data_loss",
            _boolean,
            "a boolean",
            default=True,
            nes_names=("FAILONDATALOSS",),
        ),
        OptionSpec(
            "max_offsets_per_trigger",
            _integer(1, 2**63 - 1),
            "a positive integer",
            nes_names=("MAXOFFSETSPERTRIGGER",),
        ),
        OptionSpec(
            "security_protocol",
            _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
            "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            nes_names=("KAFKA.SECURITY.PROTOCOL",),
        ),
        OptionSpec(
            "sasl_mechanism",
            _string("a SASL mechanism such as PLAIN or SCRAM-SHA-512"),
            "a SASL mechanism",
            nes_names=("KAFKA.SASL.MECHANISM",),
        ),
        OptionSpec("sasl_username", _string(), "a user name"),
        OptionSpec("sasl_password", _string(), "a password", secret=True),
        # Key and trust stores are credentials the Kafka client reads to authenticate, never
        # data a query returns, and live where the operator keeps TLS material: not ``path``.
        OptionSpec(
            "ssl_truststore_location",
            _string("a path"),
            "a path",
            nes_names=("KAFKA.SSL.TRUSTSTORE.LOCATION",),
        ),
        OptionSpec(
            "ssl_truststore_password",
            _string(),
            "a password",
            secret=True,
            nes_names=("KAFKA.SSL.TRUSTSTORE.PASSWORD",),
        ),
        OptionSpec(
            "ssl_keystore_location",
            _string("a path"),
            "a path",
            nes_names=("KAFKA.SSL.KEYSTORE.LOCATION",),
        ),
        OptionSpec(
            "ssl_keystore_password",
            _string(),
            "a password",
            secret=True,
            nes_names=("KAFKA.SSL.KEYSTORE.PASSWORD",),
        ),
        OptionSpec(
            "ssl_key_password",
            _string(),
            "a password",
            secret=True,
            nes_names=("KAFKA.SSL.KEY.PASSWORD",),
        ),
        *_parser_options(_CSV_JSON),
    ),
}
"""Source options by source type."""

SINK_OPTIONS: Final[Mapping[str, tuple[OptionSpec, ...]]] = {
    "FILE": (
        OptionSpec(
            "file_path",
            _string("a directory path"),
            "a directory path",
            nes_names=("FILE_PATH",),
            description="output directory (default: <state dir>/sinks/<sink name>); each "
            "query writes a subdirectory of its own",
            path=True,
        ),
        OptionSpec(
            "format",
            _choice("CSV", "JSON", "PARQUET"),
            "one of CSV, JSON, PARQUET",
            default="CSV",
            nes_names=("INPUT_FORMAT", "OUTPUT_FORMAT", "OUTPUT_FORMATTER.TYPE", "PARSER.TYPE"),
        ),
        OptionSpec(
            "field_delimiter",
            _delimiter,
            "a single character",
            default=",",
            nes_names=("FIELD_DELIMITER",),
        ),
        OptionSpec(
            "quote_strings",
            _boolean,
            "a boolean",
            default=False,
            nes_names=("QUOTE_STRINGS", "ESCAPE_STRINGS"),
            description="CSV: write VARSIZED values in double quotes",
        ),
    ),
    "PRINT": (
        OptionSpec(
            "format",
            _choice("CSV", "JSON"),
            "one of CSV, JSON",
            default="CSV",
            nes_names=("INPUT_FORMAT", "OUTPUT_FORMAT", "OUTPUT_FORMATTER.TYPE", "PARSER.TYPE"),
        ),
        OptionSpec(
            "quote_strings",
            _boolean,
            "a boolean",
            default=False,
            nes_names=("QUOTE_STRINGS", "ESCAPE_STRINGS"),
        ),
    ),
    "VOID": (),
    "CHECKSUM": (
        OptionSpec(
            "file_path",
            _string("a directory path"),
            "a directory path",
            nes_names=("FILE_PATH",),
            description="where per-batch checksums are kept (default: the query's checkpoint)",
            path=True,
        ),
    ),
    "POSTGRESQL": (
        OptionSpec(
            "url",
            _string("a postgresql:// URL or libpq conninfo"),
            "a postgresql:// URL or a libpq conninfo string",
            secret=True,
            nes_names=("CONNECTION_URL", "CONNINFO"),
            description="connection; host/port/dbname/user/password override its parts",
        ),
        OptionSpec("host", _string("a host name or address"), "a host name or address"),
        OptionSpec("port", _PORT, "a port from 1 to 65535", description="default: 5432"),
        OptionSpec(
            "dbname", _string("a database name"), "a database name", nes_names=("DATABASE",)
        ),
        OptionSpec("user", _string("a user name"), "a user name", nes_names=("USERNAME",)),
        OptionSpec("password", _string(), "a password", secret=True),
        OptionSpec("table", _table_name, "a table name", required=True, nes_names=("TABLE_NAME",)),
        OptionSpec(
            "create_table",
            _boolean,
            "a boolean",
            default=True,
            description="create the table from the sink schema if it does not exist",
        ),
    ),
}
"""Sink options by sink type."""

_PREFIXES: Final = ("SOURCE", "SINK", "PARSER", "INPUT_FORMATTER", "OUTPUT_FORMATTER")
_PASSTHROUGH_PREFIX: Final = {"KAFKA": "kafka."}


def _split_key(raw: Any) -> tuple[str, str]:
    """``(prefix, name)`` of a raw key, upper case, backticks removed (prefix may be '')."""
    if not isinstance(raw, str):
        raise ConnectorOptionError(f"option key {raw!r} is not a string")
    key = raw.replace("`", "").strip().upper()
    head, dot, rest = key.partition(".")
    if dot and head in _PREFIXES:
        return head, rest
    return "", key


def _resolve(table: tuple[OptionSpec, ...], prefix: str, name: str) -> OptionSpec | None:
    for spec in table:
        if name == spec.key.upper():
            return spec
        for nes_name in spec.nes_names:
            nes_prefix, _, nes_bare = nes_name.rpartition(".")
            if nes_prefix in _PREFIXES:
                if prefix == nes_prefix and name == nes_bare:
                    return spec
            elif name == nes_name:
                return spec
    return None


def _normalize(
    kind: str, type_name: Any, raw: Mapping[str, Any], tables: Mapping[str, tuple[OptionSpec, ...]]
) -> dict[str, Any]:
    if not isinstance(type_name, str) or type_name.strip().upper() not in tables:
        raise ConnectorOptionError(
            f"unknown {kind} type {type_name!r}; expected one of {', '.join(sorted(tables))}"
        )
    canonical_type = type_name.strip().upper()
    table = tables[canonical_type]
    if not isinstance(raw, Mapping):
        raise ConnectorOptionError(f"{kind} options must be a mapping of keys to values")
    result: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    passthrough = _PASSTHROUGH_PREFIX.get(canonical_type) if kind == "source" else None
    for raw_key, value in raw.items():
        prefix, name = _split_key(raw_key)
        spec = _resolve(table, prefix, name)
        if spec is None and passthrough and str(raw_key).strip("`").lower().startswith(passthrough):
            key = str(raw_key).replace("`", "").strip().lower()
            if any(word in key for word in SECRET_WORDS):
                raise ConnectorOptionError(
                    f"option {raw_key!r} carries a credential; use the dedicated secret options "
                    "(sasl_password, ssl_*_password) so that it is kept encrypted"
                )
            if value is None or isinstance(value, dict | list):
                raise _fail(str(raw_key), value, "a string, number or boolean")
            result[key] = str(value).lower() if isinstance(value, bool) else str(value)
            continue
        if spec is None:
            allowed = ", ".join(s.key for s in table) or "none"
            extra = f" or {passthrough}* keys" if passthrough else ""
            raise ConnectorOptionError(
                f"unknown option {raw_key!r} for a {canonical_type} {kind}; "
                f"allowed: {allowed}{extra}"
            )
        if spec.key in given_as:
            raise ConnectorOptionError(
                f"option {spec.key!r} given twice (as {given_as[spec.key]!r} and {raw_key!r})"
            )
        given_as[spec.key] = str(raw_key)
        if value is None and not spec.required:
            continue  # an optional option explicitly unset (as canonical configs store it)
        try:
            result[spec.key] = spec.convert(spec.key, value)
        except ConnectorOptionError:
            if not spec.secret:
                raise
            # The usual message quotes the value; an error must not print a secret.
            raise ConnectorOptionError(
                f"option {spec.key!r}: invalid value; expected {spec.allowed}"
            ) from None
    ordered: dict[str, Any] = {}
    for spec in table:
        if spec.key not in result and spec.required:
            raise ConnectorOptionError(
                f"option {spec.key!r} is required for a {canonical_type} {kind} ({spec.allowed})"
            )
        ordered[spec.key] = result.pop(spec.key, spec.default)
    ordered.update(sorted(result.items()))  # pass-through keys
    _check_combination(kind, canonical_type, ordered)
    return ordered


def _check_combination(kind: str, type_name: str, options: dict[str, Any]) -> None:
    """Rules that involve several options of one connector."""
    if kind == "source" and type_name == "GENERATOR":
        try:
            options["rate_config"] = generator_schema.parse_rate(
                options["rate_type"], options["rate_config"]
            ).config_text()
        except generator_schema.GeneratorSchemaError as error:
            raise ConnectorOptionError(
                f"option 'rate_config': invalid value {options['rate_config']!r}: {error}"
            ) from None
    if kind == "source" and type_name == "TCP" and options["tuple_delimiter"] != "\n":
        raise ConnectorOptionError(
            f"option 'tuple_delimiter': invalid value {options['tuple_delimiter']!r}; a TCP "
            "source reads lines, so only '\\n' is supported"
        )
    if kind == "source" and type_name == "KAFKA":
        subscriptions = [k for k in ("topic", "topic_pattern") if options[k] is not None]
        if len(subscriptions) != 1:
            raise ConnectorOptionError(
                "a KAFKA source needs exactly one of options 'topic' and 'topic_pattern', "
                f"got {subscriptions or 'neither'}"
            )
        if (options["sasl_username"] is None) != (options["sasl_password"] is None):
            raise ConnectorOptionError(
                "options 'sasl_username' and 'sasl_password' must be given together"
            )
    if kind == "sink" and type_name == "POSTGRESQL" and not (options["url"] or options["dbname"]):
        raise ConnectorOptionError(
            "a POSTGRESQL sink needs option 'url' or option 'dbname' (with host, port, user)"
        )


def normalize_source_options(type_name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a physical source's options; canonical keys, typed values, defaults filled in."""
    return _normalize("source", type_name, raw, SOURCE_OPTIONS)


def normalize_sink_options(type_name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a sink's options; canonical keys, typed values, defaults filled in."""
    return _normalize("sink", type_name, raw, SINK_OPTIONS)


def secret_keys(type_name: str) -> frozenset[str]:
    """Canonical keys of the secret options of a source or sink type (empty if none).

    Source and sink types share names (``FILE``); their secrets are united, which is what a
    caller redacting a stored config needs.
    """
    return _secret_keys(str(type_name).strip().upper())


@functools.lru_cache(maxsize=64)
def _secret_keys(canonical: str) -> frozenset[str]:
    # Once per type: every sink a pass answers with is redacted (a twenty-fifth of a pass of
    # bench requests' mix, reading the option tables again each time).
    specs = (*SOURCE_OPTIONS.get(canonical, ()), *SINK_OPTIONS.get(canonical, ()))
    return frozenset(spec.key for spec in specs if spec.secret)


def redact(type_name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a canonical config with secret values replaced by ``'***'``."""
    secrets = secret_keys(type_name)
    return {
        key: "***" if key in secrets and value is not None else value
        for key, value in config.items()
    }
