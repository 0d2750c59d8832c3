package io.oneshot;

import io.oneshot.testing.Heavy;
import org.junit.platform.suite.api.IncludeEngines;
import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;

/**
 * Every {@link Heavy} class, one after another, in one test JVM: what {@code scripts/test} runs in
 * their place (the build leaves the classes themselves out: {@code HeavyClassesTest} checks that
 * its list is this suite's).
 *
 * <p>The build runs the classes in alphabetical order and this one sorts first (a class of the root
 * package, its name capitalised), so one of the two test JVMs starts on it at once and runs heavy
 * classes to the end while the other runs every light one. Picked one by one, a JVM that finished a
 * heavy class took light ones first as often as not and the next heavy class waited for them: in
 * one CI run the heavy classes, 797 s end to end, took 903 s.
 */
@Suite
@IncludeEngines("junit-jupiter")
@SelectPackages("io.oneshot")
@IncludeTags(Heavy.TAG)
public class HeavyTests {}
