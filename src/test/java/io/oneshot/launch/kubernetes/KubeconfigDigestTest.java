package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.config.ConfigException;
import io.oneshot.config.OneshotConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What tells a dispatcher that a cluster's credential was rotated on disk: the kubeconfig, and the
 * certificate, key and token files it names (relative to its own directory, as kubectl reads them).
 */
class KubeconfigDigestTest {
  @TempDir Path dir;

  private static final String KUBECONFIG =
      """
      apiVersion: v1
      kind: Config
      clusters:
      - name: far
        cluster: {server: "https://127.0.0.1:26443", certificate-authority: %s}
      users:
      - name: oneshot
        user: {client-certificate: client.crt, client-key: keys/client.key}
      contexts:
      - name: far
        context: {cluster: far, user: oneshot}
      current-context: far
      """;

  private OneshotConfig.Cluster cluster(Path kubeconfig) {
    return new OneshotConfig.Cluster(
        "far", kubeconfig, null, false, "default", 10, 20, 8, Duration.ofSeconds(10));
  }

  @Test
  void aCertificateOrKeyRotatedBesideAnUnchangedKubeconfigChangesIt() throws IOException {
    Path ca = dir.resolve("ca.crt");
    Files.writeString(ca, "ca-1");
    Files.createDirectories(dir.resolve("keys"));
    Files.writeString(dir.resolve("client.crt"), "cert-1");
    Files.writeString(dir.resolve("keys/client.key"), "key-1");
    Path kubeconfig = dir.resolve("kubeconfig");
    Files.writeString(kubeconfig, KUBECONFIG.formatted(ca));
    OneshotConfig.Cluster far = cluster(kubeconfig);

    assertThat(Clusters.namedFiles(kubeconfig, Files.readAllBytes(kubeconfig)))
        .containsExactlyInAnyOrder(ca, dir.resolve("client.crt"), dir.resolve("keys/client.key"));
    String first = Clusters.digest(far);
    assertThat(first).isNotNull().isEqualTo(Clusters.digest(far));
    // A file it does not name changes nothing.
    Files.writeString(dir.resolve("unrelated.crt"), "other");
    assertThat(Clusters.digest(far)).isEqualTo(first);

    Files.writeString(dir.resolve("client.crt"), "cert-2");
    String second = Clusters.digest(far);
    assertThat(second).isNotEqualTo(first);
    Files.writeString(dir.resolve("keys/client.key"), "key-2");
    String third = Clusters.digest(far);
    assertThat(third).isNotEqualTo(second);
    Files.writeString(ca, "ca-2");
    assertThat(Clusters.digest(far)).isNotEqualTo(third);
  }

  /**
   * The context's user's {@code tokenFile} is read (the Kubernetes client reads none) and wins over
   * an inline token, as client-go's BearerTokenFile does; it is in the digest like the others.
   */
  @Test
  void theContextsUsersTokenFileIsReadAndWinsOverAnInlineToken() throws IOException {
    Files.createDirectories(dir.resolve("tokens"));
    Files.writeString(dir.resolve("tokens/far"), "from-the-file\n");
    Files.writeString(dir.resolve("tokens/other"), "the-other-users\n");
    Path kubeconfig = dir.resolve("kubeconfig");
    Files.writeString(
        kubeconfig,
        """
        apiVersion: v1
        kind: Config
        clusters:
        - {name: far, cluster: {server: "https://127.0.0.1:26443"}}
        users:
        - {name: other, user: {tokenFile: tokens/other}}
        - {name: far, user: {token: inline, tokenFile: tokens/far}}
        contexts:
        - {name: other, context: {cluster: far, user: other}}
        - {name: far, context: {cluster: far, user: far}}
        current-context: far
        """);
    assertThat(Clusters.clientConfig(cluster(kubeconfig)).getOauthToken())
        .isEqualTo("from-the-file");
    assertThat(
            Clusters.clientConfig(
                    new OneshotConfig.Cluster(
                        "far",
                        kubeconfig,
                        "other",
                        false,
                        "default",
                        10,
                        20,
                        8,
                        Duration.ofSeconds(10)))
                .getOauthToken())
        .isEqualTo("the-other-users");
    assertThat(Clusters.namedFiles(kubeconfig, Files.readAllBytes(kubeconfig)))
        .contains(dir.resolve("tokens/far"));
    String first = Clusters.digest(cluster(kubeconfig));
    Files.writeString(dir.resolve("tokens/far"), "rotated\n");
    assertThat(Clusters.digest(cluster(kubeconfig))).isNotEqualTo(first);
    assertThat(Clusters.clientConfig(cluster(kubeconfig)).getOauthToken()).isEqualTo("rotated");

    Files.delete(dir.resolve("tokens/far"));
    assertThatThrownBy(() -> Clusters.clientConfig(cluster(kubeconfig)))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("cannot read the tokenFile it names")
        .hasMessageContaining(dir.resolve("tokens/far").toString());
  }

  @Test
  void aNamedFileNotThereYetOrAKubeconfigThatIsNotYamlStillHasOne() throws IOException {
    Path kubeconfig = dir.resolve("kubeconfig");
    Files.writeString(kubeconfig, KUBECONFIG.formatted(dir.resolve("ca.crt")));
    String without = Clusters.digest(cluster(kubeconfig));
    assertThat(without).isNotNull();
    Files.writeString(dir.resolve("client.crt"), "cert-1");
    assertThat(Clusters.digest(cluster(kubeconfig))).isNotEqualTo(without);

    Files.writeString(kubeconfig, "{ not: [yaml");
    assertThat(Clusters.namedFiles(kubeconfig, Files.readAllBytes(kubeconfig))).isEmpty();
    assertThat(Clusters.digest(cluster(kubeconfig))).isNotNull();
    assertThat(Clusters.digest(cluster(dir.resolve("missing")))).isNull();
  }
}
