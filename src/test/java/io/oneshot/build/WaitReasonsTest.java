package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What a queued build says it waits for, from what the claim weighs (WaitReasons). */
class WaitReasonsTest {
  private static final ShareStore.Hold HOLD =
      new ShareStore.Hold(Instant.parse("2026-12-06T10:00:00Z"), "alice", "state migration");

  private static WaitReasons.Waiting waiting(
      String route, String team, int routeLive, int globalLive, int ahead) {
    return new WaitReasons.Waiting(
        route,
        null,
        null,
        null,
        100,
        routeLive,
        globalLive,
        ahead,
        team,
        null,
        null,
        "home",
        null,
        null);
  }

  private static ShareStore.Share team(String name, int weight, int live, boolean waiting) {
    return new ShareStore.Share(name, weight, 0, null, null, false, live, waiting);
  }

  @Test
  void aTeamUnderItsShareTakesTheNextFreeSlotsAndNamesWhoBorrows() {
    List<ShareStore.Share> teams =
        List.of(team("a", 1, 4, true), team("b", 2, 23, true), team("c", 1, 13, true));
    assertThat(WaitReasons.why(waiting("ra", "a", 4, 40, 0), teams, 40))
        .isEqualTo(
            "the global limit 40/40 is reached (dispatch.maxConcurrent); team a is at 4 of its"
                + " share 10 and takes the next free slots; team b borrows 3, team c borrows 3;"
                + " next to be claimed on route ra");
  }

  @Test
  void aTeamPastItsShareNamesTheTeamsTheNextSlotsGoTo() {
    List<ShareStore.Share> teams =
        List.of(team("a", 1, 30, true), team("b", 2, 7, true), team("c", 1, 3, false));
    assertThat(WaitReasons.why(waiting("ra", "a", 30, 40, 5), teams, 40))
        .isEqualTo(
            "the global limit 40/40 is reached (dispatch.maxConcurrent); team a runs 30, past its"
                + " share 10 (weight 1 of 4); the next free slots go to team b (7 of 20), under"
                + " its share; 5 builds ahead of this one on route ra");
    // Nobody under its share wants a slot: the limit alone is named.
    List<ShareStore.Share> alone =
        List.of(team("a", 1, 30, true), team("b", 2, 7, false), team("c", 1, 3, false));
    assertThat(WaitReasons.why(waiting("ra", "a", 30, 40, 5), alone, 40))
        .isEqualTo(
            "the global limit 40/40 is reached (dispatch.maxConcurrent); 5 builds ahead of this"
                + " one on route ra");
  }

  @Test
  void oneTeamAloneIsTheGlobalLimitAsBefore() {
    assertThat(WaitReasons.why(waiting("ra", "ra", 3, 3, 0), List.of(team("ra", 1, 3, true)), 3))
        .isEqualTo(
            "the global limit 3/3 is reached (dispatch.maxConcurrent); next to be claimed on route"
                + " ra");
  }

  @Test
  void aStalledClusterIsNamedBeforeAHoldOrALimit() {
    WaitReasons.Waiting stalled =
        new WaitReasons.Waiting(
            "eu-builds",
            null,
            null,
            null,
            1,
            1,
            40,
            0,
            "a",
            HOLD,
            null,
            "eu",
            "cluster eu: cannot reach the Kubernetes API at https://127.0.0.1:26443/: connection"
                + " refused",
            Instant.parse("2026-12-07T05:00:00Z"));
    assertThat(WaitReasons.why(stalled, List.of(team("a", 1, 1, true)), 40))
        .isEqualTo(
            "route eu-builds takes no launches now (since 2026-12-07T05:00:00.000Z): cluster eu:"
                + " cannot reach the Kubernetes API at https://127.0.0.1:26443/: connection refused;"
                + " it waits until cluster eu is fine again, and no attempt of it is spent"
                + " meanwhile");
  }

  @Test
  void aHoldIsNamedWithWhoWhenAndWhyBeforeAnyLimit() {
    WaitReasons.Waiting routeHeld =
        new WaitReasons.Waiting(
            "ra", null, null, null, 1, 1, 40, 0, "a", HOLD, null, "home", null, null);
    assertThat(WaitReasons.why(routeHeld, List.of(team("a", 1, 1, true)), 40))
        .isEqualTo(
            "route ra is held by alice since 2026-12-06T10:00:00.000Z: state migration; it waits"
                + " until the route is released (oneshot routes release ra)");
    WaitReasons.Waiting teamHeld =
        new WaitReasons.Waiting(
            "ra", null, null, null, 5, 0, 0, 0, "a", null, HOLD, "home", null, null);
    assertThat(WaitReasons.why(teamHeld, List.of(team("a", 1, 0, true)), 40))
        .isEqualTo(
            "team a is held by alice since 2026-12-06T10:00:00.000Z: state migration; it waits"
                + " until the team is released (oneshot routes release a --team)");
  }

  @Test
  void aTeamsCapAndBorrowLimitAreNamed() {
    List<ShareStore.Share> capped =
        List.of(new ShareStore.Share("a", 1, 0, null, 5, false, 5, true), team("b", 1, 0, false));
    assertThat(WaitReasons.why(waiting("ra", "a", 5, 5, 0), capped, 40))
        .isEqualTo(
            "team a is at its limit 5/5 (teams[].maxConcurrent); next to be claimed on route ra");
    List<ShareStore.Share> borrowing =
        List.of(new ShareStore.Share("a", 1, 0, 2, null, false, 22, true), team("b", 1, 0, false));
    assertThat(WaitReasons.why(waiting("ra", "a", 22, 22, 1), borrowing, 40))
        .isEqualTo(
            "team a runs 22: its share 20 of the global limit 40 and all it may borrow past it"
                + " (borrowLimit 2); 1 build ahead of this one on route ra");
  }

  @Test
  void freeSlotsKeptForAnotherTeamsGuaranteeAreNamed() {
    List<ShareStore.Share> teams =
        List.of(
            team("a", 1, 35, true), new ShareStore.Share("g", 1, 5, null, null, false, 0, false));
    assertThat(WaitReasons.why(waiting("ra", "a", 35, 35, 0), teams, 40))
        .isEqualTo(
            "the global limit's 5 free slots are kept for what other teams are guaranteed and do"
                + " not use (team g 5); next to be claimed on route ra");
    // A held team's guarantee is not kept.
    List<ShareStore.Share> held =
        List.of(
            team("a", 1, 35, true), new ShareStore.Share("g", 1, 5, null, null, true, 0, false));
    assertThat(WaitReasons.why(waiting("ra", "a", 35, 35, 0), held, 40))
        .isEqualTo("next to be claimed on route ra");
  }

  @Test
  void sharesAreWholeOrToOneDecimal() {
    assertThat(WaitReasons.slots(10)).isEqualTo("10");
    assertThat(WaitReasons.slots(40.0 / 3)).isEqualTo("13.3");
  }
}
