package io.oneshot.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.net.PfxOptions;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Extra certificate authorities: a server whose certificate a private CA signed (here, one that
 * signs itself) is trusted once its PEM is installed, and the JDK's authorities stay trusted.
 */
class ExtraCaCertsTest {
  private static final List<String> PROPERTIES =
      List.of(
          "javax.net.ssl.trustStore",
          "javax.net.ssl.trustStoreType",
          "javax.net.ssl.trustStorePassword");

  @TempDir Path dir;
  private final Map<String, String> saved = new java.util.HashMap<>();

  @BeforeEach
  void save() {
    PROPERTIES.forEach(p -> saved.put(p, System.getProperty(p)));
  }

  @AfterEach
  void restore() {
    PROPERTIES.forEach(
        p -> {
          if (saved.get(p) == null) {
            System.clearProperty(p);
          } else {
            System.setProperty(p, saved.get(p));
          }
        });
  }

  /** A key pair and its self-signed certificate for localhost, in {@code name}.p12 and .pem. */
  private Path keyPair(String name) throws Exception {
    Path keytool = Path.of(System.getProperty("java.home"), "bin", "keytool");
    Path p12 = dir.resolve(name + ".p12");
    run(
        keytool.toString(),
        "-genkeypair",
        "-alias",
        name,
        "-keyalg",
        "EC",
        "-dname",
        "CN=localhost",
        "-ext",
        "SAN=dns:localhost,ip:127.0.0.1",
        "-validity",
        "2",
        "-storetype",
        "PKCS12",
        "-keystore",
        p12.toString(),
        "-storepass",
        "secret1");
    run(
        keytool.toString(),
        "-exportcert",
        "-rfc",
        "-alias",
        name,
        "-keystore",
        p12.toString(),
        "-storepass",
        "secret1",
        "-file",
        dir.resolve(name + ".pem").toString());
    return p12;
  }

  private static void run(String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor()).as(out).isZero();
  }

  /** A client trusting what the JVM's default trust store holds now. */
  private static HttpClient client() throws Exception {
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init((KeyStore) null);
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(null, tmf.getTrustManagers(), null);
    return HttpClient.newBuilder().sslContext(ctx).build();
  }

  @Test
  void aServerSignedByAnExtraAuthorityIsTrustedOnceItIsInstalled() throws Exception {
    Path p12 = keyPair("private-ca");
    keyPair("other");
    Vertx vertx = Vertx.vertx();
    try {
      HttpServer server =
          vertx
              .createHttpServer(
                  new HttpServerOptions()
                      .setSsl(true)
                      .setKeyCertOptions(
                          new PfxOptions().setPath(p12.toString()).setPassword("secret1")))
              .requestHandler(r -> r.response().end("hello"))
              .listen(0, "127.0.0.1")
              .toCompletionStage()
              .toCompletableFuture()
              .get(10, TimeUnit.SECONDS);
      HttpRequest get =
          HttpRequest.newBuilder(URI.create("https://localhost:" + server.actualPort() + "/"))
              .build();
      assertThatThrownBy(() -> client().send(get, HttpResponse.BodyHandlers.ofString()))
          .isInstanceOf(SSLHandshakeException.class);

      // A directory of PEM files: both are added, the JDK's authorities stay.
      Files.delete(p12);
      Files.delete(dir.resolve("other.p12"));
      assertThat(ExtraCaCerts.install(Map.of(ExtraCaCerts.ENV, dir.toString()), dir)).isEqualTo(2);
      assertThat(client().send(get, HttpResponse.BodyHandlers.ofString()).body())
          .isEqualTo("hello");
      KeyStore installed =
          KeyStore.getInstance(
              Path.of(System.getProperty("javax.net.ssl.trustStore")).toFile(),
              System.getProperty("javax.net.ssl.trustStorePassword").toCharArray());
      assertThat(installed.size()).isGreaterThan(50);
      assertThat(
              Files.getPosixFilePermissions(
                  Path.of(System.getProperty("javax.net.ssl.trustStore"))))
          .containsExactlyInAnyOrder(
              java.nio.file.attribute.PosixFilePermission.OWNER_READ,
              java.nio.file.attribute.PosixFilePermission.OWNER_WRITE);
    } finally {
      vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void unsetChangesNothingAndABadFileIsAnErrorNamingTheVariable() throws Exception {
    assertThat(ExtraCaCerts.install(Map.of(), dir)).isZero();
    assertThat(System.getProperty("javax.net.ssl.trustStore"))
        .isEqualTo(saved.get("javax.net.ssl.trustStore"));
    Path junk = Files.writeString(dir.resolve("ca.pem"), "not a certificate");
    assertThatThrownBy(() -> ExtraCaCerts.install(Map.of(ExtraCaCerts.ENV, junk.toString()), dir))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("ONESHOT_EXTRA_CA_CERTS: ")
        .hasMessageContaining(junk.toString());
    assertThatThrownBy(
            () ->
                ExtraCaCerts.install(
                    Map.of(ExtraCaCerts.ENV, dir.resolve("none.pem").toString()), dir))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("none.pem");
  }

  @Test
  void aDatabaseUrlThatAsksToVerifyTheServerChecksItAgainstTheseAuthorities() throws Exception {
    keyPair("db-ca");
    Files.delete(dir.resolve("db-ca.p12"));
    ExtraCaCerts.install(Map.of(ExtraCaCerts.ENV, dir.resolve("db-ca.pem").toString()), dir);
    var full =
        io.oneshot.build.Database.parseUrl("postgresql://u@db.internal/q?sslmode=verify-full");
    assertThat(((io.vertx.core.net.PfxOptions) full.getTrustOptions()).getPath())
        .isEqualTo(System.getProperty("javax.net.ssl.trustStore"));
    assertThat(full.getHostnameVerificationAlgorithm()).isEqualTo("HTTPS");
    var ca = io.oneshot.build.Database.parseUrl("postgresql://u@db.internal/q?sslmode=verify-ca");
    assertThat(ca.getTrustOptions()).isNotNull();
    // Modes that do not verify are left as they are.
    assertThat(
            io.oneshot.build.Database.parseUrl("postgresql://u@db.internal/q?sslmode=require")
                .getTrustOptions())
        .isNull();
  }
}
