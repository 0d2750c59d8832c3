package io.oneshot.api;

import io.oneshot.build.BuildStore;
import io.oneshot.build.Runner;

/** A runner call refused because the attempt is bound to another runner: who holds it, who came. */
public record RunnerConflict(BuildStore.Holder holder, Runner intruder) {}
