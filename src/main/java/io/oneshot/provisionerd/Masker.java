package io.oneshot.provisionerd;

import io.oneshot.build.Sensitive;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Replaces a build's sensitive values with {@code ***} in every text that leaves the attempt: log
 * lines (shipped and echoed to stdout), the build's error. It knows the values {@code
 * input.sensitive} names from the start, and the values of terraform outputs marked sensitive once
 * they are read. Longer values are replaced first, so that one holding another is masked whole.
 */
final class Masker {
  private volatile List<String> secrets = List.of();

  Masker(List<String> secrets) {
    secrets.forEach(this::add);
  }

  /** Masks {@code secret} from now on (values under 3 characters would mask ordinary text). */
  synchronized void add(String secret) {
    if (secret == null || secret.length() < 3 || secrets.contains(secret)) {
      return;
    }
    List<String> next = new ArrayList<>(secrets);
    next.add(secret);
    next.sort(Comparator.comparingInt(String::length).reversed());
    secrets = List.copyOf(next);
  }

  String mask(String text) {
    if (text == null) {
      return null;
    }
    String out = text;
    for (String s : secrets) {
      if (out.contains(s)) {
        out = out.replace(s, Sensitive.MASK);
      }
    }
    return out;
  }
}
