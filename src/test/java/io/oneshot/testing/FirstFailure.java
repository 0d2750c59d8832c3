package io.oneshot.testing;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

/**
 * Runs tests until the first one fails, for {@code scripts/mutate}: a mutant is killed by the first
 * failure, so the rest need not run. Arguments select tests: a package ({@code io.oneshot.build}),
 * a class ({@code io.oneshot.build.ClaimTest}) or a method ({@code ClaimTest#name}, fully
 * qualified). Exits 0 when every selected test passed, 1 at the first failure (naming it), 2 when
 * the selection found no test.
 */
public final class FirstFailure {
  private FirstFailure() {}

  /**
   * {@code Class#method}: the method of that name, whatever its parameters (a parameterized test
   * has some); {@code Class#method(types)} as JUnit writes it.
   */
  private static DiscoverySelector method(String a) {
    if (a.contains("(")) {
      return selectMethod(a);
    }
    String cls = a.substring(0, a.indexOf('#'));
    String name = a.substring(a.indexOf('#') + 1);
    try {
      Class<?> c = Class.forName(cls);
      for (java.lang.reflect.Method m : c.getDeclaredMethods()) {
        // A test, not a method of the same name that feeds one its arguments.
        if (m.getName().equals(name) && m.getAnnotations().length > 0) {
          return selectMethod(c, m);
        }
      }
    } catch (ClassNotFoundException e) {
      // falls through to JUnit, which reports it
    }
    return selectMethod(a);
  }

  public static void main(String[] args) {
    PrintStream out = System.out;
    List<DiscoverySelector> selectors = new ArrayList<>();
    for (String a : args) {
      if (a.contains("#")) {
        selectors.add(method(a));
      } else if (Character.isUpperCase(a.charAt(a.lastIndexOf('.') + 1))) {
        selectors.add(selectClass(a));
      } else {
        selectors.add(selectPackage(a));
      }
    }
    Launcher launcher = LauncherFactory.create();
    TestPlan plan;
    try {
      plan =
          launcher.discover(LauncherDiscoveryRequestBuilder.request().selectors(selectors).build());
    } catch (RuntimeException e) {
      out.println("no test matches " + String.join(" ", args) + ": " + e);
      System.exit(2);
      return;
    }
    // A parameterized test is a container until it runs: it counts by its method.
    long tests =
        plan.countTestIdentifiers(
            id ->
                id.isTest()
                    || id.getSource()
                        .filter(
                            x ->
                                x
                                    instanceof
                                    org.junit.platform.engine.support.descriptor.MethodSource)
                        .isPresent());
    if (tests == 0) {
      out.println("no test matches " + String.join(" ", args));
      System.exit(2);
    }
    int[] passed = {0};
    launcher.execute(
        plan,
        new TestExecutionListener() {
          @Override
          public void executionFinished(TestIdentifier id, TestExecutionResult result) {
            if (result.getStatus() == TestExecutionResult.Status.SUCCESSFUL) {
              if (id.isTest()) {
                passed[0]++;
              }
              return;
            }
            if (result.getStatus() == TestExecutionResult.Status.ABORTED) {
              out.println("skipped " + id.getDisplayName() + " (an assumption did not hold)");
              return;
            }
            out.println(
                "FAILED "
                    + id.getUniqueId()
                    + ": "
                    + result.getThrowable().map(Throwable::toString).orElse("aborted"));
            out.flush();
            // Tests leave servers and processes behind when stopped midway: halt, don't unwind.
            halt(1);
          }
        });
    out.println("all " + passed[0] + " tests passed");
    out.flush();
    halt(0);
  }

  /**
   * Halts, after dropping the databases this run created (a halt skips the hooks that would): each
   * break of the mutation list left one on the server otherwise. A drop that does not end within
   * seconds (the server gone) is left behind.
   */
  private static void halt(int code) {
    Thread drop =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  TestDatabase.dropCreated();
                  ChildJvm.delete();
                });
    try {
      drop.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    Runtime.getRuntime().halt(code);
  }
}
