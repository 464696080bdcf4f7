/*
 * The general rules' typed values of NebulaStream JSON tuples, as a Spark Java UDF
 * (streamctl.spark.tuples._json_texts; registered by streamctl.spark.jvm_functions).
 *
 * Why it exists: a JSON tuple that NesJsonFields' typed parse does not take (a key missing, a
 * number in a string, a column of a type read as text) is read by its keys' texts
 * (NesJsonKeys: what Spark's from_json to a string map gives). Parsing those texts in Spark
 * expressions (streamctl.spark.field_rules.typed_fields, used where a session does not have
 * this jar) is a few hundred expression nodes per column in every JSON query's plan, which
 * Spark's analyser walks on every start and whose generated code every tuple runs through:
 * half of a planned JSON query's start and a tenth of its rows' time. This is one call per
 * tuple, and a tuple the typed parse took reaches no code that is not generated.
 *
 * Contract: call(tuple, typedTexts, complete, layout) returns a struct as NesCsvFields does:
 * a first field NULL and the columns' values after it (NULL where a text is NULL and the
 * column nullable; a UINT64 of 2**63 or more in its wide field), or the message of the first
 * failure and NULLs. tuple is the tuple's UTF-8 bytes (NULL where complete). With complete
 * true (NesJsonFields took the tuple), the columns the layout marks "typed" are skipped
 * (their values are the typed parse's) and the others' texts are typedTexts' (a struct of
 * one string per column, in order, as the typed parse read them); otherwise the texts are
 * NesJsonKeys' of the tuple,
 * and the tuple fails first where it is no JSON object or has two keys equal ignoring case.
 * It never throws on a tuple; a malformed layout (the planner's bug) fails the query.
 *
 * The rules of a column's text are those of a CSV field without quoting
 * (NesCsvFields.value), except that a NULL text is what is missing (an empty text is a
 * malformed number, or the empty string), a malformed or missing value's message ends with
 * the text or NULL, and a float's text is read as NesCsvFields.jsonValue reads it.
 * tests/connectors/test_json_typed_parse.py checks these against the expressions.
 *
 * The layout is a JSON object in UTF-8 bytes (a BINARY argument, as NesCsvFields'):
 * "columns", NesCsvFields' column objects, each with a boolean
 * "typed" and the column's "name" and "upper" (its name upper-cased, as the expressions look
 * it up ignoring case) too; "notObject" and "keysTwice", the texts of those failures before
 * the tuple; "icuCase", whether Spark's upper maps case by ICU in the session.
 */
package io.streamctl;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF4;

public final class NesJsonTexts implements UDF4<byte[], Row, Boolean, byte[], Row> {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** A parsed layout: immutable, swapped whole, so threads sharing an instance see one
     *  consistent layout. */
    private static final class Layout {
        final byte[] text;
        final NesCsvFields.Column[] columns;
        final boolean[] typed;
        final String[] names;
        final String[] upperNames;
        final String notObject;
        final String keysTwice;
        final boolean icuCase;
        final int[] wide;
        final int wideColumns;

        Layout(byte[] text, NesCsvFields.Column[] columns, boolean[] typed, String[] names,
               String[] upperNames, String notObject, String keysTwice, boolean icuCase) {
            this.text = text;
            this.columns = columns;
            this.typed = typed;
            this.names = names;
            this.upperNames = upperNames;
            this.notObject = notObject;
            this.keysTwice = keysTwice;
            this.icuCase = icuCase;
            this.wide = NesCsvFields.widePositions(columns);
            this.wideColumns = NesCsvFields.wideCount(columns);
        }
    }

    private transient volatile Layout current;

    private static Layout parseLayout(byte[] text) throws IOException {
        JsonNode root = MAPPER.readTree(text);
        JsonNode columns = root.path("columns");
        if (!columns.isArray() || !root.path("notObject").isTextual()
                || !root.path("keysTwice").isTextual() || !root.path("icuCase").isBoolean()) {
            throw new IOException(
                "malformed JSON texts layout: " + new String(text, StandardCharsets.UTF_8));
        }
        boolean[] typed = new boolean[columns.size()];
        String[] names = new String[columns.size()];
        String[] upperNames = new String[columns.size()];
        for (int i = 0; i < typed.length; i++) {
            JsonNode column = columns.get(i);
            typed[i] = column.path("typed").asBoolean();
            names[i] = column.path("name").asText();
            upperNames[i] = column.path("upper").asText();
        }
        return new Layout(text, NesCsvFields.columns(columns), typed, names, upperNames,
            root.path("notObject").asText(), root.path("keysTwice").asText(),
            root.path("icuCase").asBoolean());
    }

    @Override
    public Row call(byte[] tuple, Row typedTexts, Boolean complete, byte[] textsLayout)
            throws IOException {
        boolean skipTyped = Boolean.TRUE.equals(complete);
        if ((tuple == null && !skipTyped) || textsLayout == null) {
            return null;
        }
        Layout layout = current;
        if (layout == null || !NesCsvFields.sameLayout(layout.text, textsLayout)) {
            layout = parseLayout(textsLayout);
            current = layout;
        }
        NesCsvFields.Column[] columns = layout.columns;
        Object[] out = new Object[columns.length + 1 + layout.wideColumns];
        String[] texts;
        if (skipTyped) {
            if (typedTexts == null || typedTexts.length() != columns.length) {
                throw new IOException("typed JSON texts of "
                    + (typedTexts == null ? "no" : typedTexts.length())
                    + " columns for a layout of " + columns.length);
            }
            texts = new String[columns.length];
            for (int i = 0; i < columns.length; i++) {
                texts[i] = typedTexts.getString(i);
            }
        } else {
            try {
                texts = NesJsonKeys.texts(tuple, layout.names, layout.upperNames,
                    layout.icuCase);
            } catch (NesJsonKeys.KeysTwice twice) {
                return NesCsvFields.failure(out, layout.keysTwice + tupleText(tuple) + "'");
            }
            if (texts == null) {
                return NesCsvFields.failure(out, layout.notObject + tupleText(tuple) + "'");
            }
        }
        for (int i = 0; i < columns.length; i++) {
            if (skipTyped && layout.typed[i]) {
                continue;
            }
            NesCsvFields.Column column = columns[i];
            String text = texts[i];
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

    /** The tuple as Spark's text of it (UTF8String.toString: malformed bytes are U+FFFD). */
    private static String tupleText(byte[] tuple) {
        return new String(tuple, StandardCharsets.UTF_8);
    }
}
