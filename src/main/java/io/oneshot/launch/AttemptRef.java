package io.oneshot.launch;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Identifies a launched attempt; {@code namespace} is null for launchers that have none, {@code
 * cluster} null where there is one place to look (the local launcher, or one cluster's own).
 */
public record AttemptRef(long buildId, int attempt, String name, String namespace, String cluster) {
  private static final Pattern NAME = Pattern.compile("^oneshot-(\\d+)-(\\d+)$");

  /** An attempt in the only place its launcher looks. */
  public AttemptRef(long buildId, int attempt, String name, String namespace) {
    this(buildId, attempt, name, namespace, null);
  }

  /** This attempt, said to be in {@code cluster}. */
  public AttemptRef in(String cluster) {
    return new AttemptRef(buildId, attempt, name, namespace, cluster);
  }

  /** Parses a deterministic attempt name back into its build and attempt. */
  public static Optional<AttemptRef> parse(String name, String namespace) {
    Matcher m = NAME.matcher(name);
    if (!m.matches()) {
      return Optional.empty();
    }
    try {
      return Optional.of(
          new AttemptRef(
              Long.parseLong(m.group(1)), Integer.parseInt(m.group(2)), name, namespace));
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
  }

  @Override
  public String toString() {
    String where = namespace == null ? name : namespace + "/" + name;
    return cluster == null ? where : where + " in cluster " + cluster;
  }
}
