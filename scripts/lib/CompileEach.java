import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.StandardLocation;
import javax.tools.ToolProvider;

/**
 * scripts/mutate's compiler: compiles one source file at a time, each into a directory of its own,
 * against one class path, in one JVM. Run with the source launcher:
 *
 * <pre>java scripts/lib/CompileEach.java CLASSPATH</pre>
 *
 * <p>Reads "SOURCE\tOUTPUT_DIR" lines from stdin and answers each, in order, with one line:
 * "ok", or "error\tTHE FIRST ERROR". A javac started per break spent seconds of CPU loading
 * itself and the class path's jars before compiling a file; here the compiler, the jars' indexes
 * and the JIT's work are shared by every break.
 */
public final class CompileEach {
  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: java CompileEach.java CLASSPATH < 'SOURCE<TAB>OUTPUT_DIR' lines");
      System.exit(2);
    }
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    List<Path> classPath = new ArrayList<>();
    for (String entry : args[0].split(":")) {
      if (!entry.isEmpty()) {
        classPath.add(Path.of(entry));
      }
    }
    var in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    var out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
    try (StandardJavaFileManager files =
        javac.getStandardFileManager(null, Locale.ROOT, StandardCharsets.UTF_8)) {
      files.setLocationFromPaths(StandardLocation.CLASS_PATH, classPath);
      String line;
      while ((line = in.readLine()) != null) {
        String[] parts = line.split("\t");
        if (parts.length != 2) {
          out.println("error\tnot SOURCE<TAB>OUTPUT_DIR: " + line);
          continue;
        }
        files.setLocationFromPaths(StandardLocation.CLASS_OUTPUT, List.of(Path.of(parts[1])));
        var diagnostics = new DiagnosticCollector<JavaFileObject>();
        StringWriter noise = new StringWriter();
        boolean ok =
            javac
                .getTask(
                    noise,
                    files,
                    diagnostics,
                    List.of("--release", "21", "-nowarn", "-proc:none"),
                    null,
                    files.getJavaFileObjectsFromPaths(List.of(Path.of(parts[0]))))
                .call();
        if (ok) {
          out.println("ok");
        } else {
          String first =
              diagnostics.getDiagnostics().stream()
                  .filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
                  .map(d -> d.getLineNumber() + ": " + d.getMessage(Locale.ROOT))
                  .findFirst()
                  .orElse("javac failed: " + noise.toString().strip());
          out.println("error\t" + first.replace('\n', ' ').replace('\t', ' '));
        }
      }
    }
  }
}
