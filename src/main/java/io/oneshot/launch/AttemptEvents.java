package io.oneshot.launch;

/**
 * What a launcher tells the dispatcher about attempts between its calls: that one may have changed
 * (the rescuer looks at once instead of at its next tick), and notes worth a line in the build's
 * log (a pod that cannot be scheduled, an image that cannot be pulled), some of which also mark a
 * step in its timeline (pod scheduled, container started).
 */
public interface AttemptEvents {

  /** The attempt may have ended or gone: look at it again (not for every step of a live one). */
  void changed(AttemptRef ref);

  /** A line for the build's log; with {@code milestone}, also a step in its timeline. */
  void note(AttemptRef ref, Note note);

  /** The pod (or process) that runs the attempt, once known. */
  default void runsIn(AttemptRef ref, String where) {}

  /** A call the launcher made to its platform's API, and the status it got (0: no answer). */
  default void apiCall(String verb, int code) {}

  /**
   * A note: {@code level} is info, warn or error. {@code trouble}, when set, names the kind of
   * infrastructure trouble the note reports, once per attempt and kind (oom_killed, evicted,
   * image_pull, unschedulable, deadline_exceeded, disrupted, cannot_start): what operators count.
   */
  record Note(String level, String text, boolean milestone, String trouble, boolean waitReason) {
    public Note(String level, String text, boolean milestone) {
      this(level, text, milestone, null, false);
    }

    public static Note info(String text) {
      return new Note("info", text, false);
    }

    public static Note warn(String text) {
      return new Note("warn", text, false);
    }

    public static Note error(String text) {
      return new Note("error", text, false);
    }

    public static Note milestone(String text) {
      return new Note("info", text, true);
    }

    /** This note, counted as infrastructure trouble of {@code kind}. */
    public Note trouble(String kind) {
      return new Note(level, text, milestone, kind, waitReason);
    }

    /**
     * This note, also the build's reason while it is launching: what {@code builds show}, the
     * console and the API say it waits for (a pod no node can take, an image that cannot be pulled,
     * a pod scheduled and starting).
     */
    public Note asWaitReason() {
      return new Note(level, text, milestone, trouble, true);
    }
  }

  AttemptEvents NONE =
      new AttemptEvents() {
        @Override
        public void changed(AttemptRef ref) {}

        @Override
        public void note(AttemptRef ref, Note note) {}
      };
}
