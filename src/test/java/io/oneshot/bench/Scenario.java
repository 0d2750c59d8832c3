package io.oneshot.bench;

/** One benchmark scenario: it runs its cases and adds their figures to the report. */
interface Scenario {
  String name();

  /** One line for {@code --list} and the report. */
  String describe();

  void run(boolean smoke, Report report) throws Exception;
}
