package io.oneshot.build;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Base64;

/**
 * A runner token: 256 random bits, good for one attempt of one build. Only its SHA-256 is stored
 * ({@code builds.token_hash}); the token itself lives in the attempt's Secret or file and in
 * provisionerd's memory. The {@code osr_} prefix lets secret scanners recognise a leaked token.
 */
public record BuildToken(String value, byte[] hash) {
  public static final String PREFIX = "osr_";
  private static final SecureRandom RANDOM = new SecureRandom();

  public static BuildToken generate() {
    byte[] bytes = new byte[32];
    RANDOM.nextBytes(bytes);
    String value = PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    return new BuildToken(value, hash(value));
  }

  public static byte[] hash(String token) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this JVM", e);
    }
  }

  /** A hash (or any bytes) as lower-case hex. */
  public static String hex(byte[] bytes) {
    return java.util.HexFormat.of().formatHex(bytes);
  }

  @Override
  public String toString() {
    return "BuildToken[***]";
  }
}
