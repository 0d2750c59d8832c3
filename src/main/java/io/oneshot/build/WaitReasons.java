package io.oneshot.build;

import io.oneshot.api.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Why a queued build waits, as a person would say it, from what the claim weighs (queue/claim.sql):
 * its workspace's earlier build, a hold on its route or team, its route's limit, its team's cap and
 * borrowLimit, the global limit and the teams' shares, the guarantees kept free, and the builds
 * ahead of it. The first that holds it back is named.
 */
final class WaitReasons {
  private WaitReasons() {}

  /**
   * A queued build as reads/waiting.sql reads it: its route and workspace, an earlier unfinished
   * build of that workspace (null: none), its route's limit and live builds, all live builds, the
   * builds of its route claimed before it (up to 1001), its team, and the holds on its route and
   * team (null: none).
   */
  record Waiting(
      String route,
      String workspace,
      Long workspaceBuild,
      String workspaceStatus,
      Integer routeMax,
      int routeLive,
      int globalLive,
      int ahead,
      String team,
      ShareStore.Hold routeHold,
      ShareStore.Hold teamHold,
      String cluster,
      String stalled,
      java.time.Instant stalledAt) {}

  /**
   * @param teams every team, as share/shares.sql reads them
   * @param globalLimit {@code dispatch.maxConcurrent}, 0 when unknown
   */
  static String why(Waiting w, List<ShareStore.Share> teams, int globalLimit) {
    String queue = queue(w);
    if (w.workspaceBuild() != null) {
      return "workspace "
          + w.workspace()
          + " is busy with build "
          + w.workspaceBuild()
          + " ("
          + w.workspaceStatus()
          + "); it runs when that one has ended";
    }
    if (w.stalled() != null) {
      return "route "
          + w.route()
          + " takes no launches now"
          + (w.stalledAt() == null ? "" : " (since " + Json.TIME.format(w.stalledAt()) + ")")
          + ": "
          + w.stalled()
          + "; it waits until cluster "
          + w.cluster()
          + " is fine again, and no attempt of it is spent meanwhile";
    }
    if (w.routeHold() != null) {
      return held("route " + w.route(), w.routeHold())
          + "; it waits until the route is released (oneshot routes release "
          + w.route()
          + ")";
    }
    if (w.teamHold() != null) {
      return held("team " + w.team(), w.teamHold())
          + "; it waits until the team is released (oneshot routes release "
          + w.team()
          + " --team)";
    }
    if (w.routeMax() != null && w.routeLive() >= w.routeMax()) {
      return "route "
          + w.route()
          + " is at its limit "
          + w.routeLive()
          + "/"
          + w.routeMax()
          + "; "
          + (w.ahead() == 0 ? "this build is next" : queue);
    }
    ShareStore.Share mine =
        teams.stream().filter(t -> t.name().equals(w.team())).findFirst().orElse(null);
    int totalWeight = teams.stream().mapToInt(ShareStore.Share::weight).sum();
    boolean shared = teams.size() > 1 && globalLimit > 0;
    if (mine != null && mine.maxConcurrent() != null && mine.live() >= mine.maxConcurrent()) {
      return "team "
          + mine.name()
          + " is at its limit "
          + mine.live()
          + "/"
          + mine.maxConcurrent()
          + " (teams[].maxConcurrent); "
          + queue;
    }
    double share =
        mine == null ? 0 : ShareStore.share(mine.weight(), totalWeight, Math.max(globalLimit, 0));
    if (mine != null && mine.borrowLimit() != null && globalLimit > 0) {
      int most = Math.max(mine.guaranteed(), (int) Math.ceil(share) + mine.borrowLimit());
      if (mine.live() >= most) {
        return "team "
            + mine.name()
            + " runs "
            + mine.live()
            + ": its share "
            + slots(share)
            + " of the global limit "
            + globalLimit
            + " and all it may borrow past it (borrowLimit "
            + mine.borrowLimit()
            + "); "
            + queue;
      }
    }
    if (globalLimit > 0 && w.globalLive() >= globalLimit) {
      String limit =
          "the global limit "
              + w.globalLive()
              + "/"
              + globalLimit
              + " is reached (dispatch.maxConcurrent); ";
      if (!shared || mine == null) {
        return limit + queue;
      }
      if (mine.live() < Math.max(mine.guaranteed(), Math.ceil(share))) {
        List<String> borrowers = new ArrayList<>();
        for (ShareStore.Share t : teams) {
          int b =
              ShareStore.borrowed(
                  t.live(), ShareStore.share(t.weight(), totalWeight, globalLimit), t.guaranteed());
          if (b > 0 && !t.name().equals(mine.name())) {
            borrowers.add("team " + t.name() + " borrows " + b);
          }
        }
        return limit
            + "team "
            + mine.name()
            + " is at "
            + mine.live()
            + " of its share "
            + slots(share)
            + " and takes the next free slots"
            + (borrowers.isEmpty() ? "" : "; " + String.join(", ", borrowers))
            + "; "
            + queue;
      }
      List<String> under = new ArrayList<>();
      for (ShareStore.Share t : teams) {
        double s = ShareStore.share(t.weight(), totalWeight, globalLimit);
        if (!t.name().equals(mine.name())
            && t.waiting()
            && !t.held()
            && t.live() < Math.ceil(s)
            && (t.maxConcurrent() == null || t.live() < t.maxConcurrent())) {
          under.add("team " + t.name() + " (" + t.live() + " of " + slots(s) + ")");
        }
      }
      if (under.isEmpty()) {
        return limit + queue;
      }
      return limit
          + "team "
          + mine.name()
          + " runs "
          + mine.live()
          + ", past its share "
          + slots(share)
          + " (weight "
          + mine.weight()
          + " of "
          + totalWeight
          + "); the next free slots go to "
          + String.join(", ", under)
          + ", under "
          + (under.size() == 1 ? "its share" : "theirs")
          + "; "
          + queue;
    }
    if (globalLimit > 0 && mine != null && mine.live() >= mine.guaranteed()) {
      int free = Math.max(globalLimit - w.globalLive(), 0);
      List<String> owed = new ArrayList<>();
      int reserved = 0;
      for (ShareStore.Share t : teams) {
        int unused = Math.max(t.guaranteed() - t.live(), 0);
        if (unused > 0 && !t.held() && !t.name().equals(mine.name())) {
          reserved += unused;
          owed.add("team " + t.name() + " " + unused);
        }
      }
      if (reserved > 0 && free <= reserved) {
        return "the global limit's "
            + free
            + " free "
            + (free == 1 ? "slot is" : "slots are")
            + " kept for what other teams are guaranteed and do not use ("
            + String.join(", ", owed)
            + "); "
            + queue;
      }
    }
    return queue;
  }

  private static String queue(Waiting w) {
    int ahead = w.ahead();
    return ahead == 0
        ? "next to be claimed on route " + w.route()
        : (ahead > 1000 ? "more than 1000 builds" : ahead + (ahead == 1 ? " build" : " builds"))
            + " ahead of this one on route "
            + w.route();
  }

  private static String held(String what, ShareStore.Hold h) {
    return what
        + " is held by "
        + h.by()
        + " since "
        + Json.TIME.format(h.at())
        + (h.why() == null || h.why().isEmpty() ? "" : ": " + h.why());
  }

  /** A share in slots: whole when it is, else to one decimal. */
  static String slots(double share) {
    return share == Math.rint(share)
        ? Long.toString((long) share)
        : String.format(Locale.ROOT, "%.1f", share);
  }
}
