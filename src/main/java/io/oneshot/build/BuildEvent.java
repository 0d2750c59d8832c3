package io.oneshot.build;

import java.time.Instant;

/**
 * One row of a build's timeline. {@code from} is null for the enqueue; {@code from == to} marks a
 * milestone inside a state (the attempt was launched, a pod was scheduled).
 */
public record BuildEvent(Instant at, int attempt, BuildState from, BuildState to, String reason) {}
