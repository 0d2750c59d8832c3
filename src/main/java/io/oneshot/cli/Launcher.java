package io.oneshot.cli;

import java.lang.reflect.InvocationTargetException;

/**
 * The jar's entry point. It is compiled for Java 11, the rest of oneshot for Java 21: started by an
 * older Java, it says what to install and exits 2, instead of failing with {@code
 * UnsupportedClassVersionError}; otherwise it hands over to {@link Main}.
 */
public final class Launcher {
  /** The Java oneshot needs. */
  static final int NEEDED = 21;

  private Launcher() {}

  public static void main(String[] args) throws Throwable {
    int feature = Runtime.version().feature();
    if (feature < NEEDED) {
      System.err.println(tooOld(feature, System.getProperty("java.home")));
      System.exit(2);
    }
    try {
      Class.forName("io.oneshot.cli.Main")
          .getMethod("main", String[].class)
          .invoke(null, (Object) args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  static String tooOld(int feature, String javaHome) {
    return "error: oneshot needs Java "
        + NEEDED
        + " or newer; this is Java "
        + feature
        + " ("
        + javaHome
        + ").\n"
        + "Install a JDK or JRE 21+ (e.g. Eclipse Temurin 21) and set JAVA_HOME, or use the"
        + " oneshot CLI that brings its own runtime (scripts/package-cli), or the container image:"
        + " docs/install.md.";
  }
}
