"""The driver behind scripts/mutate: makes each break, compiles it, runs its tests, reports.

A break is a file, a text that must occur in it exactly once, and what replaces it. The guard
list (scripts/mutations) names each break and the tests written for it; --all adds one break per
clause of every WHERE in the build store's writing statements (UPDATE, DELETE, INSERT, FOR UPDATE,
advisory locks), each run against the store's test suite.
"""

import os
import re
import shutil
import subprocess
import tempfile
import concurrent.futures
import hashlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "scripts" / "mutations"
WORK = ROOT / "target" / "mutate"
CHART = "charts/oneshot"
# Where --all looks for statements, and the tests each of those breaks runs against.
STORE_SOURCES = ["src/main/resources/io/oneshot/build/sql"]
STORE_SUITE = [
    "io.oneshot.build",
    "io.oneshot.dispatch",
    "io.oneshot.api",
    "io.oneshot.server",
    "io.oneshot.e2e",
]
TIMEOUT_S = 20 * 60
# The flags of each break's test JVM (MUTATE_JAVA_OPTS to change them). That JVM lives seconds to a
# minute and mostly waits, while four breaks side by side keep two cores busy: the client compiler
# alone and the serial collector spend less of that CPU than C2's and G1's threads would, as for
# the JVMs the tests start (ChildJvm, DispatcherProcess, the local launcher's provisionerd).
JAVA_OPTS = os.environ.get("MUTATE_JAVA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").split()


@dataclass
class Break:
    name: str
    file: str
    old: str
    new: str
    tests: list
    why: str = ""
    start: int = -1  # offset of old in the file, when known (generated breaks)
    problems: list = field(default_factory=list)


def parse_list(path):
    """The guard list: blocks of 'key: value' lines, '#' lines before a block say why."""
    breaks, block, why = [], {}, []

    def flush():
        nonlocal block, why
        if block:
            missing = [k for k in ("name", "file", "from", "to", "tests") if k not in block]
            if missing:
                sys.exit(f"{path}: break {block.get('name', '?')}: missing {', '.join(missing)}")
            breaks.append(
                Break(
                    block["name"],
                    block["file"],
                    block["from"],
                    block["to"],
                    block["tests"].split(),
                    " ".join(why),
                )
            )
        block, why = {}, []

    for line in path.read_text().splitlines():
        if not line.strip():
            flush()
        elif line.startswith("#"):
            if block:
                flush()
            why.append(line.lstrip("# ").strip())
        else:
            key, _, value = line.partition(":")
            value = value.strip()
            if key == "to" and value == "(nothing)":
                value = ""
            block[key.strip()] = value
    flush()
    names = [b.name for b in breaks]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        sys.exit(f"{path}: names used twice: {', '.join(sorted(dupes))}")
    return breaks


# --- Clauses of the store's statements ---------------------------------------------------------

STOP_WORDS = re.compile(
    r"\b(RETURNING|ORDER\s+BY|GROUP\s+BY|LIMIT|FOR\s+UPDATE|UNION|ON\s+CONFLICT|SELECT)\b"
)


def where_clauses(sql, base):
    """(start, end) of each top-level conjunct of each WHERE in the text, as offsets + base."""
    out = []
    for m in re.finditer(r"\bWHERE\b", sql):
        i, depth, quote = m.end(), 0, False
        parts, part_start = [], m.end()
        while i < len(sql):
            c = sql[i]
            if quote:
                quote = c != "'"
            elif c == "'":
                quote = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth < 0:
                    break
            elif depth == 0:
                if sql.startswith("CASE", i) and not sql[i - 1].isalnum():
                    end = sql.find("END", i)
                    i = end + 3 if end > 0 else len(sql)
                    continue
                if STOP_WORDS.match(sql, i) and not sql[i - 1].isalnum():
                    break
                if sql.startswith("AND", i) and not sql[i - 1].isalnum() and not sql[i + 3].isalnum():
                    parts.append((part_start, i))
                    part_start = i + 3
                    i += 3
                    continue
            i += 1
        parts.append((part_start, i))
        clean = []
        for s, e in parts:
            text = sql[s:e]
            lead = len(text) - len(text.lstrip())
            s2, e2 = s + lead, s + len(text.rstrip())
            if e2 > s2:
                clean.append((s2 + base, e2 + base))
        out.append(clean)
    return out


def statement_breaks():
    breaks = []
    for d in STORE_SOURCES:
        for path in sorted((ROOT / d).rglob("*.sql")):
            text = path.read_text()
            rel = str(path.relative_to(ROOT))
            label = str(path.relative_to(ROOT / d).with_suffix(""))
            # The statement is the file but its leading comment, which says what it guards.
            body = re.sub(r"\A(?:--[^\n]*\n)*", "", text)
            offset = len(text) - len(body)
            if not re.search(r"\b(UPDATE|DELETE|INSERT)\b|pg_advisory", body):
                continue
            for conj in where_clauses(body, offset):
                for k, (s, e) in enumerate(conj):
                    clause = " ".join(text[s:e].split())
                    if len(conj) == 1:
                        start, end, new = s, e, "true"
                    elif k == 0:
                        start, end, new = s, conj[1][0], ""
                    else:
                        start, end, new = conj[k - 1][1], e, ""
                    line = text[:s].count("\n") + 1
                    breaks.append(
                        Break(
                            f"{label}:{line} drop [{clause}]",
                            rel,
                            text[start:end],
                            new,
                            list(STORE_SUITE),
                            "a clause of a writing statement",
                            start,
                        )
                    )
    return breaks


# --- Running ----------------------------------------------------------------------------------


def mutated_source(b):
    path = ROOT / b.file
    text = path.read_text()
    if b.start >= 0:
        if text[b.start : b.start + len(b.old)] != b.old:
            return None, "the file changed since the break was made"
        return text[: b.start] + b.new + text[b.start + len(b.old) :], None
    n = text.count(b.old)
    if n != 1:
        return None, f"its text occurs {n} times in {b.file} (must be once): update scripts/mutations"
    superseded = replaced_later(b.file, text, text.index(b.old))
    if superseded:
        return None, superseded
    return text.replace(b.old, b.new, 1), None


FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w.]+)\s*\(", re.I)


def replaced_later(file, text, at):
    """A break inside a migration's function whose body a later migration replaces breaks nothing
    that runs: the database ends with the later body. Names the later migration, else None."""
    path = Path(file)
    if not re.fullmatch(r"src/main/resources/db/\d+_[\w-]+\.sql", file):
        return None
    starts = [m for m in FUNCTION.finditer(text) if m.start() < at]
    if not starts:
        return None
    name = starts[-1].group(1)
    later = sorted(p for p in (ROOT / path.parent).glob("*.sql") if p.name > path.name)
    for p in later:
        if any(m.group(1) == name for m in FUNCTION.finditer(p.read_text())):
            return f"{name} is replaced by {p.name}: break it there (update scripts/mutations)"
    return None


def java():
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


TIMES = WORK / "times.json"
# What each break took in a CI run (a fresh clone on a 2-core machine), for a work tree that has
# not run it yet: on a fresh clone the longest still go first. Refresh it from a whole run with
# cp target/mutate/times.json scripts/lib/mutate-times.json
CI_TIMES = ROOT / "scripts" / "lib" / "mutate-times.json"
# Seconds a break usually takes, by its first test's package (a CI run on a 2-core machine): those
# that wait out a timeout are slow. The default is for every other package; for a break neither
# timed.
PACKAGE_SECONDS = {"faults": 70, "launch": 20, "e2e": 17, "api": 13, "build": 5}


# The breaks a whole run killed, each with the fingerprint of what it was run against (its block,
# the file it breaks, and the test classes it names), committed beside the times: a break whose
# fingerprint is unchanged was killed by these very files, and a run (CI's) leaves it out, as PIT's
# incremental analysis leaves out a mutant whose class and tests have not changed. A break, its
# file or one of its tests changed runs; so does every break with --every. Refresh it from a whole
# run with cp target/mutate/killed.json scripts/lib/mutate-killed.json
CI_KILLED = ROOT / "scripts" / "lib" / "mutate-killed.json"
KILLED = WORK / "killed.json"


def test_sources(b):
    """The source files of the test classes a break names (a class, or class#method)."""
    out = []
    for t in b.tests:
        cls = t.split("#")[0]
        f = ROOT / "src" / "test" / "java" / (cls.replace(".", "/") + ".java")
        if f.is_file():
            out.append(f)
        else:
            # A package: every test source under it.
            d = ROOT / "src" / "test" / "java" / cls.replace(".", "/")
            out.extend(sorted(d.rglob("*.java")) if d.is_dir() else [])
    return out


def fingerprint(b):
    h = hashlib.sha256()
    h.update("\0".join([b.name, b.file, b.old, b.new, *b.tests]).encode())
    for f in [ROOT / b.file, *test_sources(b)]:
        h.update(str(f.relative_to(ROOT)).encode())
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"(missing)")
    return h.hexdigest()


def killed_before():
    try:
        return json.loads(CI_KILLED.read_text())
    except (OSError, ValueError):
        return {}


def last_times():
    """What each break took in this work tree's last run, else in the CI run committed, by name."""
    times = {}
    for f in (CI_TIMES, TIMES):
        try:
            times.update(json.loads(f.read_text()))
        except (OSError, ValueError):
            pass
    return times


def expected_seconds(b, took_before):
    if b.name in took_before:
        return took_before[b.name]
    parts = b.tests[0].split("#")[0].split(".") if b.tests else []
    return PACKAGE_SECONDS.get(parts[2] if len(parts) > 2 else "", 10)


def prepare(b, index):
    """Makes the break's directory: its mutated source to compile, or its resource or chart in
    place. Returns (directory, the JVM's extra flags, the source to compile or None, a problem)."""
    src, problem = mutated_source(b)
    if problem:
        return None, [], None, problem
    d = WORK / f"{index:03d}"
    shutil.rmtree(d, ignore_errors=True)
    (d / "classes").mkdir(parents=True)
    props, source = [], None
    if b.file.endswith(".java"):
        source = d / "src" / Path(b.file).name
        source.parent.mkdir(parents=True)
        source.write_text(src)
    elif b.file.startswith(CHART + "/"):
        # The chart: a copy of it, broken, which the tests read instead (-Doneshot.chart.dir).
        shutil.copytree(ROOT / CHART, d / "chart")
        (d / "chart" / Path(b.file).relative_to(CHART)).write_text(src)
        props.append(f"-Doneshot.chart.dir={d / 'chart'}")
    else:
        # A resource (SQL): the same path under the class path's resources root.
        rel = Path(b.file).relative_to("src/main/resources")
        (d / "classes" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "classes" / rel).write_text(src)
    return d, props, source, None


class Compiler:
    """Compiles the mutated sources one after another in one JVM (scripts/lib/CompileEach.java),
    in the order the breaks will run, ahead of them: a javac per break spent seconds of CPU on
    starting before it compiled a file, while other breaks' tests ran on the same cores."""

    def __init__(self, cp, jobs):
        self.results = {}
        self.ready = {}
        self.cp = cp
        self.jobs = [(b, d, source) for b, d, source in jobs if source is not None]
        for b, _, _ in self.jobs:
            self.ready[b.name] = threading.Event()
        self.thread = threading.Thread(target=self._compile_all, daemon=True)
        self.thread.start()

    def _compile_all(self):
        java_bin = java()
        try:
            p = subprocess.Popen(
                [java_bin, "-XX:+UseSerialGC", str(ROOT / "scripts" / "lib" / "CompileEach.java"), self.cp],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
            )
            for b, d, source in self.jobs:
                p.stdin.write(f"{source}\t{d / 'classes'}\n")
                p.stdin.flush()
                answer = p.stdout.readline().rstrip("\n")
                if not answer:
                    raise RuntimeError(f"the compiler stopped (exit {p.poll()})")
                self.results[b.name] = None if answer == "ok" else answer.split("\t", 1)[-1]
                self.ready[b.name].set()
            p.stdin.close()
            p.wait()
        except Exception as e:  # whatever stopped it, no break may wait for it forever
            for b, _, _ in self.jobs:
                self.results.setdefault(b.name, f"not compiled: {e}")
                self.ready[b.name].set()

    def compiled(self, b):
        """None once the break's source compiled, else javac's first error."""
        self.ready[b.name].wait()
        return self.results[b.name]


def run(b, prepared, compiler):
    d, props, source, problem = prepared
    if problem:
        return "STALE", problem, 0.0
    java_bin = java()
    if source is not None:
        error = compiler.compiled(b)
        if error:
            return "NOCOMPILE", error, 0.0
    log = d / "tests.log"
    # The test JVM stops at the first failure without cleaning up: what it makes in its temporary
    # directory (run directories, JUnit's, Vert.x's file cache) goes in one of the break's own, on a
    # short path (a PostgreSQL socket's must stay under 108 bytes), removed after the run. An
    # embedded PostgreSQL's binaries stay where every run finds them, extracted once.
    tmp = Path(tempfile.mkdtemp(prefix="oneshot-break-"))
    embedded = Path(tempfile.gettempdir()) / "embedded-pg"
    started = time.monotonic()
    with open(log, "w") as out:
        try:
            p = subprocess.run(
                # The test JVM packs the class directories into jars for the JVMs it starts, in the
                # break's own directory: what those leave running names it (see reap).
                [java_bin, *JAVA_OPTS, "-Dio.netty.noUnsafe=true", "--enable-native-access=ALL-UNNAMED", *props,
                 f"-Doneshot.test.jvmDir={d / 'jvm'}", f"-Djava.io.tmpdir={tmp}", f"-Dot.epg.working-dir={embedded}",
                 "-cp", f"{d / 'classes'}:{compiler.cp}", "io.oneshot.testing.FirstFailure", *b.tests],
                stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT_S, cwd=ROOT,
            )
            code = p.returncode
        except subprocess.TimeoutExpired:
            code = 124
    took = time.monotonic() - started
    reap(d)
    reap(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    tail = [l for l in log.read_text(errors="replace").splitlines() if l.startswith(("FAILED ", "all ", "no test"))]
    detail = tail[-1] if tail else f"see {log.relative_to(ROOT)}"
    if code == 1:
        return "KILLED", detail, took
    if code == 0:
        return "SURVIVED", detail, took
    if code == 124:
        return "KILLED", f"the tests did not end within {TIMEOUT_S // 60} min ({log.relative_to(ROOT)})", took
    return "ERROR", f"exit {code}: {detail}", took


def reap(marker):
    """Kills what a mutant's test run left behind: the test JVM stops at the first failure without
    cleaning up, and the processes it started carry the break's directory in their class path."""
    marker = str(marker) + "/"
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                os.kill(int(proc.name), 9)
        except (OSError, ValueError):
            pass


def main(argv):
    listed = parse_list(LIST)
    everything = "--all" in argv
    every = "--every" in argv
    names = [a for a in argv if not a.startswith("--")]
    breaks = listed
    if everything or names:
        seen = set()
        for b in listed:
            src, _ = mutated_source(b)
            seen.add((b.file, src))
        for b in statement_breaks():
            src, _ = mutated_source(b)
            if (b.file, src) not in seen:
                breaks = breaks + [b]
        if names:
            breaks = [b for b in breaks if b.name in names]
            unknown = set(names) - {b.name for b in breaks}
            if unknown:
                sys.exit("no such break: " + ", ".join(sorted(unknown)) + " (scripts/mutate --list)")
        elif not everything:
            breaks = listed
    if "--check" in argv:
        # Without building anything: every break's text still occurs once where it says, so that
        # a guard gone stale stops CI before the tests rather than after the whole mutation run.
        stale = [(b, problem) for b in breaks for _, problem in [mutated_source(b)] if problem]
        for b, problem in stale:
            print(f"STALE {b.name}: {problem}")
        print(f"{len(breaks) - len(stale)} of {len(breaks)} breaks apply")
        return 2 if stale else 0
    if "--list" in argv:
        for b in breaks:
            print(f"{b.name}\n    {b.file}: [{' '.join(b.old.split())}] -> [{' '.join(b.new.split())}]\n    tests: {' '.join(b.tests)}")
        return 0
    # A whole run of the list leaves out what was killed with these very files (see CI_KILLED).
    record = killed_before()
    prints = {b.name: fingerprint(b) for b in breaks}
    skipped = []
    if not (every or names or everything):
        skipped = [b for b in breaks if record.get(b.name) == prints[b.name]]
        breaks = [b for b in breaks if record.get(b.name) != prints[b.name]]
        if skipped:
            print(
                f"{len(skipped)} breaks left out: killed before, with the same break, file and tests"
                f" (scripts/lib/mutate-killed.json; --every runs them too)", flush=True)
    cp_file = ROOT / "target" / "test-classpath.txt"
    cp = ":".join([str(ROOT / "target" / "test-classes"), str(ROOT / "target" / "classes"), cp_file.read_text().strip()])
    WORK.mkdir(parents=True, exist_ok=True)
    results = []
    total = time.monotonic()
    # Breaks run side by side (MUTATE_JOBS; default two more than the machine's cores, at most
    # 4): each works in a directory, a database and ports of its own, and most of a run is waiting
    # on PostgreSQL, a process or a timeout. A loaded machine can only make a break's tests fail
    # sooner, never let a break pass. On 2 cores, with the compiles in one JVM, four at once took
    # 463 s where three took 529, and every break failed the same test as with three.
    jobs = max(1, int(os.environ.get("MUTATE_JOBS", min(4, (os.cpu_count() or 1) + 2))))
    # The longest breaks go first, so that none is left to run alone at the end: as long as the
    # last run here took, else as long as breaks of its tests' package usually take.
    took_before = last_times()
    order = sorted(enumerate(breaks, 1), key=lambda ib: -expected_seconds(ib[1], took_before))
    prepared = {i: prepare(b, i) for i, b in order}
    compiler = Compiler(cp, [(b, prepared[i][0], prepared[i][2]) for i, b in order])
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run, b, prepared[i], compiler): (i, b) for i, b in order}
        for f in concurrent.futures.as_completed(futures):
            i, b = futures[f]
            verdict, detail, took = f.result()
            print(f"[{i}/{len(breaks)}] {b.name} ... {verdict} in {took:.0f} s: {detail}", flush=True)
            results.append((b, verdict, detail))
            took_before[b.name] = round(took)
    TIMES.write_text(json.dumps(took_before, indent=1, sort_keys=True) + "\n")
    # The record a whole run leaves: what it killed now, and what it left out as killed before,
    # each under its fingerprint; names no longer on the list are dropped.
    if not names and not everything:
        listed_names = {b.name for b in listed}
        now = {b.name: prints[b.name] for b, v, _ in results if v == "KILLED"}
        now.update({b.name: record[b.name] for b in skipped})
        KILLED.write_text(json.dumps({k: now[k] for k in sorted(now) if k in listed_names}, indent=1) + "\n")
    print()
    survived = [r for r in results if r[1] == "SURVIVED"]
    stale = [r for r in results if r[1] in ("STALE", "NOCOMPILE", "ERROR")]
    killed = sum(1 for r in results if r[1] == "KILLED")
    print(f"{killed} killed, {len(survived)} survived, {len(stale)} not run, in {time.monotonic() - total:.0f} s"
          + (f"; {len(skipped)} left out as killed before" if skipped else ""))
    for b, _, _ in survived:
        print(f"SURVIVED {b.name}: {b.why or b.file}")
    for b, v, d in stale:
        print(f"{v} {b.name}: {d}")
    if survived:
        return 1
    return 2 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
