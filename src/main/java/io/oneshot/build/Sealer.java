package io.oneshot.build;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Encryption at rest for what a database dump must not reveal: workspace state and a build's
 * sensitive values. AES-256-GCM with a random 96-bit nonce per value; the key is SHA-256 of the
 * operator's secret. A sealed value is text, {@code oneshot-sealed:v1:<key id>:<base64 of nonce and
 * ciphertext>}, so it names the key that sealed it: after a rotation (a new key first in {@code
 * encryption.keys}, the old ones kept after it) new values are sealed with the new key and old ones
 * still open. Text without the prefix is a value stored before encryption was configured and is
 * returned as it is.
 *
 * <p>What a value belongs to is bound as associated data ({@link Context}): a workspace's state
 * names its route, workspace and version, a build's sensitive values name the build and the field,
 * so a sealed value copied to another row, another route, another version or another field does not
 * open. Values sealed before this ({@code v1}) bound only what they were ({@code workspace-state},
 * {@code build:<id>}); they still open with that, and are sealed as {@code v2} when written again.
 * States sealed before workspaces belonged to routes bound no route ({@link Context#earlier}); they
 * still open with that. They keep the {@code v2} prefix, so that a dispatcher of the previous
 * version, during a rolling upgrade, refuses a state bound to a route (it does not open) rather
 * than taking it for plain text.
 */
public final class Sealer {
  static final String PREFIX = "oneshot-sealed:v1:";
  static final String PREFIX_V2 = "oneshot-sealed:v2:";

  /**
   * What a sealed value belongs to: {@code parts} (its kind, then the names of its row and field),
   * bound as associated data of {@code v2} values; {@code earlier}, null or the parts a {@code v2}
   * value of the same place was bound to before {@code parts} named more of it, which it still
   * opens with; {@code legacy}, what a {@code v1} value of the same place was bound to.
   */
  public record Context(List<String> parts, List<String> earlier, String legacy) {
    /** The associated data: the parts as a JSON array, which no two lists of parts share. */
    byte[] aad() {
      return aad(parts);
    }

    /** The associated data of a value sealed before {@code parts} named more, or null. */
    byte[] earlierAad() {
      return earlier == null ? null : aad(earlier);
    }

    private static byte[] aad(List<String> parts) {
      StringBuilder b = new StringBuilder("[");
      for (int i = 0; i < parts.size(); i++) {
        b.append(i == 0 ? "" : ",").append('"');
        for (char ch : parts.get(i).toCharArray()) {
          if (ch == '"' || ch == '\\') {
            b.append('\\').append(ch);
          } else if (ch < 0x20) {
            b.append(String.format("\\u%04x", (int) ch));
          } else {
            b.append(ch);
          }
        }
        b.append('"');
      }
      return b.append(']').toString().getBytes(StandardCharsets.UTF_8);
    }
  }

  /** A build's sensitive values: the build and the field they are. */
  public static Context sensitive(long buildId) {
    return new Context(
        List.of("build", Long.toString(buildId), "input.sensitive"), null, buildContext(buildId));
  }

  /**
   * A workspace's state: the route whose workspace it is, the workspace and the version it is.
   * Sealed before workspaces belonged to routes, it was bound to the workspace and version alone.
   */
  public static Context workspaceState(String route, String workspace, int version) {
    String v = Integer.toString(version);
    return new Context(
        List.of("route", route, "workspace", workspace, "version", v, "state"),
        List.of("workspace", workspace, "version", v, "state"),
        "workspace-state");
  }

  private static final int NONCE_BYTES = 12;
  private static final int TAG_BITS = 128;

  /** No keys: values are stored as they are. */
  public static final Sealer NONE = new Sealer(List.of());

  /** One key: its id (as written into what it seals) and the operator's secret. */
  public record Key(String id, String secret) {
    public Key {
      if (!id.matches("[A-Za-z0-9._-]{1,64}")) {
        throw new IllegalArgumentException(
            "key id " + id + ": letters, digits, '.', '_' and '-', at most 64");
      }
      if (secret.length() < 32) {
        throw new IllegalArgumentException(
            "key " + id + ": the secret must be at least 32 characters");
      }
    }

    @Override
    public String toString() {
      return "Key[" + id + "]";
    }
  }

  /** A sealed value names a key this dispatcher does not have, or does not open with it. */
  public static final class SealedException extends RuntimeException {
    SealedException(String message) {
      super(message);
    }
  }

  private final Map<String, SecretKeySpec> keys = new LinkedHashMap<>();
  private final String current;
  private final SecureRandom random = new SecureRandom();

  /** {@code keys}: the first seals; all of them open. */
  public Sealer(List<Key> keys) {
    for (Key k : keys) {
      if (this.keys.put(k.id(), new SecretKeySpec(sha256(k.secret()), "AES")) != null) {
        throw new IllegalArgumentException("key id " + k.id() + " is given twice");
      }
    }
    this.current = keys.isEmpty() ? null : keys.get(0).id();
  }

  /** Where a build's sensitive values were bound by {@code v1}: they open for that build alone. */
  public static String buildContext(long buildId) {
    return "build:" + buildId;
  }

  /** Whether values are sealed (keys are configured). */
  public boolean enabled() {
    return current != null;
  }

  /** The id of the key that seals new values, or null. */
  public String currentKey() {
    return current;
  }

  /** {@code plain} sealed with the current key, bound to {@code context}; as it is without keys. */
  public String seal(String plain, Context context) {
    if (plain == null || current == null) {
      return plain;
    }
    return seal(plain, context.aad(), PREFIX_V2);
  }

  /** As {@code v1} sealed (for tests of values written before {@link Context}). */
  String sealV1(String plain, String context) {
    return seal(plain, context.getBytes(StandardCharsets.UTF_8), PREFIX);
  }

  private String seal(String plain, byte[] aad, String prefix) {
    return seal(plain, aad, prefix, current);
  }

  /** The configured key ids, the sealing one first. */
  public List<String> keyIds() {
    return List.copyOf(keys.keySet());
  }

  /** A key's check value (db/020_key_checks.sql): bound to that key's id, sealed with that key. */
  public static Context keyCheck(String keyId) {
    return new Context(List.of("key-check", keyId), null, "key-check:" + keyId);
  }

  /** {@code plain} sealed with key {@code keyId} (which must be configured), bound to {@code c}. */
  public String sealWith(String keyId, String plain, Context c) {
    if (!keys.containsKey(keyId)) {
      throw new IllegalArgumentException("no key " + keyId);
    }
    return seal(plain, c.aad(), PREFIX_V2, keyId);
  }

  private String seal(String plain, byte[] aad, String prefix, String keyId) {
    if (plain == null || keyId == null) {
      return plain;
    }
    try {
      byte[] nonce = new byte[NONCE_BYTES];
      random.nextBytes(nonce);
      Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
      c.init(Cipher.ENCRYPT_MODE, keys.get(keyId), new GCMParameterSpec(TAG_BITS, nonce));
      c.updateAAD(aad);
      byte[] ct = c.doFinal(plain.getBytes(StandardCharsets.UTF_8));
      byte[] out = ByteBuffer.allocate(nonce.length + ct.length).put(nonce).put(ct).array();
      return prefix + keyId + ":" + Base64.getEncoder().encodeToString(out);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-GCM is not available: " + e.getMessage(), e);
    }
  }

  /**
   * The plain text of a value {@link #seal} made with {@code context}; a value that is not sealed
   * is returned as it is.
   *
   * @throws SealedException when its key is not configured, or it does not open (a changed secret,
   *     another row's value)
   */
  public String open(String stored, Context context) {
    if (stored == null) {
      return null;
    }
    String prefix;
    byte[] aad;
    byte[] earlier = null;
    if (stored.startsWith(PREFIX_V2)) {
      prefix = PREFIX_V2;
      aad = context.aad();
      earlier = context.earlierAad();
    } else if (stored.startsWith(PREFIX)) {
      prefix = PREFIX;
      aad = context.legacy().getBytes(StandardCharsets.UTF_8);
    } else {
      return stored;
    }
    int colon = stored.indexOf(':', prefix.length());
    if (colon < 0) {
      throw new SealedException("a sealed value without a key id");
    }
    String id = stored.substring(prefix.length(), colon);
    SecretKeySpec key = keys.get(id);
    if (key == null) {
      throw new SealedException(
          "sealed with key "
              + id
              + ", which encryption.keys does not have (keys: "
              + (keys.isEmpty() ? "none" : String.join(", ", keys.keySet()))
              + "); keep old keys after a new one until nothing is sealed with them");
    }
    byte[] all;
    try {
      all = Base64.getDecoder().decode(stored.substring(colon + 1));
    } catch (IllegalArgumentException e) {
      all = new byte[0];
    }
    String plain = open(key, all, aad);
    if (plain == null && earlier != null) {
      plain = open(key, all, earlier);
    }
    if (plain == null) {
      throw new SealedException(
          "a value sealed with key "
              + id
              + " does not open: the key's secret changed, or the"
              + " value was altered or moved");
    }
    return plain;
  }

  /** The plain text of nonce and ciphertext {@code all} opened with {@code aad}, or null. */
  private static String open(SecretKeySpec key, byte[] all, byte[] aad) {
    if (all.length < NONCE_BYTES) {
      return null;
    }
    try {
      Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
      c.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, all, 0, NONCE_BYTES));
      c.updateAAD(aad);
      byte[] plain = c.doFinal(all, NONCE_BYTES, all.length - NONCE_BYTES);
      return new String(plain, StandardCharsets.UTF_8);
    } catch (NoSuchAlgorithmException | javax.crypto.NoSuchPaddingException e) {
      throw new IllegalStateException("AES-GCM is not available: " + e.getMessage(), e);
    } catch (IllegalArgumentException | GeneralSecurityException e) {
      return null;
    }
  }

  /** Whether {@code stored} is a sealed value. */
  public static boolean sealed(String stored) {
    return stored != null && (stored.startsWith(PREFIX) || stored.startsWith(PREFIX_V2));
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
