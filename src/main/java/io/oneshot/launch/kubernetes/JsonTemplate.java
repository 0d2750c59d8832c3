package io.oneshot.launch.kubernetes;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

/**
 * A JSON document serialized once, split where a few values go: filling it in for one attempt is a
 * string concatenation, where serializing the model walks every field of the object by reflection.
 * A route's Job is the same for each of its attempts but for the build id and the attempt number
 * (and the name made of them), so the launch sends the route's Job this way (docs/performance.md,
 * "Launching Jobs").
 *
 * <p>Made from a document serialized with unlikely values (the probes) in the places that vary, and
 * used only once it is proved: filled in with other values, it must equal the document the model
 * serializes with those values, to the character. A template whose own text holds a probe's
 * characters fails that proof, and the caller serializes the model instead.
 */
final class JsonTemplate {
  private final String[] literals;
  private final int[] slots;

  /** The literals' length together: what a filled-in document holds besides its values. */
  private final int literalLength;

  private JsonTemplate(String[] literals, int[] slots) {
    this.literals = literals;
    this.slots = slots;
    int length = 0;
    for (String l : literals) {
      length += l.length();
    }
    this.literalLength = length;
  }

  /**
   * The template of {@code serialize}'s document, split at {@code probes} (each a value of the
   * document that {@code serialize} was given {@code probes} for), once {@code proof} values (as
   * many, different from the probes) give through it exactly what {@code serialize} gives for them;
   * empty when they do not.
   */
  static Optional<JsonTemplate> of(
      Function<List<String>, String> serialize, List<String> probes, List<String> proof) {
    String json = serialize.apply(probes);
    List<String> literals = new ArrayList<>();
    List<Integer> slots = new ArrayList<>();
    int from = 0;
    while (true) {
      int at = -1;
      int which = -1;
      for (int i = 0; i < probes.size(); i++) {
        int j = json.indexOf(probes.get(i), from);
        if (j >= 0 && (at < 0 || j < at)) {
          at = j;
          which = i;
        }
      }
      if (at < 0) {
        break;
      }
      literals.add(json.substring(from, at));
      slots.add(which);
      from = at + probes.get(which).length();
    }
    literals.add(json.substring(from));
    JsonTemplate t =
        new JsonTemplate(
            literals.toArray(String[]::new), slots.stream().mapToInt(Integer::intValue).toArray());
    return t.fill(proof).equals(serialize.apply(proof)) ? Optional.of(t) : Optional.empty();
  }

  /**
   * The document with {@code values} in the probes' places. Each value must need no escaping in a
   * JSON string ({@link #plain}).
   */
  String fill(List<String> values) {
    StringBuilder out = new StringBuilder(literalLength + slots.length * 24);
    for (int i = 0; i < slots.length; i++) {
      out.append(literals[i]).append(values.get(slots[i]));
    }
    return out.append(literals[literals.length - 1]).toString();
  }

  /** Whether {@code s} stands in a JSON string as it is: no quote, backslash or control char. */
  static boolean plain(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\' || c < 0x20) {
        return false;
      }
    }
    return true;
  }
}
