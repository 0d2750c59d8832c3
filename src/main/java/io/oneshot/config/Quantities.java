package io.oneshot.config;

import java.math.BigDecimal;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Kubernetes quantities ("500m", "2", "512Mi", "4Gi", "1e3") as numbers, read as the API server
 * reads them (k8s.io/apimachinery/pkg/api/resource/quantity.go's grammar: a decimal number and an
 * optional binary or decimal suffix, or an exponent), and as {@code oneshot.quantity()} in
 * db/018_pod_settings.sql reads them at enqueue.
 */
public final class Quantities {
  private static final Pattern QUANTITY =
      Pattern.compile(
          "^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]{1,3})?$");

  private Quantities() {}

  /** The quantity's amount (cores, bytes, units), or null when {@code q} is not a quantity. */
  public static BigDecimal parse(String q) {
    if (q == null) {
      return null;
    }
    Matcher m = QUANTITY.matcher(q);
    if (!m.matches()) {
      return null;
    }
    BigDecimal n = new BigDecimal(m.group(1).endsWith(".") ? m.group(1) + "0" : m.group(1));
    String s = m.group(3) == null ? "" : m.group(3);
    return switch (s) {
      case "" -> n;
      case "Ki" -> n.multiply(BigDecimal.valueOf(1L << 10));
      case "Mi" -> n.multiply(BigDecimal.valueOf(1L << 20));
      case "Gi" -> n.multiply(BigDecimal.valueOf(1L << 30));
      case "Ti" -> n.multiply(BigDecimal.valueOf(1L << 40));
      case "Pi" -> n.multiply(BigDecimal.valueOf(1L << 50));
      case "Ei" -> n.multiply(BigDecimal.valueOf(1L << 60));
      case "n" -> n.scaleByPowerOfTen(-9);
      case "u" -> n.scaleByPowerOfTen(-6);
      case "m" -> n.scaleByPowerOfTen(-3);
      case "k" -> n.scaleByPowerOfTen(3);
      case "M" -> n.scaleByPowerOfTen(6);
      case "G" -> n.scaleByPowerOfTen(9);
      case "T" -> n.scaleByPowerOfTen(12);
      case "P" -> n.scaleByPowerOfTen(15);
      case "E" -> n.scaleByPowerOfTen(18);
      default -> n.scaleByPowerOfTen(Integer.parseInt(s.substring(1)));
    };
  }
}
