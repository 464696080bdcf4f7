/*
 * The general rules' typed values of NebulaStream JSON tuples, as a Spark Java UDF over the
 * texts of a tuple's keys (streamctl.spark.tuples._json_columns; registered by
 * streamctl.spark.jvm_functions).
 *
 * Why it exists: a JSON tuple that NesJsonFields' typed parse does not take (a key missing, a
 * number in a string, a column of a type read as text) is read by its keys' texts, which
 * Spark's from_json to a string map gives. Parsing those texts in Spark expressions
 * (streamctl.spark.field_rules.typed_fields, used where a session does not have this jar) is a
 * few hundred expression nodes per column in every JSON query's plan, which Spark's analyser
 * walks on every start and whose generated code every tuple runs through: half of a planned
 * JSON query's start and a tenth of its rows' time. This is one call per tuple.
 *
 * Contract: call(texts, complete, layout) returns a struct as NesCsvFields does: a first
 * field NULL and the columns' values after it (NULL where a text is NULL and the column
 * nullable; a UINT64 of 2**63 or more in its wide field), or the message of the first failure
 * (columns in order) and NULLs. With complete true (NesJsonFields took the tuple), the
 * columns the layout marks "typed" are skipped: their values are the typed parse's. It never
 * throws on texts; a malformed layout (the planner's bug) fails the query.
 *
 * texts is a struct of one nullable string per column, in order: the text of the column's
 * key, NULL where the key is missing or null. The rules are those of a CSV field without
 * quoting (NesCsvFields.value), except that a NULL text is what is missing (an empty text is
 * a malformed number, or the empty string), a malformed or missing value's message ends with
 * the text or NULL, and a float's text is read as NesCsvFields.jsonValue reads it.
 * tests/connectors/test_json_typed_parse.py checks these against the expressions.
 *
 * The layout is a JSON object whose "columns" are NesCsvFields' column objects, each with a
 * boolean "typed" too.
 */
package io.streamctl;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF3;

public final class NesJsonTexts implements UDF3<Row, Boolean, String, Row> {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** A parsed layout: immutable, swapped whole, so threads sharing an instance see one
     *  consistent layout. */
    private static final class Layout {
        final String text;
        final NesCsvFields.Column[] columns;
        final boolean[] typed;
        final int[] wide;
        final int wideColumns;

        Layout(String text, NesCsvFields.Column[] columns, boolean[] typed) {
            this.text = text;
            this.columns = columns;
            this.typed = typed;
            this.wide = NesCsvFields.widePositions(columns);
            this.wideColumns = NesCsvFields.wideCount(columns);
        }
    }

    private transient volatile Layout current;

    private static Layout parseLayout(String text) throws IOException {
        JsonNode columns = MAPPER.readTree(text).path("columns");
        if (!columns.isArray()) {
            throw new IOException("malformed JSON texts layout: " + text);
        }
        boolean[] typed = new boolean[columns.size()];
        for (int i = 0; i < typed.length; i++) {
            typed[i] = columns.get(i).path("typed").asBoolean();
        }
        return new Layout(text, NesCsvFields.columns(columns), typed);
    }

    @Override
    public Row call(Row texts, Boolean complete, String textsLayout) throws IOException {
        if (texts == null || textsLayout == null) {
            return null;
        }
        Layout layout = current;
        if (layout == null || !layout.text.equals(textsLayout)) {
            layout = parseLayout(textsLayout);
            current = layout;
        }
        NesCsvFields.Column[] columns = layout.columns;
        if (texts.length() != columns.length) {
            throw new IOException("JSON texts of " + texts.length() + " columns for a layout of "
                + columns.length);
        }
        boolean skipTyped = Boolean.TRUE.equals(complete);
        Object[] out = new Object[columns.length + 1 + layout.wideColumns];
        for (int i = 0; i < columns.length; i++) {
            if (skipTyped && layout.typed[i]) {
                continue;
            }
            NesCsvFields.Column column = columns[i];
            String text = texts.getString(i);
            if (text == null) {
                if (!column.nullable) {
                    return NesCsvFields.failure(out, column.missing + "NULL'");
                }
                continue; // NULL
            }
            Object value;
            try {
                value = NesCsvFields.jsonValue(column.kind, text);
            } catch (RuntimeException malformed) {
                value = null;
            }
            if (value == null) {
                return NesCsvFields.failure(out, column.invalid + text + "'");
            }
            NesCsvFields.put(out, i, value, layout.wide, columns.length);
        }
        return RowFactory.create(out);
    }
}
