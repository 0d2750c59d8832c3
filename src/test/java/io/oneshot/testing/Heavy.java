package io.oneshot.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A test class that starts processes by the dozen (dispatchers, provisionerd, daemons, a browser)
 * and times what they do: it runs while no other heavy class runs in another test JVM. The suite
 * runs in two JVMs side by side; two such classes at once on two cores starve each other's
 * processes past their leases, which tests the machine, not oneshot.
 *
 * <p>{@code scripts/test} runs them all, one after another, in {@link io.oneshot.HeavyTests} (the
 * build leaves them out of its own pick of classes): the first class in the run, so that one test
 * JVM runs heavy classes from start to end while the other runs the light ones.
 *
 * <p>The classes also take a file lock, named by {@code -Doneshot.test.heavyLock} (the build sets
 * it); without it (a single test run, {@code scripts/mutate}, whose breaks are meant to run side by
 * side) nothing is locked.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Tag(Heavy.TAG)
@ExtendWith(Heavy.OneAtATime.class)
public @interface Heavy {
  /** The tag {@link io.oneshot.HeavyTests} selects them by. */
  String TAG = "heavy";

  /** Holds the lock from before the class's first test to after its last. */
  final class OneAtATime implements BeforeAllCallback, AfterAllCallback {
    private static final ExtensionContext.Namespace NS =
        ExtensionContext.Namespace.create(OneAtATime.class);

    @Override
    public void beforeAll(ExtensionContext context) {
      String path = System.getProperty("oneshot.test.heavyLock");
      if (path == null || path.isBlank()) {
        return;
      }
      try {
        Path file = Path.of(path).toAbsolutePath();
        Files.createDirectories(file.getParent());
        FileChannel channel =
            FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        // Blocks until the other JVM's heavy class is done.
        FileLock lock = channel.lock();
        context.getStore(NS).put("lock", lock);
        context.getStore(NS).put("channel", channel);
      } catch (IOException e) {
        throw new UncheckedIOException("cannot lock " + path, e);
      }
    }

    @Override
    public void afterAll(ExtensionContext context) throws IOException {
      FileLock lock = context.getStore(NS).remove("lock", FileLock.class);
      FileChannel channel = context.getStore(NS).remove("channel", FileChannel.class);
      if (lock != null) {
        lock.release();
      }
      if (channel != null) {
        channel.close();
      }
    }
  }
}
