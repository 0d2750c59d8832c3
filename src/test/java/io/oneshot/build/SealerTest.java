package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class SealerTest {
  private static final Sealer.Key K1 = new Sealer.Key("k1", "a".repeat(32));
  private static final Sealer.Key K2 = new Sealer.Key("k2", "b".repeat(32));
  private static final Sealer.Context C = Sealer.workspaceState("team-a", "ws", 1);

  @Test
  void aSealedValueOpensWithItsContextAndNamesItsKey() {
    Sealer s = new Sealer(List.of(K1));
    String sealed = s.seal("{\"serial\": 1}", C);
    assertThat(sealed).startsWith("oneshot-sealed:v2:k1:").doesNotContain("serial");
    assertThat(s.open(sealed, C)).isEqualTo("{\"serial\": 1}");
    // A fresh nonce each time: the same value never seals the same way twice.
    assertThat(s.seal("{\"serial\": 1}", C)).isNotEqualTo(sealed);
  }

  /** A key's check is sealed with that key and bound to its id: another key's does not open. */
  @Test
  void aKeyCheckIsItsKeysAlone() {
    Sealer s = new Sealer(List.of(K1, K2));
    String k2 = s.sealWith("k2", "check", Sealer.keyCheck("k2"));
    assertThat(k2).startsWith("oneshot-sealed:v2:k2:");
    assertThat(s.open(k2, Sealer.keyCheck("k2"))).isEqualTo("check");
    assertThatThrownBy(() -> s.open(k2, Sealer.keyCheck("k1")))
        .isInstanceOf(Sealer.SealedException.class);
    assertThatThrownBy(() -> s.sealWith("k3", "check", Sealer.keyCheck("k3")))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aSealedValueOpensOnlyWhereItBelongs() {
    Sealer s = new Sealer(List.of(K1));
    // A workspace's state, moved to another version, another workspace or another route's
    // workspace of the same name, does not open.
    String state = s.seal("{\"serial\": 3}", Sealer.workspaceState("r", "team-a", 3));
    assertThat(s.open(state, Sealer.workspaceState("r", "team-a", 3))).isEqualTo("{\"serial\": 3}");
    for (Sealer.Context elsewhere :
        List.of(
            Sealer.workspaceState("r", "team-a", 4),
            Sealer.workspaceState("r", "team-b", 3),
            Sealer.workspaceState("other", "team-a", 3),
            // Parts are kept apart: "team-a" + "3" is not "team-a3" + "".
            new Sealer.Context(List.of("workspace", "team-a3", "version", "", "state"), null, "x"),
            // Bound to its route, it does not open with what a state sealed before routes was.
            new Sealer.Context(List.of("workspace", "team-a", "version", "3", "state"), null, "x"),
            Sealer.sensitive(3))) {
      assertThatThrownBy(() -> s.open(state, elsewhere))
          .as("%s", elsewhere)
          .isInstanceOf(Sealer.SealedException.class);
    }
    // A build's values moved to another build, or read as a state, do not open either.
    String values = s.seal("{\"K\": \"v\"}", Sealer.sensitive(1));
    assertThat(s.open(values, Sealer.sensitive(1))).isEqualTo("{\"K\": \"v\"}");
    assertThatThrownBy(() -> s.open(values, Sealer.sensitive(2)))
        .isInstanceOf(Sealer.SealedException.class);
    assertThatThrownBy(() -> s.open(values, Sealer.workspaceState("r", "1", 1)))
        .isInstanceOf(Sealer.SealedException.class);
  }

  @Test
  void valuesSealedBeforeTheirPlaceWasNamedStillOpenWithWhatTheyWereBoundTo() {
    Sealer s = new Sealer(List.of(K1));
    String oldState = s.sealV1("{\"serial\": 1}", "workspace-state");
    assertThat(oldState).startsWith("oneshot-sealed:v1:k1:");
    assertThat(s.open(oldState, Sealer.workspaceState("r", "any", 7))).isEqualTo("{\"serial\": 1}");
    String oldValues = s.sealV1("{\"K\": \"v\"}", Sealer.buildContext(5));
    assertThat(s.open(oldValues, Sealer.sensitive(5))).isEqualTo("{\"K\": \"v\"}");
    assertThatThrownBy(() -> s.open(oldValues, Sealer.sensitive(6)))
        .isInstanceOf(Sealer.SealedException.class);
  }

  @Test
  void aStateSealedBeforeWorkspacesBelongedToRoutesOpensOnItsWorkspaceAndVersionAlone() {
    Sealer s = new Sealer(List.of(K1));
    // As a state was sealed then: the workspace and version, no route.
    String before =
        s.seal(
            "{\"serial\": 2}",
            new Sealer.Context(List.of("workspace", "net", "version", "2", "state"), null, "x"));
    assertThat(before).startsWith("oneshot-sealed:v2:k1:");
    // The migration gives it its writing build's route; any route's context opens it there.
    assertThat(s.open(before, Sealer.workspaceState("team-a", "net", 2)))
        .isEqualTo("{\"serial\": 2}");
    // Still bound to its workspace and version.
    assertThatThrownBy(() -> s.open(before, Sealer.workspaceState("team-a", "net", 3)))
        .isInstanceOf(Sealer.SealedException.class);
    assertThatThrownBy(() -> s.open(before, Sealer.workspaceState("team-a", "web", 2)))
        .isInstanceOf(Sealer.SealedException.class);
  }

  @Test
  void afterARotationOldValuesOpenAndNewOnesUseTheNewKey() {
    String old = new Sealer(List.of(K1)).seal("old", C);
    Sealer rotated = new Sealer(List.of(K2, K1));
    assertThat(rotated.open(old, C)).isEqualTo("old");
    assertThat(rotated.seal("new", C)).startsWith("oneshot-sealed:v2:k2:");
    assertThatThrownBy(() -> new Sealer(List.of(K2)).open(old, C))
        .isInstanceOf(Sealer.SealedException.class)
        .hasMessageContaining("key k1");
    // The same id with another secret does not open it either.
    assertThatThrownBy(() -> new Sealer(List.of(new Sealer.Key("k1", "c".repeat(32)))).open(old, C))
        .isInstanceOf(Sealer.SealedException.class);
  }

  @Test
  void withoutKeysValuesStayAsTheyAreAndPlainValuesReadAsTheyWere() {
    assertThat(Sealer.NONE.seal("plain", C)).isEqualTo("plain");
    assertThat(new Sealer(List.of(K1)).open("{\"plain\": true}", C)).isEqualTo("{\"plain\": true}");
    String tampered = new Sealer(List.of(K1)).seal("value", C);
    String flipped =
        tampered.substring(0, tampered.length() - 3)
            + (tampered.charAt(tampered.length() - 3) == 'A' ? 'B' : 'A')
            + tampered.substring(tampered.length() - 2);
    assertThatThrownBy(() -> new Sealer(List.of(K1)).open(flipped, C))
        .isInstanceOf(Sealer.SealedException.class);
  }
}
