package io.oneshot.build;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A provisionerd process as it names itself on every runner call: a random {@code id} chosen per
 * process, and what helps a person find it: in a pod, the pod's name and UID; elsewhere, the host
 * and process id. The first acquire of an attempt binds the attempt to the runner's {@code id}; the
 * rest is for messages ("held by runner … in pod …") and for removing a second runner's pod.
 *
 * <p>The id itself never leaves the database and the process that chose it: whoever knew it could
 * pass for the bound runner. Messages, the API and logs show its {@link #fingerprint()}.
 */
public record Runner(String id, String pod, String podUid, String host, Long pid) {
  /** What a runner id may look like: 8 to 128 letters, digits, '.', '_' or '-'. */
  public static final Pattern ID = Pattern.compile("[A-Za-z0-9._-]{8,128}");

  /**
   * What names the runner to people: the first 8 hex digits of the SHA-256 of its id, which tell
   * runners apart and reveal nothing of the id.
   */
  public String fingerprint() {
    try {
      byte[] d =
          java.security.MessageDigest.getInstance("SHA-256")
              .digest(id.getBytes(java.nio.charset.StandardCharsets.UTF_8));
      return java.util.HexFormat.of().formatHex(d, 0, 4);
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** How the runner reads in a sentence: "runner 3f9c1a2b in pod oneshot-7-1-x2k9p (uid …)". */
  public String describe() {
    StringBuilder b = new StringBuilder("runner ").append(fingerprint());
    if (pod != null) {
      b.append(" in pod ").append(pod);
      if (podUid != null) {
        b.append(" (uid ").append(podUid).append(')');
      }
    } else if (pid != null) {
      b.append(" (process ").append(pid);
      if (host != null) {
        b.append(" on ").append(host);
      }
      b.append(')');
    }
    return b.toString();
  }

  /** The descriptive part, as stored beside the bound id (nulls left out). */
  public Map<String, Object> details() {
    Map<String, Object> m = new LinkedHashMap<>();
    if (pod != null) {
      m.put("pod", pod);
    }
    if (podUid != null) {
      m.put("podUid", podUid);
    }
    if (host != null) {
      m.put("host", host);
    }
    if (pid != null) {
      m.put("pid", pid);
    }
    return m;
  }

  /** A runner from its id and the stored details (any of which may be missing). */
  public static Runner of(String id, com.fasterxml.jackson.databind.JsonNode details) {
    if (details == null || details.isNull() || details.isMissingNode()) {
      return new Runner(id, null, null, null, null);
    }
    return new Runner(
        id,
        text(details, "pod"),
        text(details, "podUid"),
        text(details, "host"),
        details.hasNonNull("pid") ? details.get("pid").asLong() : null);
  }

  private static String text(com.fasterxml.jackson.databind.JsonNode n, String field) {
    return n.hasNonNull(field) ? n.get(field).asText() : null;
  }
}
