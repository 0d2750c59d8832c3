package io.oneshot.config;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Certificate authorities to trust besides the JDK's: {@code ONESHOT_EXTRA_CA_CERTS} names a PEM
 * bundle (or a directory of {@code .pem} and {@code .crt} files), for a database, a Coder or an API
 * behind a private CA. The JDK's own authorities (or the trust store {@code
 * javax.net.ssl.trustStore} already names) are kept; the result is written to a private PKCS12 file
 * and made the JVM's default trust store before anything connects, so PostgreSQL's TLS, the CLI's
 * HTTPS and any other default-trust client use it.
 */
public final class ExtraCaCerts {
  public static final String ENV = "ONESHOT_EXTRA_CA_CERTS";

  private ExtraCaCerts() {}

  /**
   * Installs the authorities {@code env} names, if any; returns how many were added (0: the
   * variable is unset).
   *
   * @throws ConfigException naming the variable and the file when they cannot be read
   */
  public static int install(Map<String, String> env, Path tmpDir) {
    String given = env.get(ENV);
    if (given == null || given.isBlank()) {
      return 0;
    }
    Path where = Path.of(given.strip());
    try {
      List<X509Certificate> extra = read(where);
      if (extra.isEmpty()) {
        throw new ConfigException(ENV + ": " + where + " holds no PEM certificate");
      }
      KeyStore store = defaults();
      int i = 0;
      for (X509Certificate c : extra) {
        store.setCertificateEntry("oneshot-extra-" + i++, c);
      }
      byte[] raw = new byte[24];
      new SecureRandom().nextBytes(raw);
      char[] password = Base64.getEncoder().encodeToString(raw).toCharArray();
      Path file =
          Files.createTempFile(
              tmpDir,
              "oneshot-truststore-",
              ".p12",
              PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
      file.toFile().deleteOnExit();
      try (OutputStream out = Files.newOutputStream(file)) {
        store.store(out, password);
      }
      System.setProperty("javax.net.ssl.trustStore", file.toString());
      System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
      System.setProperty("javax.net.ssl.trustStorePassword", new String(password));
      return extra.size();
    } catch (IOException | GeneralSecurityException e) {
      throw new ConfigException(ENV + ": cannot read " + where + ": " + e.getMessage());
    }
  }

  /** The certificates of a PEM bundle, or of every .pem and .crt file in a directory. */
  static List<X509Certificate> read(Path where) throws IOException, GeneralSecurityException {
    List<Path> files = new ArrayList<>();
    if (Files.isDirectory(where)) {
      try (Stream<Path> s = Files.list(where)) {
        s.filter(p -> p.toString().endsWith(".pem") || p.toString().endsWith(".crt"))
            .sorted()
            .forEach(files::add);
      }
    } else {
      files.add(where);
    }
    CertificateFactory cf = CertificateFactory.getInstance("X.509");
    List<X509Certificate> out = new ArrayList<>();
    for (Path f : files) {
      try (InputStream in = Files.newInputStream(f)) {
        Collection<? extends Certificate> certs = cf.generateCertificates(in);
        for (Certificate c : certs) {
          out.add((X509Certificate) c);
        }
      }
    }
    return out;
  }

  /**
   * A trust store file and its password ({@code null}: none given).
   *
   * @param file a PKCS12 or JKS file
   */
  public record TrustStore(Path file, String password) {}

  /**
   * The trust store the JVM would use now: {@code javax.net.ssl.trustStore} with its password, else
   * the JDK's {@code cacerts} (whose password is the JDK's default, {@code changeit}).
   */
  public static TrustStore jvmTrustStore() {
    String configured = System.getProperty("javax.net.ssl.trustStore");
    if (configured != null && !configured.isEmpty()) {
      return new TrustStore(
          Path.of(configured), System.getProperty("javax.net.ssl.trustStorePassword"));
    }
    return new TrustStore(
        Path.of(System.getProperty("java.home"), "lib", "security", "cacerts"), "changeit");
  }

  private static KeyStore defaults() throws IOException, GeneralSecurityException {
    TrustStore t = jvmTrustStore();
    return KeyStore.getInstance(
        t.file().toFile(), t.password() == null ? null : t.password().toCharArray());
  }
}
