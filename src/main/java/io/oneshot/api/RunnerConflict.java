package io.oneshot.api;

import io.oneshot.build.Runner;
import io.oneshot.build.RunnerStore;

/** A runner call refused because the attempt is bound to another runner: who holds it, who came. */
public record RunnerConflict(RunnerStore.Holder holder, Runner intruder) {}
