package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class SealerTest {
  private static final Sealer.Key K1 = new Sealer.Key("k1", "a".repeat(32));
  private static final Sealer.Key K2 = new Sealer.Key("k2", "b".repeat(32));

  @Test
  void aSealedValueOpensWithItsContextAndNamesItsKey() {
    Sealer s = new Sealer(List.of(K1));
    String sealed = s.seal("{\"serial\": 1}", "workspace-state");
    assertThat(sealed).startsWith("oneshot-sealed:v1:k1:").doesNotContain("serial");
    assertThat(s.open(sealed, "workspace-state")).isEqualTo("{\"serial\": 1}");
    // A fresh nonce each time: the same value never seals the same way twice.
    assertThat(s.seal("{\"serial\": 1}", "workspace-state")).isNotEqualTo(sealed);
    // Bound to its context: a build's values moved to another build do not open.
    String values = s.seal("{\"K\": \"v\"}", Sealer.buildContext(1));
    assertThatThrownBy(() -> s.open(values, Sealer.buildContext(2)))
        .isInstanceOf(Sealer.SealedException.class);
  }

  @Test
  void afterARotationOldValuesOpenAndNewOnesUseTheNewKey() {
    String old = new Sealer(List.of(K1)).seal("old", "c");
    Sealer rotated = new Sealer(List.of(K2, K1));
    assertThat(rotated.open(old, "c")).isEqualTo("old");
    assertThat(rotated.seal("new", "c")).startsWith("oneshot-sealed:v1:k2:");
    assertThatThrownBy(() -> new Sealer(List.of(K2)).open(old, "c"))
        .isInstanceOf(Sealer.SealedException.class)
        .hasMessageContaining("key k1");
    // The same id with another secret does not open it either.
    assertThatThrownBy(
            () -> new Sealer(List.of(new Sealer.Key("k1", "c".repeat(32)))).open(old, "c"))
        .isInstanceOf(Sealer.SealedException.class);
  }

  @Test
  void withoutKeysValuesStayAsTheyAreAndPlainValuesReadAsTheyWere() {
    assertThat(Sealer.NONE.seal("plain", "c")).isEqualTo("plain");
    assertThat(new Sealer(List.of(K1)).open("{\"plain\": true}", "c"))
        .isEqualTo("{\"plain\": true}");
    String tampered = new Sealer(List.of(K1)).seal("value", "c");
    String flipped =
        tampered.substring(0, tampered.length() - 3)
            + (tampered.charAt(tampered.length() - 3) == 'A' ? 'B' : 'A')
            + tampered.substring(tampered.length() - 2);
    assertThatThrownBy(() -> new Sealer(List.of(K1)).open(flipped, "c"))
        .isInstanceOf(Sealer.SealedException.class);
  }
}
