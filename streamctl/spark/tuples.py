"""NebulaStream's CSV and JSON text tuples as typed Spark columns (imports pyspark).

Protocol: a source reader (:mod:`streamctl.spark.source_readers`) hands :func:`parse_lines` a
DataFrame of text tuples (column ``value``) and the physical source's spec; it gets the logical
source's columns with their Spark types, or a query that fails on the first tuple that breaks
the rules below. :func:`conform` applies the same NULL and range rules to already typed input
(Parquet).

CSV tuples are parsed by streamctl's Java UDF (``jvm/NesCsvFields.java``: one call per tuple,
a few plan nodes per column) where the session has streamctl's jar, and by Spark expressions
of the same rules where it does not (a Spark Connect server without the jar: hundreds of plan
nodes per column, which Spark analyses on every start); ``tests/connectors/test_csv_fields.py``
checks the two against each other. JSON tuples take a typed parse first (:func:`_json_columns`);
the tuples it does not take, and the columns it reads as text, are read by another Java UDF
of the same rules (``jvm/NesJsonTexts.java``, :func:`_json_texts`; the keys' texts as Spark's
``from_json`` reads them, ``jvm/NesJsonKeys.java``) where the session has the jar, by
``from_json`` and the expressions where it does not (:func:`_json_fields`;
``tests/connectors/test_json_typed_parse.py`` checks them against each other).

Parsing (CSV and JSON tuples). The documented rules are nes-docs/null_handling.md, "Input
Parsing": "**CSV**: Only empty fields are interpreted as NULL for nullable columns" and
"**JSON**: `null` and missing keys produce NULL for nullable columns"; the rest is what the
docs leave open, decided as a NES user expects and stated here:

* Tuples are split at the tuple delimiter first (``PARSER.TUPLE_DELIMITER``), so no field can
  contain it, quoted or not. A CSV tuple is split at the field delimiter, not inside double
  quotes when ``allow_delimiter_in_quotes`` (NES's ``ALLOW_COMMAS_IN_STRINGS``, default on);
  then a field in double quotes loses them and ``""`` inside is one ``"`` (RFC 4180 quoting,
  as a CSV sink with ``QUOTE_STRINGS`` writes). Another field count fails the query.
* Missing values: an empty CSV field, a JSON ``null`` or a missing JSON key is NULL, and fails
  the query in a ``NOT NULL`` column -- but an empty CSV field in a ``VARSIZED NOT NULL``
  column is the empty string (empty fields are NULL only where NULL can be). Nothing else is
  NULL: ``NULL`` or ``""`` (quoted empty: an empty string) in CSV is that text.
* Malformed values fail the query, in nullable columns too (only empty fields are NULL):
  numbers and booleans are trimmed of white space and must then be complete -- integers
  ``-?[0-9]+`` (unsigned: no sign) within their NES type, floats as ``12``, ``-1.5``,
  ``1e3``, ``.5``, ``inf``, ``nan``, booleans ``true``/``false``/``1``/``0`` in any case;
  ``CHAR`` is one character after trimming; ``VARSIZED`` is kept exactly (white space too).
  So ``abc`` or ``300`` in a ``UINT8`` column, ``1.5`` in an ``INT32`` column, a blank
  (white space only) numeric field are errors naming source, column and value.
* JSON: each tuple is one JSON object as Spark's JSON reader reads it (single quotes and
  ``NaN``/``Infinity`` allowed, anything after the object not read); anything else fails the
  query ("not a JSON object"). Keys match column names exactly or else ignoring case (NES
  upper-cases unquoted identifiers: ``ts UINT64`` is column ``TS`` and reads the key
  ``"ts"``). Two keys equal ignoring case -- a key given twice, which JSON leaves undefined,
  too -- are the last exact ones where every column's key is present exactly with a value of
  its type (the typed parse of :func:`_json_columns`), and fail the query otherwise. A value
  is taken as its text -- a string's characters, a boolean as written, a number as Spark's
  JSON reader writes it back (an integer's digits, ``-0`` as ``0``; any other number as
  Java's text of its double: ``19.90`` is ``19.9``, ``1E5`` is ``100000.0``), a nested
  object or array as its JSON text -- and parsed by the CSV rules of its column's type: a
  nested value in a ``VARSIZED`` column is its JSON text, in any other column malformed; a
  number in a ``VARSIZED`` column is that text; a string holding a number (``"25"``) is read
  as that number in a numeric column (NES parses the field's text); ``true`` in a numeric
  column is malformed.
* Parquet: NULL in a ``NOT NULL`` column and integers outside their NES type fail the query.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from streamctl.nes_types import (
    INTEGER_TYPES,
    canonical_type,
)
from streamctl.spark import sql_text as S
from streamctl.spark.field_rules import (
    SAME_RANGE_CARRIERS,
    accept,
    in_range,
    invalid_prefix,
    typed_fields,
)
from streamctl.spark.jvm_functions import (
    FIELD_KINDS,
    FIELDS_ERROR,
    csv_fields_function,
    field_name,
    json_fields_function,
    json_layout,
    json_texts_function,
    wide_field_name,
)
from streamctl.spark.spark_types import quote_identifier, spark_type_ddl
from streamctl.spark.specs import SourceSpec
from streamctl.spark.sql_text import Relation, Sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["conform", "java_regex_literal", "parse_lines"]

# The expressions below are Spark SQL text (:mod:`streamctl.spark.sql_text`), as are the
# general rules' (:mod:`streamctl.spark.field_rules`).


def java_regex_literal(char: str) -> str:
    return char if char.isalnum() else "\\" + char


def parse_lines(
    lines: DataFrame, spec: SourceSpec, parser: Mapping[str, Any] | None = None
) -> Relation:
    """Typed columns from text tuples (column ``value``) by the rules of the module docstring
    ("Parsing"); ``parser`` overrides options of ``spec.config`` (generators write CSV). The
    steps are analysed when the Relation becomes a DataFrame (:meth:`Relation.frame`)."""
    options = {**spec.config, **(parser or {})}
    value = S.col("value")
    # one query: Spark parses and analyses the projections below once (S.Relation)
    nonempty = S.Relation(lines).where(value != "")  # not length(): it counts characters
    if options["format"] == "JSON":
        return _json_columns(nonempty, spec)
    quoted = bool(options["allow_delimiter_in_quotes"])
    nes_types = [canonical_type(column["type"]) for column in spec.schema]
    function = csv_fields_function(nonempty.session, nes_types)
    # the Java parse splits at one UTF-16 unit: a delimiter beyond the BMP takes the expressions
    if function is not None and ord(options["field_delimiter"]) <= 0xFFFF:
        return _csv_fields(nonempty, spec, function, options["field_delimiter"], quoted)
    return _csv_expressions(nonempty, spec, options["field_delimiter"], quoted)


def _csv_fields(
    lines: Relation, spec: SourceSpec, function: str, delimiter: str, quoted: bool
) -> Relation:
    """Typed columns from CSV tuples by streamctl's Java UDF (``jvm/NesCsvFields.java``): one
    call per tuple gives the values or the tuple's first failure, which fails the query with
    the message the expressions of :func:`_csv_expressions` give (the same rules, checked
    against them by ``tests/connectors/test_csv_fields.py``)."""
    layout = csv_layout(spec, delimiter, quoted).encode()
    parsed = S.project(lines, [S.call(function, S.col("value"), layout).alias("_p")])
    error = S.col("_p").getField(FIELDS_ERROR)
    values = []
    for column, value in zip(spec.schema, struct_values(spec, S.col("_p")), strict=True):
        failed = S.call("raise_error", error).cast(spark_type_ddl(column["type"]))
        values.append(S.when(error.isNull(), value).otherwise(failed).alias(column["name"]))
    return S.project(parsed, values)


def struct_values(spec: SourceSpec, struct: Sql) -> list[Sql]:
    """Each column's value in the ``struct`` of the Java CSV parse or JSON texts
    (:func:`~streamctl.spark.jvm_functions.fields_struct`), in its Spark type."""
    values = []
    for i, column in enumerate(spec.schema):
        value = struct.getField(field_name(i))
        if canonical_type(column["type"]) == "UINT64":
            carrier = spark_type_ddl(column["type"])
            value = S.call("coalesce", value.cast(carrier), struct.getField(wide_field_name(i)))
        values.append(value)
    return values


def csv_layout(spec: SourceSpec, delimiter: str, quoted: bool) -> str:
    """The layout argument of the Java CSV parse (``NesCsvFields.java``): the split, each
    column's kind and nullability, and the failure texts."""
    count_before, count_after = _count_message(spec)
    return json.dumps(
        {
            "quoted": quoted,
            "delimiter": delimiter,
            "count": [count_before, count_after],
            "columns": _column_layouts(spec),
        }
    )


def _column_layouts(spec: SourceSpec) -> list[dict[str, Any]]:
    """Each column's kind, nullability and failure texts, as the Java parses' layouts hold
    them (``NesCsvFields.java``, ``NesJsonTexts.java``)."""
    return [
        {
            "kind": FIELD_KINDS[canonical_type(column["type"])],
            "nullable": bool(column["nullable"]),
            "invalid": invalid_prefix(spec, column, ""),
            "missing": invalid_prefix(spec, column, " NOT NULL"),
        }
        for column in spec.schema
    ]


def _count_message(spec: SourceSpec) -> tuple[str, str]:
    """The field count failure's text before the tuple and before the count found."""
    return f"source {spec.id}: expected {len(spec.schema)} fields in tuple '", "', got "


def _csv_expressions(lines: Relation, spec: SourceSpec, delimiter: str, quoted: bool) -> Relation:
    """Typed columns from CSV tuples by Spark expressions (module docstring), for sessions
    without streamctl's jar."""
    value = S.col("value")
    pattern = java_regex_literal(delimiter)
    fields: Sql = S.call("split", value, pattern, -1)
    if quoted:
        # a delimiter followed by an even number of quotes is outside quotes; the look-ahead
        # scans the rest of the tuple at every delimiter, so only tuples with quotes take it
        outside = pattern + '(?=(?:[^"]*"[^"]*")*[^"]*$)'
        quoted_split = S.call("split", value, outside, -1)
        fields = S.when(value.contains('"'), quoted_split).otherwise(fields)
    expected = len(spec.schema)
    found = S.call("size", S.col("_fields"))
    count_before, count_after = _count_message(spec)
    checked = S.when(found == expected, S.col("_fields")).otherwise(
        S.call(
            "raise_error",
            S.call("concat", count_before, value, count_after, found.cast("STRING")),
        )
    )
    split = S.project(lines, [value, fields.alias("_fields")])
    split = S.project(split, [checked.alias("_fields")])
    raw = S.project(split, [S.col("_fields")[i].alias(f"_f{i}") for i in range(expected)])
    return typed_fields(raw, spec, csv=True, quoted=quoted)


def _json_columns(lines: Relation, spec: SourceSpec) -> Relation:
    """Typed columns from JSON tuples, in two ways that give the same values (module
    docstring): a typed parse where it can (every column's key present, with a value of its
    type), and the general rules for the other tuples.

    The typed parse reads integers as ``BIGINT`` and ``FLOAT64`` as ``DOUBLE`` straight from
    the JSON number, without the text Spark would write back for a number in a string field;
    other types as text. It is streamctl's Java UDF over the tuple's bytes where the session
    has it (``jvm/NesJsonFields.java``: every column or NULL; it also takes a key differing
    in case from its column's name where the general rules would, so columns NES upper-cased
    take it), else Spark's ``from_json`` to a struct (PERMISSIVE, exact keys only: a tuple
    with anything it does not read as the struct's types has its corrupt-record field set),
    which decodes every row through a ``java.io.InputStreamReader`` and runs at 40 % of the
    speed.

    A tuple takes the typed parse when every value it gives is present and in range
    (``_complete``); any other tuple (a missing or null key, a number in a string, a value out
    of range, not an object) is parsed by the general rules, which are evaluated for those
    tuples only. Non-numeric numbers (``NaN``) are not read by the typed parse, so ``"+INF"``
    in a string is not taken for infinity there.
    """
    names = [str(column["name"]) for column in spec.schema]
    if len({name.upper() for name in names}) != len(names):
        # struct fields differing only in case cannot be told apart by Spark's resolution
        return typed_fields(_json_fields(lines, spec), spec, csv=False, quoted=False)
    typed_columns = [
        (name, _json_typed_parse(column)) for name, column in zip(names, spec.schema, strict=True)
    ]
    function = json_fields_function(lines.session, typed_columns)
    parse: Sql
    complete: Sql = S.lit(True)
    if function is not None:
        layout = json_layout(typed_columns).encode()
        parse = S.call(function, S.col("value").cast("BINARY"), layout)
    else:
        # Spark's JSON reader keeps a tuple's fields read before one it could not read
        # (spark.sql.json.enablePartialResults): a key given twice whose last value does not
        # read would keep the first. Its corrupt-record field is set for every such tuple,
        # which the typed parse then leaves to the general rules.
        corrupt = _unused_name("_corrupt", names)
        schema = ", ".join(
            f"{quote_identifier(name)} {kind}"
            for name, kind in [*typed_columns, (corrupt, "STRING")]
        )
        options = S.call(
            "map",
            "mode",
            "PERMISSIVE",
            "allowNonNumericNumbers",
            "false",
            "columnNameOfCorruptRecord",
            corrupt,
        )
        parse = S.call("from_json", S.col("value"), schema, options)
        complete = S.col("_j").getField(corrupt).isNull()
    typed = S.project(lines, [S.col("value"), parse.alias("_j")])
    fields = [S.col("_j").getField(name) for name in names]
    for field, column in zip(fields, spec.schema, strict=True):
        complete = complete & field.isNotNull()
        nes_type = canonical_type(column["type"])
        if nes_type == "UINT64":  # a BIGINT here: at most 2**63 - 1 already
            complete = complete & (field >= 0)
        elif nes_type in INTEGER_TYPES and nes_type != "INT64":  # the field is a BIGINT
            complete = complete & in_range(field, nes_type)
    checked = S.project(
        typed,
        [
            S.col("value"),
            *(field.alias(f"_j{i}") for i, field in enumerate(fields)),
            complete.alias("_complete"),
        ],
    )
    fast: dict[int, Sql] = {}
    for i, column in enumerate(spec.schema):
        if _json_typed_parse(column) != "STRING":
            # in range where it is taken (_complete); try_cast: Spark may fold the cast of a
            # literal out of range where it is not, and then fails the query on it
            fast[i] = S.col(f"_j{i}").try_cast(spark_type_ddl(column["type"]))
    nes_types = [canonical_type(column["type"]) for column in spec.schema]
    texts_function = json_texts_function(lines.session, nes_types) if function else None
    if texts_function is None:
        key_texts = _json_fields(checked, spec, typed=len(spec.schema))
        return typed_fields(key_texts, spec, csv=False, quoted=False, fast=fast)
    return _json_texts(checked, spec, texts_function, fast)


def _unused_name(base: str, names: list[str]) -> str:
    """``base``, with underscores added until no name equals it ignoring case."""
    taken = {name.upper() for name in names}
    while base.upper() in taken:
        base += "_"
    return base


def _json_texts(
    checked: Relation, spec: SourceSpec, function: str, fast: Mapping[int, Sql]
) -> Relation:
    """Typed columns from JSON tuples (``value``) and the typed parse's columns (``_j<i>``,
    ``_complete``) by streamctl's Java UDF (``jvm/NesJsonTexts.java``), the general rules of
    :func:`_json_fields` and :func:`typed_fields` (checked against them by
    ``tests/connectors/test_json_typed_parse.py``): one call per tuple gives the values or the
    tuple's first failure, which fails the query with the message the expressions give. A
    tuple the typed parse took (``_complete``) has its ``fast`` columns' values from it, and
    the call parses its other columns' texts as the typed parse read them (none: no call);
    the call reads any other tuple's keys itself (``jvm/NesJsonKeys.java``)."""
    count = len(spec.schema)
    layout = json.dumps(
        {
            "columns": [
                {
                    **column_layout,
                    "typed": i in fast,
                    "name": str(column["name"]),
                    "upper": str(column["name"]).upper(),
                }
                for i, (column, column_layout) in enumerate(
                    zip(spec.schema, _column_layouts(spec), strict=True)
                )
            ],
            "notObject": _not_an_object_message(spec),
            "keysTwice": _keys_twice_message(spec),
            # Spark's upper, which the expressions' lookup ignoring case uses, maps by ICU
            "icuCase": str(checked.session.conf.get(_ICU_CASE, "true")).lower() == "true",
        }
    )
    typed_texts = S.call(
        "named_struct",
        *(
            x
            for i in range(count)
            for x in (f"t{i}", S.lit(None).cast("STRING") if i in fast else S.col(f"_j{i}"))
        ),
    )
    # the tuple itself only where the call reads its keys: a copy of its bytes otherwise
    tuple_bytes = S.when(~S.col("_complete"), S.col("value").cast("BINARY"))
    call: Sql = S.call(function, tuple_bytes, typed_texts, S.col("_complete"), layout.encode())
    if len(fast) == count:
        call = S.when(~S.col("_complete"), call)
    carried = [S.col(f"_j{i}") for i in fast]
    parsed = S.project(checked, [*carried, S.col("_complete"), call.alias("_p")])
    error = S.col("_p").getField(FIELDS_ERROR)
    values = []
    for i, (column, value) in enumerate(
        zip(spec.schema, struct_values(spec, S.col("_p")), strict=True)
    ):
        if i in fast:
            value = S.when(S.col("_complete"), fast[i]).otherwise(value)
        failed = S.call("raise_error", error).cast(spark_type_ddl(column["type"]))
        values.append(S.when(error.isNull(), value).otherwise(failed).alias(column["name"]))
    return S.project(parsed, values)


def _json_typed_parse(column: Mapping[str, Any]) -> str:
    """The Spark type a column's value is read as by the typed JSON parse."""
    nes_type = canonical_type(column["type"])
    if nes_type in INTEGER_TYPES:
        return "BIGINT"
    if nes_type == "FLOAT64":
        return "DOUBLE"
    # FLOAT32 as text: a double rounded to a float is not always the float nearest the text
    return "STRING"


_TEXT_MAP: Final = "MAP<STRING, STRING>"
_ICU_CASE: Final = "spark.sql.icu.caseMappings.enabled"


def _not_an_object_message(spec: SourceSpec) -> str:
    """The text of a JSON tuple's failure as no JSON object, before the tuple."""
    return f"source {spec.id}: not a JSON object: '"


def _keys_twice_message(spec: SourceSpec) -> str:
    """The text of a JSON tuple's failure with two keys equal ignoring case, before it."""
    return f"source {spec.id}: two keys equal ignoring case in JSON tuple '"


def _json_fields(lines: Relation, spec: SourceSpec, typed: int = 0) -> Relation:
    """Column ``_f<i>``: the text of column i's key (module docstring); NULL if null/missing.

    With ``typed`` (the typed parse's columns ``_j<i>``, ``_complete``: :func:`_json_columns`),
    a complete tuple's texts are the typed parse's texts, and the general parse runs for the
    other tuples only; those columns are carried along."""
    carried = [S.col(f"_j{i}") for i in range(typed)] + ([S.col("_complete")] if typed else [])
    # PERMISSIVE: a tuple that is no JSON object (malformed, or another JSON value) is NULL
    parsed = S.call("from_json", S.col("value"), _TEXT_MAP, S.call("map", "mode", "PERMISSIVE"))
    not_an_object = S.call(
        "raise_error", S.call("concat", _not_an_object_message(spec), S.col("value"), "'")
    )
    # Two keys equal ignoring case (a key twice too) fail the tuple, checked here, where the
    # map is made and every tuple passes: transform_keys below would fail on them with
    # Spark's DUPLICATED_MAP_KEY, which names no source, and only where Spark evaluates it
    # (not when it inlines it into a lookup whose exact key is present: one column).
    distinct = Sql(f"size(array_distinct(transform(map_keys({parsed.text}), k_ -> upper(k_))))")
    keys_twice = S.call(
        "raise_error", S.call("concat", _keys_twice_message(spec), S.col("value"), "'")
    )
    general: Sql = (
        S.when(parsed.isNull(), not_an_object.cast(_TEXT_MAP))
        .when(distinct < S.call("size", parsed), keys_twice.cast(_TEXT_MAP))
        .otherwise(parsed)
    )
    if typed:
        general = S.when(~S.col("_complete"), general)
    objects = S.project(lines, [*carried, general.alias("_m")])
    # Keys match column names exactly or, failing that, ignoring case (NES upper-cases
    # unquoted identifiers, so `ts UINT64` is column TS and reads the key "ts").
    upper_keys = Sql(f"transform_keys({S.col('_m').text}, (k_, v_) -> upper(k_))")
    keyed = S.project(objects, [*carried, S.col("_m"), upper_keys.alias("_u")])
    texts = []
    for position, column in enumerate(spec.schema):
        name = str(column["name"])
        text: Sql = S.when(
            S.call("map_contains_key", S.col("_m"), name),
            S.call("try_element_at", S.col("_m"), name),
        ).otherwise(S.call("try_element_at", S.col("_u"), name.upper()))
        if typed and _json_typed_parse(column) == "STRING":
            text = S.when(S.col("_complete"), S.col(f"_j{position}")).otherwise(text)
        texts.append(text.alias(f"_f{position}"))
    return S.project(keyed, [*carried, *texts])


def conform(frame: DataFrame, spec: SourceSpec) -> Relation:
    """Range and NOT NULL checks on typed columns (Parquet input): NULL stays NULL (a query
    failure in a NOT NULL column), an integer outside its NES type fails the query."""
    checked = []
    for column in spec.schema:
        value = S.col(column["name"])
        valid: Sql | None = None
        nes_type = canonical_type(column["type"])
        if nes_type in INTEGER_TYPES and nes_type not in SAME_RANGE_CARRIERS:
            valid = in_range(value, nes_type)
        if valid is None and column["nullable"]:  # NULL stays NULL: nothing to check
            checked.append(value.cast(spark_type_ddl(column["type"])).alias(column["name"]))
            continue
        checked.append(
            accept(value, valid, value.isNull(), value, column, spec).alias(column["name"])
        )
    return S.project(S.Relation(frame), checked)
