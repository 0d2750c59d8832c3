package io.oneshot.bench;

import io.oneshot.testing.Browser;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.openqa.selenium.By;
import org.openqa.selenium.JavascriptExecutor;
import org.openqa.selenium.chrome.ChromeDriver;

/**
 * The web console as a new user meets it, in a real headless Chromium against the dispatcher of
 * {@code oneshot dev} (local launcher, real script builds): a few hundred builds behind it, some
 * running and a queue waiting. Measured in the page ({@code performance.now()}): how long the
 * overview takes to show its routes on a fresh load, the builds list and a queued build's reason on
 * a route change, and how far a chatty build's live log falls behind (the last line's arrival after
 * the build wrote it, and lines shown per second).
 */
final class ConsoleBench implements Scenario {
  private static final String ROUTES =
      "routes: [{name: web, tags: {team: web}, maxConcurrent: 2},"
          + " {name: batch, tags: {team: batch}, maxConcurrent: 3},"
          + " {name: chat, tags: {team: chat}, maxConcurrent: 1},"
          + " {name: default, maxConcurrent: 4}]";

  @Override
  public String name() {
    return "console";
  }

  @Override
  public String describe() {
    return "web console in Chromium over oneshot dev with a few hundred builds: overview,"
        + " list, and a chatty build's live log";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int history = smoke ? 12 : 300;
    int queued = smoke ? 6 : 60;
    int lines = smoke ? 2_000 : 50_000;
    String[] teams = {"web", "batch", "default"};
    Sql.reset();
    try (TestServer t = TestServer.with().routes(ROUTES).dispatch("maxConcurrent: 10").start()) {
      Harness.awaitLeader(t);
      // The history: short builds on every route, run to the end by real provisionerd processes.
      long first = 0;
      for (int i = 0; i < history; i++) {
        String team = teams[i % teams.length];
        long id =
            t.api.submitScript(
                team.equals("default") ? "{}" : "{\"team\": \"" + team + "\"}",
                "echo build " + i + "; echo 'step two'");
        first = first == 0 ? id : first;
      }
      long firstId = first;
      Harness.await(
          history + " builds finished",
          Duration.ofMinutes(20),
          () ->
              Sql.count(
                      "SELECT count(*) FROM oneshot.builds WHERE id >= ? AND finished_at IS NOT NULL",
                      firstId)
                  >= history);
      // Now the routes fill: long builds at their limits, and a queue behind them.
      List<Long> waiting = new ArrayList<>();
      for (int i = 0; i < 2 + 3 + queued; i++) {
        String team = i < 2 ? "web" : i < 5 ? "batch" : teams[i % 2];
        long id = t.api.submitScript("{\"team\": \"" + team + "\"}", "exec sleep 600");
        if (i >= 5) {
          waiting.add(id);
        }
      }
      Harness.await(
          "web and batch at their limits",
          Duration.ofMinutes(2),
          () -> Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'running'") == 5);

      try (Browser browser = Browser.start("bench-console")) {
        ChromeDriver d = browser.driver;
        JavascriptExecutor js = d;
        d.get(t.api.base() + "/ui/");
        d.findElement(By.id("token")).sendKeys(TestServer.ADMIN_TOKEN);
        d.findElement(By.id("sign-in")).click();
        // Once signed in (the token is in the tab's session), each figure is one fresh load.
        js.executeAsyncScript(until("document.querySelector('[data-route]')", "0"));
        String variant = String.format("%,d builds, %d queued", history + 5 + queued, queued);
        List<Double> overview = new ArrayList<>();
        List<Double> list = new ArrayList<>();
        for (int i = 0; i < (smoke ? 1 : 5); i++) {
          d.get(t.api.base() + "/ui/#/");
          d.navigate().refresh();
          // From the navigation's start to the cards, with the queue's counts in them.
          overview.add(
              ((Number)
                      js.executeAsyncScript(
                          until(
                              "document.querySelector(\"[data-route='web'] [data-k='queued']\")",
                              "0")))
                  .doubleValue());
          // A hash change to the pending builds: from the click to a queued build's reason.
          list.add(
              ((Number)
                      js.executeAsyncScript(
                          "const t0 = performance.now(); location.hash = '#/builds?status=pending'; "
                              + until("document.querySelector('#builds td.why')", "t0")))
                  .doubleValue());
        }
        report.latency(name(), variant, "overview shown after a fresh load", overview, null, null);
        report.latency(
            name(), variant, "pending list with why each waits, from the click", list, null, null);
        // The ceiling: the API reads behind those two views, fetched from the same page with the
        // same token, and nothing drawn.
        String ceiling = "ceiling: the views' API reads alone, fetched from the page";
        report.reference(name(), ceiling);
        List<Double> overviewReads = new ArrayList<>();
        List<Double> listReads = new ArrayList<>();
        for (int i = 0; i < (smoke ? 1 : 5); i++) {
          overviewReads.add(
              fetched(js, "['/api/v1/routes', '/api/v1/overview', '/api/v1/sources']"));
          listReads.add(fetched(js, "['/api/v1/builds?status=pending&limit=50']"));
        }
        report.latency(
            name(),
            ceiling,
            "the overview's three reads (routes, overview, sources)",
            overviewReads,
            null,
            null);
        report.latency(name(), ceiling, "the pending list's read", listReads, null, null);

        // A chatty build: as many lines as the shell writes, followed live from its page.
        long chat =
            t.api.submitScript(
                "{\"team\": \"chat\"}",
                "sleep 3; seq 1 " + lines + " | sed 's/.*/line & of a chatty build/'; echo END");
        d.get(t.api.base() + "/ui/#/builds/" + chat);
        js.executeAsyncScript(until("document.querySelector('#log-state')", "0"));
        Harness.await(
            "the chatty build finished",
            Duration.ofMinutes(5),
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.builds WHERE id = ? AND finished_at IS NOT NULL",
                        chat)
                    == 1);
        d.manage().timeouts().scriptTimeout(Duration.ofMinutes(5));
        double lagMs =
            ((Number)
                    js.executeAsyncScript(
                        "const t0 = performance.now(); "
                            + until(
                                "[...document.querySelectorAll('#log .line .text')].some(e =>"
                                    + " e.textContent === 'END')",
                                "t0")))
                .doubleValue();
        long shown =
            ((Number)
                    js.executeScript(
                        "return document.querySelectorAll('#log .line.stdout').length"))
                .longValue();
        // How fast the build wrote: from its first output line to its last, as stored.
        double writeMs =
            ((Number)
                    Sql.value(
                        "SELECT extract(epoch FROM max(ts) - min(ts)) * 1000"
                            + " FROM oneshot.build_logs WHERE build_id = ? AND stream = 'stdout'",
                        chat))
                .doubleValue();
        String chatty = String.format("%,d lines written in %.2f s", lines + 1, writeMs / 1000);
        report.add(name(), chatty, "last line shown after the build ended", lagMs, "ms");
        report.add(name(), chatty, "lines shown", shown, "lines");
        if (shown < lines + 1) {
          report.note("the console showed " + shown + " of " + (lines + 1) + " lines");
        }
      }
    }
  }

  /**
   * Milliseconds, in the page, to fetch every path of {@code paths} (a JavaScript array) at once
   * with the signed-in token and read each body as JSON; a read that fails fails the scenario.
   */
  private static double fetched(JavascriptExecutor js, String paths) {
    Object r =
        js.executeAsyncScript(
            "const done = arguments[arguments.length - 1]; const t0 = performance.now();"
                + " const auth = {Authorization: 'Bearer ' + sessionStorage.getItem('oneshot.token')};"
                + " Promise.all("
                + paths
                + ".map(p => fetch(p, {headers: auth}).then(r => {"
                + " if (!r.ok) throw new Error(p + ': HTTP ' + r.status); return r.json(); })))"
                + " .then(() => done(performance.now() - t0), e => done('failed: ' + e.message));");
    if (!(r instanceof Number n)) {
      throw new IllegalStateException("the console's API reads: " + r);
    }
    return n.doubleValue();
  }

  /**
   * An async script body that answers, once {@code condition} holds (checked every animation
   * frame), the milliseconds since {@code start} (a {@code performance.now()} time; 0 is the
   * navigation's start).
   */
  private static String until(String condition, String start) {
    return "const done = arguments[arguments.length - 1]; const start = "
        + start
        + ";"
        + " const look = () => { if ("
        + condition
        + ") done(performance.now() - start); else requestAnimationFrame(look); }; look();";
  }
}
