/*
 * The build of streamctl's jar a Spark session runs, as a Spark Java UDF of no arguments
 * (registered by streamctl.spark.jvm_functions' probe): the SHA-256 of the Java sources the
 * jar was built from (META-INF/streamctl-sources.sha256, which scripts/build_jvm_jar.sh
 * writes). A Spark Connect server started with the jar of another streamctl release has
 * classes of the same names and other signatures; the probe compares this with the digest of
 * the jar beside the planning code and plans Spark expressions where they differ. NULL where
 * the entry cannot be read.
 */
package io.streamctl;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.api.java.UDF0;

public final class NesJarDigest implements UDF0<String> {
    private static final long serialVersionUID = 1L;
    private static final String ENTRY = "/META-INF/streamctl-sources.sha256";

    @Override
    public String call() {
        try (InputStream digest = NesJarDigest.class.getResourceAsStream(ENTRY)) {
            return digest == null ? null
                : new String(digest.readAllBytes(), StandardCharsets.UTF_8).trim();
        } catch (IOException unreadable) {
            return null;
        }
    }
}
