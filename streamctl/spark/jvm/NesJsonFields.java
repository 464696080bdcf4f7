/*
 * The typed parse of NebulaStream JSON tuples, as a Spark Java UDF over a tuple's UTF-8 bytes
 * (streamctl.spark.tuples._json_columns; registered by streamctl.spark.jvm_functions).
 *
 * Why it exists: Spark's from_json wraps every row's bytes in a java.io.InputStreamReader
 * (an 8 KiB decoder buffer per row) before Jackson sees them; this parses the bytes directly
 * (Jackson's byte parser, as Spark's JSON file reader does), about 2.5 times as fast.
 *
 * Contract: call(tuple, layout) returns a struct with a non-null value for every column, or
 * NULL, and then the general rules of streamctl.spark.tuples decide the tuple (which may fail
 * the query). It never throws on any input. The layout is a JSON array of strings, one per
 * column in order: a kind letter then the column's name, in UTF-8 bytes (a BINARY argument,
 * for NesCsvFields' reason: one array for all rows). Kinds: 'L' a BIGINT taken from a
 * JSON integer within 64 bits, 'D' a DOUBLE taken from any JSON number, 'S' a STRING taken
 * from a JSON string (its characters), a finite number (its text as Spark's from_json writes
 * it back: the integer's digits, or Java's text of the double) or true/false.
 *
 * A struct is returned only where the general rules give the same values:
 * - the tuple is exactly one JSON object in well-formed UTF-8 without a byte order mark
 *   (Jackson's strict defaults; anything after it, or any syntax Jackson refuses, gives NULL);
 * - every column's key is present with a value of its kind. A key matches a column's name
 *   exactly; a key given twice is its last value, as Spark's typed from_json reads it, and
 *   every value given must be of its column's kind. Where a column has no exact key, it takes
 *   the one key equal to its name ignoring ASCII case, and only when every key is ASCII and
 *   no two keys of the object are equal ignoring case (the general rules fail such a tuple,
 *   or read it by the exact keys).
 * Other keys are skipped with their values, nested or not.
 */
package io.streamctl;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

public final class NesJsonFields implements UDF2<byte[], byte[], Row> {
    private static final long serialVersionUID = 1L;
    /** Numbers parsed by Jackson's copy of FastDoubleParser: correctly rounded, as Java's
     *  parseDouble is (and C's strtod, NebulaStream's), and the parse a third faster. */
    private static final JsonFactory FACTORY =
        JsonFactory.builder().enable(StreamReadFeature.USE_FAST_DOUBLE_PARSER).build();
    /** Objects with more keys than this are left to the general rules (the case check is
     *  quadratic in the keys). */
    private static final int MAX_KEYS_FOR_CASE_MATCH = 64;

    /** A parsed layout: immutable, swapped whole, so threads sharing an instance see one
     *  consistent layout. */
    private static final class Layout {
        final byte[] text;
        final String[] names;
        final char[] kinds;

        Layout(byte[] text, String[] names, char[] kinds) {
            this.text = text;
            this.names = names;
            this.kinds = kinds;
        }
    }

    private transient volatile Layout current;

    private static Layout parseLayout(byte[] text) throws IOException {
        List<String> entries = new ArrayList<>();
        try (JsonParser parser = FACTORY.createParser(text)) {
            if (parser.nextToken() != JsonToken.START_ARRAY) {
                throw new IOException(
                    "layout is not a JSON array: " + new String(text, StandardCharsets.UTF_8));
            }
            while (parser.nextToken() == JsonToken.VALUE_STRING) {
                entries.add(parser.getText());
            }
        }
        String[] names = new String[entries.size()];
        char[] kinds = new char[entries.size()];
        for (int i = 0; i < names.length; i++) {
            String entry = entries.get(i);
            if (entry.isEmpty() || "LDS".indexOf(entry.charAt(0)) < 0) {
                throw new IOException("layout entry without a kind: " + entry);
            }
            kinds[i] = entry.charAt(0);
            names[i] = entry.substring(1);
        }
        return new Layout(text, names, kinds);
    }

    @Override
    public Row call(byte[] tuple, byte[] tupleLayout) throws IOException {
        if (tuple == null || tupleLayout == null) {
            return null;
        }
        Layout layout = current;
        if (layout == null || !NesCsvFields.sameLayout(layout.text, tupleLayout)) {
            layout = parseLayout(tupleLayout); // a bad layout is the planner's bug: it fails the query
            current = layout;
        }
        try {
            return parse(tuple, layout.names, layout.kinds);
        } catch (IOException | RuntimeException malformed) {
            return null; // the general rules name the problem
        }
    }

    private static Row parse(byte[] tuple, String[] names, char[] kinds) throws IOException {
        if (!plainUtf8(tuple)) {
            return null;
        }
        Object[] exact = new Object[names.length];
        Object[] byCase = null;
        List<String> keys = new ArrayList<>(names.length + 2);
        try (JsonParser parser = FACTORY.createParser(tuple)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return null;
            }
            JsonToken token;
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                String key = parser.currentName();
                JsonToken valueToken = parser.nextToken();
                keys.add(key);
                int column = exactColumn(names, key);
                boolean isExact = column >= 0;
                if (!isExact) {
                    column = caseColumn(names, key);
                }
                if (column < 0) {
                    parser.skipChildren();
                    continue;
                }
                Object value = read(parser, valueToken, kinds[column]);
                if (value == null) {
                    return null;
                }
                if (isExact) {
                    exact[column] = value;
                } else {
                    if (byCase == null) {
                        byCase = new Object[names.length];
                    }
                    byCase[column] = value; // a second such key fails distinctIgnoringCase
                }
            }
            if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
                return null;
            }
        }
        boolean caseNeeded = false;
        for (int i = 0; i < exact.length; i++) {
            if (exact[i] == null) {
                if (byCase == null || byCase[i] == null) {
                    return null;
                }
                exact[i] = byCase[i];
                caseNeeded = true;
            }
        }
        if (caseNeeded && !distinctIgnoringCase(keys)) {
            return null;
        }
        return RowFactory.create(exact);
    }

    /** Whether Jackson reads ``tuple`` as the general rules do: UTF-8 without a byte order
     *  mark (Jackson would take a BOM, or zero bytes among the first four, for another
     *  encoding, where the general rules decode UTF-8), and well-formed (Jackson passes
     *  overlong forms and code points past U+10FFFF, which the general rules' decoder turns
     *  into U+FFFD). */
    private static boolean plainUtf8(byte[] tuple) {
        if (tuple.length == 0) {
            return false;
        }
        int first = tuple[0] & 0xFF;
        if (first != '{' && first != ' ' && first != '\t' && first != '\n' && first != '\r') {
            return false;
        }
        for (int i = 0; i < Math.min(4, tuple.length); i++) {
            if (tuple[i] == 0) {
                return false;
            }
        }
        int i = 0;
        while (i < tuple.length) {
            int lead = tuple[i] & 0xFF;
            if (lead < 0x80) {
                i++;
                continue;
            }
            int continuation;
            if (lead >= 0xC2 && lead <= 0xDF) {
                continuation = 1;
            } else if (lead >= 0xE0 && lead <= 0xEF) {
                continuation = 2;
            } else if (lead >= 0xF0 && lead <= 0xF4) {
                continuation = 3;
            } else {
                return false;
            }
            if (i + continuation >= tuple.length) {
                return false;
            }
            int second = tuple[i + 1] & 0xFF;
            if ((second & 0xC0) != 0x80
                    || (lead == 0xE0 && second < 0xA0) // overlong
                    || (lead == 0xED && second > 0x9F) // a surrogate
                    || (lead == 0xF0 && second < 0x90) // overlong
                    || (lead == 0xF4 && second > 0x8F)) { // past U+10FFFF
                return false;
            }
            for (int k = 2; k <= continuation; k++) {
                if ((tuple[i + k] & 0xC0) != 0x80) {
                    return false;
                }
            }
            i += continuation + 1;
        }
        return true;
    }

    private static int exactColumn(String[] names, String key) {
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(key)) {
                return i;
            }
        }
        return -1;
    }

    /** The column whose name equals ``key`` ignoring case, both ASCII (outside ASCII, Java's
     *  and Python's upper-casing, which the general rules use, differ), or -1. */
    private static int caseColumn(String[] names, String key) {
        if (!isAscii(key)) {
            return -1;
        }
        for (int i = 0; i < names.length; i++) {
            if (isAscii(names[i]) && names[i].equalsIgnoreCase(key)) {
                return i;
            }
        }
        return -1;
    }

    private static boolean isAscii(String text) {
        for (int i = 0; i < text.length(); i++) {
            if (text.charAt(i) >= 0x80) {
                return false;
            }
        }
        return true;
    }

    /** No two keys are equal ignoring case, all keys ASCII (the general rules upper-case
     *  every key with Spark's upper(), which agrees with this for ASCII only). */
    private static boolean distinctIgnoringCase(List<String> keys) {
        if (keys.size() > MAX_KEYS_FOR_CASE_MATCH) {
            return false;
        }
        String[] upper = new String[keys.size()];
        for (int i = 0; i < upper.length; i++) {
            if (!isAscii(keys.get(i))) {
                return false;
            }
            upper[i] = keys.get(i).toUpperCase(java.util.Locale.ROOT);
            for (int j = 0; j < i; j++) {
                if (upper[j].equals(upper[i])) {
                    return false;
                }
            }
        }
        return true;
    }

    /** The value of the current token as a column of ``kind`` takes it, or null. */
    private static Object read(JsonParser parser, JsonToken token, char kind) throws IOException {
        switch (kind) {
            case 'L':
                if (token != JsonToken.VALUE_NUMBER_INT) {
                    return null;
                }
                JsonParser.NumberType type = parser.getNumberType();
                if (type != JsonParser.NumberType.INT && type != JsonParser.NumberType.LONG) {
                    return null;
                }
                return parser.getLongValue();
            case 'D':
                if (token != JsonToken.VALUE_NUMBER_INT && token != JsonToken.VALUE_NUMBER_FLOAT) {
                    return null;
                }
                return parser.getDoubleValue();
            default:
                if (token == JsonToken.VALUE_STRING) {
                    return parser.getText();
                }
                // A number's text as Spark's from_json to MAP<STRING, STRING> (the general
                // rules) writes it back: an integer as its value (-0 is 0), any other number
                // as Java's text of its double ("1E5" is "100000.0"); not finite: the
                // general rules' own (Spark quotes it).
                if (token == JsonToken.VALUE_NUMBER_INT) {
                    return parser.getNumberValue().toString();
                }
                if (token == JsonToken.VALUE_NUMBER_FLOAT) {
                    double number = parser.getDoubleValue();
                    return Double.isFinite(number) ? Double.toString(number) : null;
                }
                if (token == JsonToken.VALUE_TRUE) {
                    return "true";
                }
                if (token == JsonToken.VALUE_FALSE) {
                    return "false";
                }
                return null;
        }
    }
}
