/*
 * The texts of a NebulaStream JSON tuple's keys for its columns, as the general rules of
 * streamctl.spark.tuples read them: what Spark's from_json to a MAP<STRING, STRING> gives
 * (tuples._json_fields, the expressions a session without this jar plans), then each column's
 * key by exact name or else ignoring case. Used by NesJsonTexts for the tuples NesJsonFields'
 * typed parse does not take.
 *
 * Why it exists: from_json is not code-generated, nor is the transform_keys of the lookup
 * ignoring case, so in a plan they split the query's generated code in two and copy every
 * tuple between the halves, even where a tuple never reaches them (a tenth of a planned JSON
 * filter/project query's time), and their plan is parsed and analysed on every start.
 *
 * What Spark does, and so this (Spark 4 JacksonParser with from_json's default JSONOptions):
 * - the tuple's UTF-8 bytes are read through a java.io.InputStreamReader (malformed bytes
 *   become U+FFFD) by Jackson with single quotes and non-numeric numbers (NaN, Infinity,
 *   +INF, ...) allowed and everything else strict, and the default read constraints;
 * - the first token must start an object; what follows the object's end is not read;
 * - each value is its text: a string's characters, null as missing, anything else (numbers,
 *   booleans, nested objects and arrays) written back by a Jackson generator of the same
 *   factory, copyCurrentStructure, as UTF-8 (1E5 is 100000.0, NaN is "NaN" with quotes);
 * - strings go through Spark's UTF8String, which writes an unpaired surrogate as '?';
 * - any failure while reading (malformed JSON, a constraint exceeded) makes the map NULL:
 *   the tuple is not a JSON object (the expressions read with from_json's PERMISSIVE mode);
 * - keys are upper-cased by Spark's own upper of the UTF8_BINARY collation (ICU's case
 *   mapping where spark.sql.icu.caseMappings.enabled, its default: the layout says which, as
 *   the session had it when the query was planned), and two keys equal so (a key given
 *   twice, or in two cases) fail the tuple, as the expressions check before transform_keys.
 * tests/connectors/test_json_typed_parse.py checks this against the expressions, and
 * factory() against Spark's own JSONOptions factory.
 */
package io.streamctl;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.util.CollationFactory;
import org.apache.spark.sql.catalyst.util.CollationSupport;
import org.apache.spark.unsafe.types.UTF8String;

public final class NesJsonKeys {
    private static final JsonFactory SPARK_FACTORY = JsonFactory.builder()
        .enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
        .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
        .build();

    private NesJsonKeys() {}

    /** Two keys of a tuple are equal ignoring case. */
    static final class KeysTwice extends Exception {
        private static final long serialVersionUID = 1L;

        KeysTwice() {
            super(null, null, false, false);
        }
    }

    /** The factory the tuples are read with: Spark's from_json's, as the test compares. */
    public static JsonFactory factory() {
        return SPARK_FACTORY;
    }

    /**
     * The text of each column's key (names: the columns' names; upperNames: the same
     * upper-cased, as the expressions look them up; icu: whether Spark's upper maps case by
     * ICU), NULL where it is missing or null; or null where the tuple is not a JSON object.
     */
    static String[] texts(byte[] tuple, String[] names, String[] upperNames, boolean icu)
            throws KeysTwice {
        List<String> keys = new ArrayList<>();
        List<String> values = new ArrayList<>();
        if (!read(tuple, keys, values)) {
            return null;
        }
        Map<String, Integer> upper = new HashMap<>(keys.size() * 2);
        for (int i = 0; i < keys.size(); i++) {
            if (upper.putIfAbsent(sparkUpper(keys.get(i), icu), i) != null) {
                throw new KeysTwice();
            }
        }
        String[] texts = new String[names.length];
        for (int column = 0; column < names.length; column++) {
            int at = keys.indexOf(names[column]);
            if (at < 0) {
                Integer byCase = upper.get(upperNames[column]);
                at = byCase == null ? -1 : byCase;
            }
            texts[column] = at < 0 ? null : values.get(at);
        }
        return texts;
    }

    /** The object's keys and their texts, in order; false where it is no JSON object. */
    private static boolean read(byte[] tuple, List<String> keys, List<String> values) {
        InputStreamReader reader =
            new InputStreamReader(new ByteArrayInputStream(tuple), StandardCharsets.UTF_8);
        try (JsonParser parser = SPARK_FACTORY.createParser(reader)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            JsonToken token;
            while ((token = parser.nextToken()) != JsonToken.END_OBJECT) {
                if (token != JsonToken.FIELD_NAME) {
                    return false; // Jackson gives none other inside an object; never reached
                }
                keys.add(sparkString(parser.currentName()));
                values.add(text(parser, parser.nextToken()));
            }
            return true;
        } catch (IOException | RuntimeException malformed) {
            return false;
        }
    }

    /** The text of the value at ``token``, as Spark's from_json to a string writes it. */
    private static String text(JsonParser parser, JsonToken token) throws IOException {
        if (token == null || token == JsonToken.VALUE_NULL) {
            return null;
        }
        if (token == JsonToken.VALUE_STRING) {
            return sparkString(parser.getText());
        }
        ByteArrayOutputStream written = new ByteArrayOutputStream();
        try (JsonGenerator generator = SPARK_FACTORY.createGenerator(written, JsonEncoding.UTF8)) {
            generator.copyCurrentStructure(parser);
        }
        return new String(written.toByteArray(), StandardCharsets.UTF_8);
    }

    /** Spark's upper(text) in the UTF8_BINARY collation. */
    private static String sparkUpper(String text, boolean icu) {
        UTF8String upper = CollationSupport.Upper.exec(
            UTF8String.fromString(text), CollationFactory.UTF8_BINARY_COLLATION_ID, icu);
        return upper.toString();
    }

    /** ``text`` as Spark's UTF8String holds it: its UTF-8, where an unpaired surrogate is
     *  '?' (String.getBytes). */
    private static String sparkString(String text) {
        for (int i = 0; i < text.length(); i++) {
            if (Character.isSurrogate(text.charAt(i))) {
                return new String(text.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
            }
        }
        return text;
    }
}
