/*
 * NebulaStream CSV tuples as typed values, as a Spark Java UDF over one tuple's text
 * (streamctl.spark.tuples.parse_lines; registered by streamctl.spark.jvm_functions).
 *
 * Why it exists: the same rules as Spark expressions (streamctl.spark.tuples, used where a
 * session does not have this jar) are a few hundred expression nodes per column, which Spark's
 * analyser and optimiser walk on every query start (a third of a planned CSV query's start on
 * 2M rows), and a regular-expression split per tuple. This is one call per tuple, one pass
 * over its characters.
 *
 * Contract: call(tuple, layout) returns a struct whose first field is NULL and whose others
 * are the columns' values (NULL where the field is missing and the column nullable), or whose
 * first field is the message of the tuple's first failure (the field count, then the columns
 * in order) and whose others are NULL; the caller fails the query with that message. It never
 * throws on a tuple; a malformed layout (the planner's bug) fails the query.
 *
 * The struct holds a field per column, in order, of the column's Spark type, except that a
 * UINT64 column's field is a BIGINT holding values below 2**63, and a DECIMAL(20,0) field after
 * all columns' (one per UINT64 column, in order) holds the larger ones: a decimal made from a
 * long is a long inside Spark, where one made from a java.math.BigDecimal stays one, and
 * every operation on it (hashing, comparing, formatting) is many times slower.
 *
 * The rules are those of streamctl.spark.tuples' module docstring ("Parsing"), decided exactly
 * as its Spark expressions decide them (tests/connectors/test_csv_fields.py checks the two
 * against each other on generated tuples):
 * - split at the field delimiter (a single character), keeping empty fields; with quoting on
 *   and a '"' in the tuple, only at delimiters followed by an even number of '"' in the rest of
 *   the tuple (the expressions' look-ahead);
 * - with quoting on, a field starting with '"' that matches (?s)^"(.*)"$ (Java's '$': also
 *   before a final line terminator) is its inner text, with "" read as ";
 * - an empty raw field is missing: NULL, or the NOT NULL failure, except in a NOT NULL
 *   VARSIZED column, where it is the empty string;
 * - integers: \s*-?[0-9]+\s* (unsigned: no sign; \s is [ \t\n\x0B\f\r]) within the type's
 *   range; floats: NES's syntax (FLOAT_TEXT below), read correctly rounded (as Java's
 *   parseDouble/parseFloat and C's strtod/strtof) or as inf/infinity/nan with an optional
 *   '-', in any case; booleans: trimmed of \s, then
 *   true/false/1/0 in any case; CHAR: trimmed, exactly one code point; VARSIZED: as it is.
 *
 * The layout is a JSON object in UTF-8 bytes (a BINARY argument: Spark hands a UDF a binary
 * literal as the same array on every row, where a STRING literal is a new java.lang.String per
 * row, decoded, then compared whole with the parsed one; for the layout's few hundred bytes
 * that was a fifth of the bytes a CSV query allocated): "quoted" (boolean), "delimiter" (one
 * UTF-16 character), "count" (two strings: the field count message is count[0] + tuple +
 * count[1] + the count found), and "columns", one object per column: "kind" (KINDS), "nullable", "invalid" and
 * "missing" (the messages of a malformed value and of a missing one in a NOT NULL column:
 * each + the raw field + "'").
 */
package io.streamctl;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.fasterxml.jackson.core.io.NumberInput;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

public final class NesCsvFields implements UDF2<String, byte[], Row> {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** Column kinds: NES types by their Spark carrier (streamctl.spark.types). */
    private static final String KINDS = "I8 I16 I32 I64 U8 U16 U32 U64 F32 F64 BOOLEAN CHAR VARSIZED";

    private static final Pattern QUOTED = Pattern.compile("(?s)^\"(.*)\"$");
    private static final Pattern FLOAT_TEXT = Pattern.compile(
        "(?i)^\\s*-?(?:(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:e[-+]?[0-9]+)?|inf|infinity|nan)\\s*\\z");
    private static final BigInteger UINT64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

    /** A column of a layout: its kind, nullability and failure texts (NesJsonTexts reads
     *  the same column objects). */
    static final class Column {
        final String kind;
        final boolean nullable;
        final String invalid;
        final String missing;

        Column(String kind, boolean nullable, String invalid, String missing) {
            this.kind = kind;
            this.nullable = nullable;
            this.invalid = invalid;
            this.missing = missing;
        }
    }

    /** A parsed layout: immutable, swapped whole, so threads sharing an instance see one
     *  consistent layout. */
    private static final class Layout {
        final byte[] text;
        final boolean quoted;
        final char delimiter;
        final String countBefore;
        final String countAfter;
        final Column[] columns;
        /** Per column: its position among the UINT64 columns, or -1. */
        final int[] wide;
        final int wideColumns;

        Layout(byte[] text, boolean quoted, char delimiter, String countBefore, String countAfter,
               Column[] columns) {
            this.text = text;
            this.wide = widePositions(columns);
            this.wideColumns = wideCount(columns);
            this.quoted = quoted;
            this.delimiter = delimiter;
            this.countBefore = countBefore;
            this.countAfter = countAfter;
            this.columns = columns;
        }
    }

    private transient volatile Layout current;

    private static Layout parseLayout(byte[] text) throws IOException {
        JsonNode root = MAPPER.readTree(text);
        String delimiter = root.path("delimiter").asText("");
        JsonNode count = root.path("count");
        JsonNode columns = root.path("columns");
        if (delimiter.length() != 1 || count.size() != 2 || !columns.isArray()) {
            throw new IOException("malformed CSV layout: " + new String(text, UTF_8));
        }
        return new Layout(text, root.path("quoted").asBoolean(), delimiter.charAt(0),
            count.get(0).asText(), count.get(1).asText(), columns(columns));
    }

    /** The columns of a layout's "columns" array. */
    static Column[] columns(JsonNode columns) throws IOException {
        Column[] parsed = new Column[columns.size()];
        for (int i = 0; i < parsed.length; i++) {
            JsonNode column = columns.get(i);
            String kind = column.path("kind").asText("");
            if (kind.isEmpty() || !(" " + KINDS + " ").contains(" " + kind + " ")) {
                throw new IOException("layout column of no kind: " + column);
            }
            parsed[i] = new Column(kind, column.path("nullable").asBoolean(),
                column.path("invalid").asText(), column.path("missing").asText());
        }
        return parsed;
    }

    /** Per column: its position among the UINT64 columns (its wide field), or -1. */
    static int[] widePositions(Column[] columns) {
        int[] wide = new int[columns.length];
        int count = 0;
        for (int i = 0; i < columns.length; i++) {
            wide[i] = columns[i].kind.equals("U64") ? count++ : -1;
        }
        return wide;
    }

    static int wideCount(Column[] columns) {
        int count = 0;
        for (Column column : columns) {
            count += column.kind.equals("U64") ? 1 : 0;
        }
        return count;
    }

    /** Puts a column's value into the struct's fields: a UINT64 of 2**63 or more (a
     *  BigDecimal) into the column's wide field. */
    static void put(Object[] out, int column, Object value, int[] wide, int columns) {
        if (value instanceof BigDecimal) {
            out[1 + columns + wide[column]] = value;
        } else {
            out[column + 1] = value;
        }
    }

    @Override
    public Row call(String tuple, byte[] tupleLayout) throws IOException {
        if (tuple == null || tupleLayout == null) {
            return null;
        }
        Layout layout = current;
        if (layout == null || !sameLayout(layout.text, tupleLayout)) {
            layout = parseLayout(tupleLayout);
            current = layout;
        }
        Column[] columns = layout.columns;
        Object[] out = new Object[columns.length + 1 + layout.wideColumns];
        List<String> fields = split(tuple, layout.delimiter, layout.quoted);
        if (fields.size() != columns.length) {
            out[0] = layout.countBefore + tuple + layout.countAfter + fields.size();
            return RowFactory.create(out);
        }
        for (int i = 0; i < columns.length; i++) {
            Column column = columns[i];
            String raw = fields.get(i);
            if (raw.isEmpty() && !(column.kind.equals("VARSIZED") && !column.nullable)) {
                if (!column.nullable) {
                    return failure(out, column.missing + raw + "'");
                }
                continue; // NULL
            }
            String text = layout.quoted ? unquoted(raw) : raw;
            Object value;
            try {
                value = value(column.kind, text);
            } catch (RuntimeException malformed) {
                value = null;
            }
            if (value == null) {
                return failure(out, column.invalid + raw + "'");
            }
            put(out, i, value, layout.wide, columns.length);
        }
        return RowFactory.create(out);
    }

    /** Whether a layout argument is the one a parsed layout was read from: the same array
     *  first (the literal of a query is one array for all its rows), then equal bytes. */
    static boolean sameLayout(byte[] parsed, byte[] argument) {
        return parsed == argument || Arrays.equals(parsed, argument);
    }

    static Row failure(Object[] out, String message) {
        Arrays.fill(out, null);
        out[0] = message;
        return RowFactory.create(out);
    }

    /** The fields of a tuple: String.split at the delimiter with limit -1, where with quoting
     *  and a '"' in the tuple a delimiter counts only with an even number of '"' after it. */
    static List<String> split(String tuple, char delimiter, boolean quoted) {
        List<String> fields = new ArrayList<>();
        int quotesAfter = 0;
        boolean countQuotes = quoted && tuple.indexOf('"') >= 0;
        if (countQuotes) {
            for (int i = 0; i < tuple.length(); i++) {
                if (tuple.charAt(i) == '"') {
                    quotesAfter++;
                }
            }
        }
        int start = 0;
        for (int i = 0; i < tuple.length(); i++) {
            char c = tuple.charAt(i);
            if (c == '"' && countQuotes) {
                quotesAfter--;
            } else if (c == delimiter && (quotesAfter & 1) == 0) {
                fields.add(tuple.substring(start, i));
                start = i + 1;
            }
        }
        fields.add(tuple.substring(start));
        return fields;
    }

    static String unquoted(String field) {
        if (!field.startsWith("\"")) {
            return field;
        }
        Matcher matcher = QUOTED.matcher(field);
        if (!matcher.find()) {
            return field;
        }
        return matcher.group(1).replace("\"\"", "\"");
    }

    /** The value of a JSON key's text (streamctl.spark.tuples: the text Spark's from_json to
     *  a string map gives) in its column's kind, or null where it is malformed: as a CSV
     *  field's, except that a float's text is trimmed first, and JSON's non-numeric numbers
     *  in quotes ("NaN", "-Infinity": Spark hands them back so) are read without them. */
    static Object jsonValue(String kind, String text) {
        if (kind.equals("F64") || kind.equals("F32")) {
            return floating(withoutNonNumericQuotes(trimBlanks(text)), kind.equals("F32"));
        }
        return value(kind, text);
    }

    /** The text without the quotes around "-?(infinity|nan)" in ASCII letters of any case
     *  (the expressions' regexp_replace of (?i)^"(-?(?:infinity|nan))"$ by $1: where '$'
     *  matches before a final line terminator, what is left is no float either way). */
    private static String withoutNonNumericQuotes(String text) {
        int end = text.length() - 1;
        if (end < 1 || text.charAt(0) != '"' || text.charAt(end) != '"') {
            return text;
        }
        String inner = text.substring(1, end);
        String word = inner.startsWith("-") ? inner.substring(1) : inner;
        return asciiEqualsIgnoreCase(word, "infinity") || asciiEqualsIgnoreCase(word, "nan")
            ? inner : text;
    }

    private static boolean asciiEqualsIgnoreCase(String text, String lowerAscii) {
        if (text.length() != lowerAscii.length()) {
            return false;
        }
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            char lower = c >= 'A' && c <= 'Z' ? (char) (c + ('a' - 'A')) : c;
            if (lower != lowerAscii.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    /** The value of a field's text in its column's kind, or null where it is malformed. */
    static Object value(String kind, String text) {
        switch (kind) {
            case "VARSIZED":
                return text;
            case "CHAR": {
                String trimmed = trimBlanks(text);
                return trimmed.codePointCount(0, trimmed.length()) == 1 ? trimmed : null;
            }
            case "BOOLEAN": {
                String word = trimBlanks(text).toLowerCase(Locale.ROOT);
                if (word.equals("true") || word.equals("1")) {
                    return Boolean.TRUE;
                }
                return word.equals("false") || word.equals("0") ? Boolean.FALSE : null;
            }
            case "F64":
            case "F32":
                return floating(text, kind.equals("F32"));
            case "U64":
                return unsigned64(text);
            default:
                return integer(kind, text);
        }
    }

    private static boolean blank(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\u000b' || c == '\f' || c == '\r';
    }

    /** The first position of text not a blank (text's length if none). */
    private static int blanksBefore(String text) {
        int start = 0;
        while (start < text.length() && blank(text.charAt(start))) {
            start++;
        }
        return start;
    }

    /** The end of text without its trailing blanks, not before start. */
    private static int endBeforeBlanks(String text, int start) {
        int end = text.length();
        while (end > start && blank(text.charAt(end - 1))) {
            end--;
        }
        return end;
    }

    static String trimBlanks(String text) {
        int start = blanksBefore(text);
        return text.substring(start, endBeforeBlanks(text, start));
    }

    /** \s*-?[0-9]+\s* as a long, or null (not of the syntax, past 64 bits). */
    private static Long longValue(String text, boolean signed) {
        int i = blanksBefore(text); // no substring: this runs for every integer field
        int end = endBeforeBlanks(text, i);
        boolean negative = signed && i < end && text.charAt(i) == '-';
        if (negative) {
            i++;
        }
        if (i >= end) {
            return null;
        }
        long value = 0; // accumulated negatively, so that -2**63 fits
        for (; i < end; i++) {
            char c = text.charAt(i);
            if (c < '0' || c > '9') {
                return null;
            }
            int digit = c - '0';
            if (value < (Long.MIN_VALUE + digit) / 10) {
                return null;
            }
            value = value * 10 - digit;
        }
        if (!negative) {
            if (value == Long.MIN_VALUE) {
                return null;
            }
            value = -value;
        }
        return value;
    }

    private static Object integer(String kind, String text) {
        Long parsed = longValue(text, kind.startsWith("I"));
        if (parsed == null) {
            return null;
        }
        long v = parsed;
        switch (kind) {
            case "I8":
                return v >= Byte.MIN_VALUE && v <= Byte.MAX_VALUE ? Byte.valueOf((byte) v) : null;
            case "I16":
                return v >= Short.MIN_VALUE && v <= Short.MAX_VALUE ? Short.valueOf((short) v) : null;
            case "I32":
                return v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE ? Integer.valueOf((int) v) : null;
            case "I64":
                return parsed;
            case "U8":
                return v >= 0 && v <= 255 ? Short.valueOf((short) v) : null;
            case "U16":
                return v >= 0 && v <= 65535 ? Integer.valueOf((int) v) : null;
            case "U32":
                return v >= 0 && v <= 4294967295L ? parsed : null;
            default:
                throw new IllegalStateException("no integer kind: " + kind);
        }
    }

    /** A UINT64 from \s*[0-9]+\s*: a Long below 2**63, a BigDecimal from there, or null. */
    private static Object unsigned64(String text) {
        Long parsed = longValue(text, false);
        if (parsed != null) {
            return parsed;
        }
        String digits = trimBlanks(text);
        if (digits.isEmpty()) {
            return null;
        }
        for (int i = 0; i < digits.length(); i++) {
            char c = digits.charAt(i);
            if (c < '0' || c > '9') {
                return null;
            }
        }
        BigInteger value = new BigInteger(digits);
        return value.compareTo(UINT64_MAX) <= 0 ? new BigDecimal(value) : null;
    }

    /** A float's value (the decimal correctly rounded; inf, infinity, nan with an optional
     *  '-' in any case), or null where the text is not of FLOAT_TEXT's syntax. */
    private static Object floating(String text, boolean single) {
        boolean plain = plainDecimal(text);
        if (!plain && !FLOAT_TEXT.matcher(text).find()) {
            return null;
        }
        String trimmed = plain ? text : trimBlanks(text);
        if (!plain) {
            String word = trimmed.toLowerCase(Locale.ROOT);
            boolean negative = word.startsWith("-");
            String magnitude = negative ? word.substring(1) : word;
            if (magnitude.equals("inf") || magnitude.equals("infinity")) {
                double infinity = negative ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
                return single ? (Object) (float) infinity : (Object) infinity;
            }
            if (magnitude.equals("nan")) {
                return single ? (Object) Float.NaN : (Object) Double.NaN;
            }
        }
        try {
            // Jackson's copy of FastDoubleParser: correctly rounded, as Java's parseDouble and
            // parseFloat (and C's strtod, NebulaStream's) are, and a third faster.
            return single
                ? (Object) NumberInput.parseFloat(trimmed, true)
                : (Object) NumberInput.parseDouble(trimmed, true);
        } catch (NumberFormatException malformed) {
            return null;
        }
    }

    /** Whether the text is [-]digits[.digits][e[+-]digits] (or .digits...) with nothing around
     *  it: FLOAT_TEXT's syntax without the regular expression, for the usual text. */
    private static boolean plainDecimal(String text) {
        int i = 0;
        int end = text.length();
        if (i < end && text.charAt(i) == '-') {
            i++;
        }
        int integerDigits = 0;
        while (i < end && isDigit(text.charAt(i))) {
            i++;
            integerDigits++;
        }
        int fractionDigits = 0;
        if (i < end && text.charAt(i) == '.') {
            i++;
            while (i < end && isDigit(text.charAt(i))) {
                i++;
                fractionDigits++;
            }
        }
        if (integerDigits == 0 && fractionDigits == 0) {
            return false;
        }
        if (i < end && (text.charAt(i) == 'e' || text.charAt(i) == 'E')) {
            i++;
            if (i < end && (text.charAt(i) == '+' || text.charAt(i) == '-')) {
                i++;
            }
            int exponentDigits = 0;
            while (i < end && isDigit(text.charAt(i))) {
                i++;
                exponentDigits++;
            }
            if (exponentDigits == 0) {
                return false;
            }
        }
        return i == end;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }
}
