package io.oneshot.testing;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;

/**
 * A headless Chromium (Debian's {@code chromium} and {@code chromium-driver}) driven by Selenium,
 * started with a fresh profile and without the background networking that would reach for hosts
 * this machine cannot reach. Selenium is given both executables, so it never looks for (or
 * downloads) a driver of its own. Without them the tests that need a browser are skipped, unless
 * {@code ONESHOT_REQUIRE_CHROMIUM=1} (CI), where they fail.
 */
public final class Browser implements AutoCloseable {
  private static final List<String> BINARIES =
      List.of("/usr/bin/chromium", "/usr/bin/chromium-browser");
  private static final List<String> DRIVERS =
      List.of("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver");

  public final ChromeDriver driver;
  private final Path profile;
  private final Path shots;

  private Browser(ChromeDriver driver, Path profile, Path shots) {
    this.driver = driver;
    this.profile = profile;
    this.shots = shots;
  }

  /** Whether Chromium and its driver are installed here. */
  public static boolean available() {
    return first(BINARIES) != null && first(DRIVERS) != null;
  }

  /** Whether the browser must be here ({@code ONESHOT_REQUIRE_CHROMIUM=1}, CI): then none fails. */
  public static boolean required() {
    return Required.required("ONESHOT_REQUIRE_CHROMIUM");
  }

  /** Starts one; screenshots go to {@code target/screenshots/<shots>/}. */
  public static Browser start(String shots) {
    String binary = first(BINARIES);
    String driverPath = first(DRIVERS);
    Required.tool(
        binary != null && driverPath != null,
        "ONESHOT_REQUIRE_CHROMIUM",
        "chromium or chromedriver is missing (Debian: apt-get install -y chromium"
            + " chromium-driver)",
        "the browser tests are skipped");
    try {
      Path profile = TempDirs.make("oneshot-chromium-");
      ChromeOptions options = new ChromeOptions();
      options.setBinary(binary);
      options.addArguments(
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-background-networking",
          "--disable-component-update",
          "--no-first-run",
          "--disable-dev-shm-usage",
          "--window-size=1280,900",
          "--user-data-dir=" + profile);
      ChromeDriverService service =
          new ChromeDriverService.Builder()
              .usingDriverExecutable(new File(driverPath))
              .usingAnyFreePort()
              .build();
      ChromeDriver driver = new ChromeDriver(service, options);
      driver.manage().timeouts().scriptTimeout(Duration.ofSeconds(10));
      Path dir = Files.createDirectories(Path.of("target", "screenshots", shots).toAbsolutePath());
      return new Browser(driver, profile, dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String first(List<String> paths) {
    return paths.stream().filter(p -> Files.isExecutable(Path.of(p))).findFirst().orElse(null);
  }

  /** A PNG of the page as it is, as {@code <name>.png}. */
  public Path screenshot(String name) {
    Path to = shots.resolve(name + ".png");
    try {
      Files.write(to, driver.getScreenshotAs(OutputType.BYTES));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return to;
  }

  /** Sets the window's size, e.g. a phone's. */
  public void size(int width, int height) {
    driver.manage().window().setSize(new org.openqa.selenium.Dimension(width, height));
  }

  /** Makes the page see {@code prefers-color-scheme: dark}, or the light default again. */
  public void darkMode(boolean dark) {
    driver.executeCdpCommand(
        "Emulation.setEmulatedMedia",
        java.util.Map.of(
            "features",
            List.of(
                java.util.Map.of(
                    "name", "prefers-color-scheme", "value", dark ? "dark" : "light"))));
  }

  /** Whether the page is wider than the window, so that a reader must scroll sideways. */
  public boolean overflowsSideways() {
    return (Boolean)
        driver.executeScript(
            "return document.documentElement.scrollWidth > document.documentElement.clientWidth");
  }

  @Override
  public void close() {
    try {
      driver.quit();
    } finally {
      TempDirs.delete(profile);
    }
  }
}
