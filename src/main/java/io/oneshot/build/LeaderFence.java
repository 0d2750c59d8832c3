package io.oneshot.build;

import java.time.OffsetDateTime;

/**
 * The session through which a dispatcher holds the leadership lock ({@link AdvisoryLocks#LEADER}):
 * its backend's pid and start time, which together name one PostgreSQL session for good. A claim
 * carries it and commits only while that very session still holds the lock, so a replica that lost
 * leadership (its lock session ended, another replica took the lock) cannot claim, however late it
 * learns of it.
 */
public record LeaderFence(int pid, OffsetDateTime sessionStart) {}
