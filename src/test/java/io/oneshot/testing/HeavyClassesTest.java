package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import io.oneshot.HeavyTests;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.launcher.EngineFilter;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

/**
 * The build leaves the heavy classes out of its own pick and runs them in {@link HeavyTests}: a
 * class on one list and not the other would run twice, or, worse, never.
 */
class HeavyClassesTest {

  /** The test classes JUnit finds under {@code io.oneshot}, with the given tag if not null. */
  private static Set<String> testClasses(String tag) {
    var request =
        LauncherDiscoveryRequestBuilder.request()
            .selectors(selectPackage("io.oneshot"))
            .filters(EngineFilter.includeEngines("junit-jupiter"));
    if (tag != null) {
      request.filters(TagFilter.includeTags(tag));
    }
    TestPlan plan = LauncherFactory.create().discover(request.build());
    Set<String> classes = new TreeSet<>();
    for (TestIdentifier root : plan.getRoots()) {
      for (TestIdentifier t : plan.getDescendants(root)) {
        t.getSource()
            .filter(ClassSource.class::isInstance)
            .map(s -> ((ClassSource) s).getClassName())
            .ifPresent(classes::add);
      }
    }
    return classes;
  }

  /**
   * The classes the build's test run leaves out (the surefire plugin's excludes in pom.xml) for the
   * heavy suite: those an execution of their own includes (the fuzz test) are not.
   */
  private static Set<String> excludedByTheBuild() throws Exception {
    String pom = Files.readString(Path.of("pom.xml"));
    String name = "<artifactId>maven-surefire-plugin</artifactId>";
    Pattern exclude = Pattern.compile("<exclude>([^<]+)\\.java</exclude>");
    Set<String> out = new TreeSet<>();
    int blocks = 0;
    for (int at = pom.indexOf(name); at >= 0; at = pom.indexOf(name, at + 1)) {
      blocks++;
      Matcher m = exclude.matcher(pom.substring(at, pom.indexOf("</plugin>", at)));
      while (m.find()) {
        out.add(m.group(1).replace('/', '.'));
      }
      Matcher own =
          Pattern.compile("<include>([^<]+)\\.java</include>")
              .matcher(pom.substring(at, pom.indexOf("</plugin>", at)));
      while (own.find()) {
        out.remove(own.group(1).replace('/', '.'));
      }
    }
    assertThat(blocks).as("the surefire plugin in pom.xml").isPositive();
    return out;
  }

  @Test
  void theBuildLeavesOutExactlyTheClassesTheHeavySuiteRuns() throws Exception {
    Set<String> heavy = testClasses(Heavy.TAG);
    assertThat(heavy)
        .as("classes marked @Heavy")
        .contains("io.oneshot.faults.FaultSuiteTest", "io.oneshot.e2e.EndToEndTest");
    assertThat(excludedByTheBuild()).isEqualTo(heavy);
  }

  @Test
  void theHeavySuiteSortsBeforeEveryOtherTestClass() {
    // The build's runOrder is alphabetical by class name.
    assertThat(testClasses(null))
        .hasSizeGreaterThan(50)
        .allSatisfy(c -> assertThat(HeavyTests.class.getName()).isLessThan(c));
  }
}
