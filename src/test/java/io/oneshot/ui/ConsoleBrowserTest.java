package io.oneshot.ui;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Api;
import io.oneshot.testing.Browser;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.Keys;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.interactions.Actions;
import org.openqa.selenium.support.ui.ExpectedConditions;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The web console in a real headless Chromium against a dispatcher running real script builds: sign
 * in, the overview's queued and running build, the builds list, a build's log arriving live (HTML
 * in it shown as text), cancel with a confirmation, and a viewer's token refused the cancel.
 * Screenshots of each page land in {@code target/screenshots/console/}.
 */
@Heavy
class ConsoleBrowserTest {
  private TestServer t;
  private Browser browser;
  private WebDriver d;
  @TempDir Path tmp;

  @BeforeEach
  void setUp() {
    t =
        TestServer.with()
            .routes("routes: [{name: web, tags: {team: web}, maxConcurrent: 1}, {name: batch}]")
            .start();
  }

  @AfterEach
  void tearDown() {
    if (browser != null) {
      browser.close();
    }
    if (t != null) {
      t.close();
    }
  }

  /**
   * Waits up to 20 s. The pages redraw their live parts (the overview's cards, a live build's
   * header) every few seconds, so an element found just before a redraw is looked up again.
   */
  private WebDriverWait waitUp() {
    WebDriverWait w = new WebDriverWait(d, Duration.ofSeconds(20));
    w.ignoring(StaleElementReferenceException.class);
    return w;
  }

  /** Clicks what {@code by} finds, finding it again if the page redrew it meanwhile. */
  private void click(By by) {
    waitUp()
        .until(
            x -> {
              x.findElement(by).click();
              return true;
            });
  }

  private WebElement shown(By by) {
    return waitUp().until(ExpectedConditions.visibilityOfElementLocated(by));
  }

  private void signIn(String token) {
    d.get(t.api.base() + "/ui/");
    shown(By.id("token")).sendKeys(token);
    d.findElement(By.id("sign-in")).click();
    shown(By.id("me-name"));
  }

  private String badge() {
    return d.findElement(By.cssSelector("h1 .status")).getText();
  }

  @Test
  void aBuildIsFollowedLiveAndCanceledAndAViewerMayNotCancel() throws Exception {
    Path gate = tmp.resolve("gate");
    String html = "<b>bold</b><script>window.pwned=1</script><img src=x onerror=window.pwned=2>";
    long running =
        t.api.submitScript(
            "{\"team\": \"web\"}",
            "echo 'first line'; while [ ! -f '"
                + gate
                + "' ]; do sleep 0.05; done; printf '%s\\n' '"
                + html
                + "'; echo 'then more'; exec sleep 600");
    long queued = t.api.submitScript("{\"team\": \"web\"}", "echo next; exec sleep 600");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(running).equals("running"));
    assertThat(status(queued)).isEqualTo("pending");

    browser = Browser.start("console");
    d = browser.driver;
    d.get(t.api.base() + "/ui/");
    shown(By.id("token"));
    browser.screenshot("1-sign-in");
    // Signed out, the page shows neither the navigation nor "Sign out".
    assertThat(d.findElement(By.id("nav")).isDisplayed()).isFalse();
    assertThat(d.findElement(By.id("sign-out")).isDisplayed()).isFalse();
    signIn(TestServer.ADMIN_TOKEN);
    assertThat(d.findElement(By.id("nav")).isDisplayed()).isTrue();

    // The overview: the route's running build and its queued one.
    By card = By.cssSelector("[data-route='web']");
    waitUp()
        .until(
            x ->
                x.findElement(card)
                        .findElement(By.cssSelector("[data-k='running']"))
                        .getText()
                        .equals("1 / 1")
                    && x.findElement(card)
                        .findElement(By.cssSelector("[data-k='queued']"))
                        .getText()
                        .equals("1"));
    waitUp().until(x -> x.findElement(card).getText().contains("team=web"));
    // Why its oldest queued build waits, linked; what runs now, for how long; the chart's now.
    waitUp()
        .until(
            x ->
                x.findElement(By.cssSelector("[data-route='web'] [data-k='queue-why']"))
                    .getText()
                    .equals(
                        "#"
                            + queued
                            + " waits: route web is at its limit 1/1; this build is next"));
    assertThat(d.findElement(By.cssSelector("[data-route='web'] [data-k='oldest'] a")).getText())
        .isEqualTo("#" + queued);
    assertThat(d.findElement(By.cssSelector("[data-route='web'] [data-k='failed']")).getText())
        .isEqualTo("none ended");
    WebElement now = shown(By.cssSelector("#running tr[data-build='" + running + "']"));
    assertThat(now.findElement(By.cssSelector("code.what")).getText())
        .startsWith("echo 'first line'; while");
    assertThat(now.findElements(By.tagName("td")).get(4).getText()).matches("[\\d.]+ (s|min).*");
    waitUp()
        .until(
            x ->
                x.findElement(By.cssSelector("[data-route='web'] [data-k='chart-running']"))
                    .getText()
                    .equals("running 1 (peak 1)"));
    // A warm route's balloons, as the leader records them, and their cost over the last day.
    Sql.exec(
        "INSERT INTO oneshot.route_warmth VALUES ('web', 3, 'idle 3 -> 3', 2, 1, NULL, now())");
    Sql.exec(
        "INSERT INTO oneshot.balloon_usage VALUES ('web', date_trunc('hour', now()), 9000, 4)");
    By balloons = By.cssSelector("[data-route='web'] [data-k='balloons']");
    waitUp().until(x -> x.findElement(balloons).getText().equals("2 / 3, 1 pending"));
    assertThat(d.findElement(balloons).getAttribute("title")).isEqualTo("idle 3 -> 3");
    assertThat(
            d.findElement(By.cssSelector("[data-route='web'] [data-k='balloon-cost']")).getText())
        .isEqualTo("2.5 balloon-h, 4 builds took one");
    Sql.exec("UPDATE oneshot.route_warmth SET trouble = 'PriorityClass x does not exist'");
    waitUp()
        .until(
            x ->
                x.findElement(By.cssSelector("[data-route='web'] [data-k='warm-trouble']"))
                    .getText()
                    .equals("balloons not kept: PriorityClass x does not exist"));
    browser.screenshot("2-overview");

    // The builds list shows both, with their statuses, what each runs, and how long the running
    // one has run so far.
    d.get(t.api.base() + "/ui/#/builds?route=web");
    shown(By.cssSelector("tr[data-build='" + queued + "'] [data-status='pending']"));
    shown(By.cssSelector("tr[data-build='" + running + "'] [data-status='running']"));
    assertThat(d.findElement(By.cssSelector("tr[data-build='" + queued + "'] code.what")).getText())
        .isEqualTo("echo next; exec sleep 600");
    assertThat(
            d.findElement(By.cssSelector("tr[data-build='" + running + "'] [data-k='took']"))
                .getText())
        .endsWith(" so far");
    browser.screenshot("3-builds");

    // A queued build has no log yet, and says so: not "following the log live", no "Jump to first
    // error"; its enqueue is no attempt; its times are to the second, in the zone the header says.
    d.get(t.api.base() + "/ui/#/builds/" + queued);
    waitUp().until(x -> x.findElement(By.id("log-state")).getText().startsWith("no log yet"));
    assertThat(d.findElement(By.id("first-error")).isDisplayed()).isFalse();
    List<WebElement> enqueued = shown(By.cssSelector("#events tr")).findElements(By.tagName("td"));
    assertThat(enqueued.get(0).getText()).matches("\\d\\d:\\d\\d:\\d\\d");
    assertThat(enqueued.get(1).getText()).isEmpty();
    String zone = "(UTC|[+-]\\d\\d:\\d\\d)";
    String createdAt =
        d.findElement(By.xpath("//dt[.='created']/following-sibling::dd[1]")).getText();
    assertThat(createdAt).matches("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d " + zone);
    assertThat(d.findElement(By.id("times")).getText()).isEqualTo("Times: local");
    d.findElement(By.id("times")).click();
    waitUp().until(x -> x.findElement(By.id("times")).getText().equals("Times: UTC"));
    waitUp()
        .until(
            x ->
                x.findElement(By.xpath("//dt[.='created']/following-sibling::dd[1]"))
                    .getText()
                    .endsWith(" UTC"));
    d.findElement(By.id("times")).click();

    // A build: its log arrives while the page is open.
    d.get(t.api.base() + "/ui/#/builds/" + running);
    waitUp().until(x -> logTexts().contains("first line"));
    assertThat(logTexts()).doesNotContain("then more");
    Files.writeString(gate, "");
    waitUp().until(x -> logTexts().contains("then more"));
    // HTML in a line is text: the line reads as written, and nothing in it ran or rendered.
    assertThat(logTexts()).contains(html);
    assertThat(d.findElements(By.cssSelector("#log b, #log script, #log img"))).isEmpty();
    assertThat(d.findElement(By.id("log-state")).getText()).contains("live");
    Object pwned =
        ((org.openqa.selenium.JavascriptExecutor) d)
            .executeScript("return window.pwned === undefined");
    assertThat(pwned).isEqualTo(true);
    browser.screenshot("4-build-running");

    // Cancel asks first; the answer "keep it" leaves the build alone.
    click(By.id("cancel"));
    shown(By.id("confirm-no")).click();
    assertThat(status(running)).isEqualTo("running");
    click(By.id("cancel"));
    shown(By.id("confirm-ok"));
    browser.screenshot("5-cancel-confirm");
    d.findElement(By.id("confirm-ok")).click();
    waitUp().until(x -> badge().equals("canceled"));
    assertThat(status(running)).isEqualTo("canceled");
    browser.screenshot("6-build-canceled");

    // A viewer's token: the build shows, its cancel is refused, here and by the API.
    Api.Response created =
        t.api.post(
            "/api/v1/tokens", "{\"name\": \"watcher\", \"role\": \"viewer\", \"routes\": [\"*\"]}");
    assertThat(created.status()).as(created.text()).isEqualTo(201);
    String viewer = created.json().path("token").asText();
    d.findElement(By.id("sign-out")).click();
    signIn(viewer);
    assertThat(d.findElement(By.id("me-name")).getText()).contains("watcher").contains("viewer");
    // The queued build is claimed now that the route's slot is free; either way it is live.
    d.get(t.api.base() + "/ui/#/builds/" + queued);
    // The button and its reason, read at once: the header is redrawn while the build runs.
    Object seen =
        waitUp()
            .until(
                x ->
                    ((org.openqa.selenium.JavascriptExecutor) x)
                        .executeScript(
                            "const c = document.getElementById('cancel'),"
                                + " w = document.getElementById('cancel-why');"
                                + " return c ? [c.disabled, w ? w.textContent : ''] : null"));
    assertThat((List<?>) seen).element(0).isEqualTo(true);
    assertThat(String.valueOf(((List<?>) seen).get(1))).contains("viewer");
    browser.screenshot("7-viewer-may-not-cancel");
    assertThat(
            new Api(t.api.base(), viewer)
                .post("/api/v1/builds/" + queued + "/cancel", "{}")
                .status())
        .isEqualTo(403);
    assertThat(status(queued)).isNotEqualTo("canceled");
  }

  /**
   * Fair share on the overview: the teams' table, and an operator holding a route and a team with a
   * reason, which a queued build then gives as why it waits, and releasing them; a viewer is
   * offered neither.
   */
  @Test
  void anOperatorHoldsARouteAndATeamFromTheOverviewAndReleasesThem() {
    t.close();
    t =
        TestServer.with()
            .dispatch("maxConcurrent: 3")
            .routes(
                """
                teams: [{name: platform, weight: 2}]
                routes:
                  - {name: web, tags: {team: web}, team: platform}
                  - {name: api, tags: {team: api}, team: platform}
                  - {name: solo, tags: {team: solo}}
                """)
            .start();
    browser = Browser.start("console");
    d = browser.driver;
    signIn(TestServer.ADMIN_TOKEN);
    WebElement platform = shown(By.cssSelector("#teams tr[data-team=platform]"));
    assertThat(platform.findElement(By.cssSelector("[data-k=share]")).getText()).isEqualTo("2");

    click(By.cssSelector("[data-route=web] [data-k=hold]"));
    shown(By.id("hold-why")).sendKeys("state migration until 14:00");
    browser.screenshot("20-hold-a-route");
    d.findElement(By.id("hold-ok")).click();
    WebElement held = shown(By.cssSelector("[data-route=web] [data-k=held]"));
    assertThat(held.getText()).contains("held by admin").contains("state migration until 14:00");
    browser.screenshot("21-a-held-route");
    long waiting = t.api.submitScript("{\"team\": \"web\"}", "echo held");
    d.get(t.api.base() + "/ui/#/builds/" + waiting);
    waitUp()
        .until(
            x ->
                x.findElement(By.tagName("main"))
                    .getText()
                    .contains("route web is held by admin since"));
    assertThat(status(waiting)).isEqualTo("pending");

    d.get(t.api.base() + "/ui/#/");
    click(By.cssSelector("[data-route=web] [data-k=release]"));
    await().atMost(30, TimeUnit.SECONDS).until(() -> !status(waiting).equals("pending"));
    shown(By.cssSelector("[data-route=web] [data-k=hold]"));

    click(By.cssSelector("#teams tr[data-team=platform] [data-k=hold]"));
    shown(By.id("hold-why")).sendKeys("cluster upgrade");
    d.findElement(By.id("hold-ok")).click();
    assertThat(shown(By.cssSelector("#teams tr[data-team=platform] [data-k=held]")).getText())
        .contains("cluster upgrade");
    assertThat(shown(By.cssSelector("[data-route=api] [data-k=team-held]")).getText())
        .contains("its team platform is held by admin");
    assertThat(t.api.get("/api/v1/teams").json().get(0).path("held").path("by").asText())
        .isEqualTo("admin");
    browser.screenshot("22-a-held-team");
    click(By.cssSelector("#teams tr[data-team=platform] [data-k=release]"));
    shown(By.cssSelector("#teams tr[data-team=platform] [data-k=hold]"));
    assertThat(t.api.get("/api/v1/teams").json().get(0).path("held").isNull()).isTrue();

    // A viewer sees the holds but is offered no button.
    String viewer =
        t.api
            .post(
                "/api/v1/tokens", "{\"name\": \"eyes\", \"role\": \"viewer\", \"routes\": [\"*\"]}")
            .json()
            .path("token")
            .asText();
    d.findElement(By.id("sign-out")).click();
    signIn(viewer);
    shown(By.cssSelector("#teams tr[data-team=platform]"));
    assertThat(d.findElements(By.cssSelector("[data-k=hold], [data-k=release]"))).isEmpty();
  }

  @Test
  void everyAnswerCarriesAStrictContentSecurityPolicyAndTheTokenNeverShowsInAUrl()
      throws Exception {
    HttpClient http = HttpClient.newHttpClient();
    for (String path : List.of("/ui/", "/ui/app.js", "/api/v1/builds", "/readyz", "/ui/nothing")) {
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create(t.api.base() + path))
                  .header("Authorization", "Bearer " + TestServer.ADMIN_TOKEN)
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.headers().firstValue("Content-Security-Policy"))
          .as(path)
          .hasValueSatisfying(
              csp ->
                  assertThat(csp)
                      .contains("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'")
                      .doesNotContain("unsafe-inline", "unsafe-eval"));
      assertThat(r.headers().firstValue("X-Content-Type-Options")).as(path).hasValue("nosniff");
    }
    browser = Browser.start("console");
    d = browser.driver;
    signIn(TestServer.ADMIN_TOKEN);
    d.get(t.api.base() + "/ui/#/builds");
    shown(By.id("builds"));
    assertThat(d.getCurrentUrl()).doesNotContain(TestServer.ADMIN_TOKEN);
  }

  @Test
  void onAPhoneAQueuedBuildSaysWhyItWaitsAndByKeyboardAndInTheDarkWorkspacesShowTheirHistory()
      throws Exception {
    // Two applies on one workspace: two state versions.
    long v1 = t.api.submitTerraform("net", "resource \"terraform_data\" \"x\" { input = \"a\" }");
    await().atMost(90, TimeUnit.SECONDS).until(() -> status(v1).equals("succeeded"));
    long v2 = t.api.submitTerraform("net", "resource \"terraform_data\" \"x\" { input = \"b\" }");
    await().atMost(90, TimeUnit.SECONDS).until(() -> status(v2).equals("succeeded"));
    long running = t.api.submitScript("{\"team\": \"web\"}", "echo busy; exec sleep 600");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(running).equals("running"));
    long queued = t.api.submitScript("{\"team\": \"web\"}", "echo next");
    String why = t.api.get("/api/v1/builds/" + queued).json().path("reason").asText();
    assertThat(why).isEqualTo("route web is at its limit 1/1; this build is next");

    browser = Browser.start("console-phone");
    d = browser.driver;
    browser.size(390, 844);
    signIn(TestServer.ADMIN_TOKEN);
    shown(By.cssSelector("[data-route='web']"));
    assertThat(browser.overflowsSideways()).as("the overview is wider than a phone").isFalse();
    browser.screenshot("1-overview");

    // The list says why the queued build waits, under its status where a phone hides the reason.
    d.get(t.api.base() + "/ui/#/builds?route=web");
    WebElement whyShown = shown(By.cssSelector("tr[data-build='" + queued + "'] .why.show-narrow"));
    assertThat(whyShown.getText()).isEqualTo(why);
    assertThat(d.findElements(By.cssSelector("tr[data-build='" + running + "'] .why.show-narrow")))
        .isEmpty();
    assertThat(browser.overflowsSideways()).as("the list is wider than a phone").isFalse();
    browser.screenshot("2-builds-why-it-waits");

    d.get(t.api.base() + "/ui/#/builds/" + running);
    waitUp().until(x -> logTexts().contains("busy"));
    assertThat(browser.overflowsSideways()).as("a build is wider than a phone").isFalse();
    browser.screenshot("3-build");

    // On a laptop, by keyboard alone: the skip link, then from the list to a build.
    browser.size(1280, 900);
    d.get(t.api.base() + "/ui/#/builds?route=web");
    By queuedLink = By.cssSelector("tr[data-build='" + queued + "'] a");
    shown(queuedLink);
    // From a fresh load, the first Tab reaches the skip link.
    d.navigate().refresh();
    shown(queuedLink);
    new Actions(d).sendKeys(Keys.TAB).perform();
    assertThat(d.switchTo().activeElement().getText()).isEqualTo("Skip to content");
    d.switchTo().activeElement().sendKeys(Keys.ENTER);
    assertThat(d.switchTo().activeElement().getAttribute("id")).isEqualTo("view");
    assertThat(d.getCurrentUrl()).endsWith("#/builds?route=web");
    String target = d.findElement(queuedLink).getAttribute("href");
    for (int i = 0;
        i < 40 && !target.equals(d.switchTo().activeElement().getAttribute("href"));
        i++) {
      d.switchTo().activeElement().sendKeys(Keys.TAB);
    }
    assertThat(d.switchTo().activeElement().getAttribute("href")).isEqualTo(target);
    d.switchTo().activeElement().sendKeys(Keys.ENTER);
    waitUp().until(x -> x.findElement(By.tagName("h1")).getText().startsWith("Build #" + queued));

    // Workspaces, in the dark: a busy one first, with the build that holds it and the one waiting
    // behind; then the workspace with state (its route's, and named with it), its two versions,
    // each from its build, downloadable.
    long holder = t.api.submitScript("{}", "lock", "exec sleep 600");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(holder).equals("running"));
    long behind = t.api.submitScript("{}", "lock", "echo after");
    browser.darkMode(true);
    d.get(t.api.base() + "/ui/#/workspaces");
    WebElement busy = shown(By.cssSelector("#workspaces tbody tr[data-workspace='batch/lock']"));
    assertThat(d.findElements(By.cssSelector("#workspaces tbody tr")).get(0).getText())
        .startsWith("lock batch ");
    assertThat(busy.findElement(By.cssSelector("[data-k='held-by']")).getText())
        .startsWith("#" + holder + " running for ");
    assertThat(busy.findElement(By.cssSelector("[data-k='waiting']")).getText())
        .isEqualTo("1: #" + behind);
    assertThat(d.findElements(By.cssSelector("#workspaces tbody tr")).get(1).getText())
        .startsWith("net batch free 0 ");
    click(By.linkText("net"));
    waitUp().until(x -> x.findElements(By.cssSelector("#versions tbody tr")).size() == 2);
    assertThat(d.getCurrentUrl()).endsWith("#/workspaces/batch/net");
    assertThat(d.findElement(By.id("workspace-route")).getText()).isEqualTo("route batch");
    assertThat(
            d.findElements(By.cssSelector("#versions tbody tr a")).stream()
                .map(WebElement::getText)
                .toList())
        .containsExactlyInAnyOrder("#" + v1, "#" + v2);
    assertThat(d.findElements(By.cssSelector("#versions button"))).hasSize(2);
    Object bg =
        browser.driver.executeScript("return getComputedStyle(document.body).backgroundColor");
    assertThat(bg).isEqualTo("rgb(13, 17, 23)");
    browser.screenshot("4-workspace-dark");
    browser.darkMode(false);
    assertThat(
            browser.driver.executeScript("return getComputedStyle(document.body).backgroundColor"))
        .isEqualTo("rgb(255, 255, 255)");
    d.get(t.api.base() + "/ui/#/workspaces");
    shown(By.id("workspaces"));
    browser.screenshot("5-workspaces");

    // A viewer sees the history without the downloads.
    Api.Response created =
        t.api.post(
            "/api/v1/tokens", "{\"name\": \"looker\", \"role\": \"viewer\", \"routes\": [\"*\"]}");
    assertThat(created.status()).as(created.text()).isEqualTo(201);
    click(By.id("sign-out"));
    signIn(created.json().path("token").asText());
    // By its name alone, as a link from before workspaces were their route's: the one route that
    // has it.
    d.get(t.api.base() + "/ui/#/workspaces/net");
    waitUp().until(x -> x.findElements(By.cssSelector("#versions tbody tr")).size() == 2);
    assertThat(d.findElement(By.id("workspace-route")).getText()).isEqualTo("route batch");
    assertThat(d.findElements(By.cssSelector("#versions button"))).isEmpty();
  }

  /** The log's line texts, as shown, one per line. */
  private List<String> logTexts() {
    return d.findElements(By.cssSelector("#log .line .text")).stream()
        .map(WebElement::getText)
        .toList();
  }

  /**
   * A build that hit its memory limit says so on its page, with the rerun that asks for twice as
   * much in one click; the rerun is held to its route's rules like any submit (this route takes no
   * pod settings, and the page says why).
   */
  @Test
  void aBuildThatHitItsMemoryLimitOffersARerunWithMore() {
    long id = t.api.submitScript("{\"team\": \"web\"}", "echo done");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(id).equals("succeeded"));
    // What provisionerd reports when a process of the build was killed at a 256Mi limit.
    Sql.exec(
        "UPDATE oneshot.builds SET usage = '{\"oomKills\": 1, \"memoryLimitBytes\": 268435456,"
            + " \"cpuThrottledSeconds\": 4.2, \"cpuLimitCores\": 0.5}' WHERE id = ?",
        id);
    browser = Browser.start("console-limits");
    d = browser.driver;
    signIn(TestServer.ADMIN_TOKEN);
    d.get(t.api.base() + "/ui/#/builds/" + id);
    assertThat(shown(By.id("oom")).getText())
        .startsWith("This build hit its 256Mi memory limit: the kernel killed 1 process.");
    assertThat(shown(By.id("throttled")).getText())
        .isEqualTo("Throttled for 4.2 s by its CPU limit of 500m.");
    assertThat(d.findElement(By.id("rerun-more")).getText()).isEqualTo("Rerun with 512Mi");
    browser.screenshot("limits-hit");
    click(By.id("rerun-more"));
    assertThat(shown(By.cssSelector(".notice")).getText())
        .contains("input.pod: route web takes no pod settings from its builds");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).as("nothing written").isEqualTo(1);
    // Rerun with changes: the same refusal, said where it was asked, and nothing written.
    click(By.id("rerun-changed"));
    shown(By.id("rerun-memory")).sendKeys("1Gi");
    browser.screenshot("rerun-with-changes");
    d.findElement(By.id("rerun-ok")).click();
    waitUp().until(x -> x.findElements(By.cssSelector(".notice")).size() == 2);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).as("nothing written").isEqualTo(1);
    // Rerun as it was: a new build, its page opened, saying what it reruns.
    click(By.id("rerun"));
    waitUp().until(x -> !x.getCurrentUrl().endsWith("#/builds/" + id));
    long rerun = Long.parseLong(d.getCurrentUrl().replaceAll(".*#/builds/", ""));
    assertThat(Sql.value("SELECT rerun_of FROM oneshot.builds WHERE id = ?", rerun)).isEqualTo(id);
    waitUp().until(x -> x.findElement(By.tagName("h1")).getText().startsWith("Build #" + rerun));
    assertThat(shown(By.xpath("//p[starts-with(., 'a rerun of')]")).getText())
        .isEqualTo("a rerun of #" + id);
    assertThat(d.findElement(By.id("what")).getText()).isEqualTo("echo done");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(rerun).equals("succeeded"));

    // A failed build says why once: its reason, not the same words again as its error.
    long failed = t.api.submitScript("{\"team\": \"web\"}", "exit 3");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(failed).equals("failed"));
    d.get(t.api.base() + "/ui/#/builds/" + failed);
    waitUp().until(x -> badge().equals("failed"));
    assertThat(d.findElement(By.id("reason")).getText()).isEqualTo("script exited with code 3");
    assertThat(
            d.findElement(By.tagName("h1"))
                .findElements(By.xpath("following-sibling::p[@class='error']")))
        .isEmpty();

    // The overview counts them: one of the three that ended in the last hour failed.
    d.get(t.api.base() + "/ui/#/");
    waitUp()
        .until(
            x ->
                x.findElement(By.cssSelector("[data-route='web'] [data-k='failed']"))
                    .getText()
                    .equals("1 of 3 (33%)"));
    assertThat(d.findElement(By.cssSelector("[data-route='web'] [data-k='run']")).getText())
        .matches("[\\d.]+ (ms|s) / [\\d.]+ (ms|s)");
    assertThat(d.findElement(By.id("running-none")).getText()).isEqualTo("Nothing runs now.");
  }
}
