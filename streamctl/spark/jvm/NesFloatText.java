/*
 * NebulaStream's float text as a Spark Java UDF (streamctl.spark.float_text.with_float_texts;
 * registered by streamctl.spark.jvm_functions): C's printf("%.6f") of the double, then
 * trailing zeros dropped down to one ("153.0"); "nan", "inf", "-inf"; a negative value that
 * rounds to zero, and -0.0, as "-0.0". NULL in, NULL out. A FLOAT32 is widened to a double
 * first (exact).
 *
 * printf rounds the exact binary value of the double, ties to even (Java's formatters round
 * its shortest decimal form instead), so the digits come from exact arithmetic only: the
 * fraction fp = |v| % 1 is exact, fp * 10^6 = p + e exactly (Math.fma gives the error e of
 * the product p), and p is the double nearest to p + e, so a rounding boundary n + 0.5 can
 * lie strictly between them only where p is that boundary itself, and there the sign of e
 * decides (e == 0 is a tie). At or above 2^63 every double is an integer, written out by
 * BigDecimal's exact value. The same rule as Spark expressions is float_text's fallback.
 */
package io.streamctl;

import java.math.BigDecimal;
import org.apache.spark.sql.api.java.UDF1;

public final class NesFloatText implements UDF1<Double, String> {
    private static final long serialVersionUID = 1L;
    private static final double TWO_TO_63 = 0x1p63;
    private static final long MICROS = 1_000_000L;

    @Override
    public String call(Double boxed) {
        if (boxed == null) {
            return null;
        }
        return text(boxed);
    }

    static String text(double value) {
        if (Double.isNaN(value)) {
            return "nan";
        }
        if (Double.isInfinite(value)) {
            return value > 0 ? "inf" : "-inf";
        }
        StringBuilder out = new StringBuilder(24);
        if (Double.doubleToRawLongBits(value) < 0) {
            out.append('-'); // -0.0 and negative values that round to zero keep their sign
        }
        double magnitude = Math.abs(value);
        if (magnitude >= TWO_TO_63) {
            return out.append(new BigDecimal(magnitude).toPlainString()).append(".0").toString();
        }
        double fraction = magnitude % 1.0;
        long integer = (long) (magnitude - fraction);
        double product = fraction * 1e6;
        double error = Math.fma(fraction, 1e6, -product);
        double down = Math.floor(product);
        long micro;
        if (product - down == 0.5 && error != 0.0) {
            micro = (long) down + (error > 0.0 ? 1 : 0);
        } else {
            micro = (long) Math.rint(product); // ties (error 0) to even
        }
        if (micro == MICROS) {
            integer += 1;
            micro = 0;
        }
        out.append(integer).append('.');
        if (micro == 0) {
            return out.append('0').toString();
        }
        int digits = 6;
        while (micro % 10 == 0) {
            micro /= 10;
            digits--;
        }
        String significant = Long.toString(micro);
        for (int i = significant.length(); i < digits; i++) {
            out.append('0');
        }
        return out.append(significant).toString();
    }
}
