"""Shared helpers for the integration tests (plain standard library).

A test is a function test_*(ctx) in tests/integration/test_*.py; tests/run.py
calls it in its own process with a Ctx: the build dir, a fresh temp dir, and
helpers to run programs under the shim and to read profiles with
`go tool pprof -raw`. A test fails by raising (AssertionError via check()).

Profiles are always read from a copy in an empty directory, with
PPROF_BINARY_PATH pointing at an empty directory and -symbolize=none, so every
function name we see comes from the file itself, never from a binary pprof
found on this machine.
"""

import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time

RUN_TIMEOUT = 60  # seconds for one program run; the shim must never hang one
PPROF_TIMEOUT = 60

SUMMARY_PREFIX = "# profshim: "
ERROR_PREFIX = "# profshim: error:"
PPROF_PATH_RE = re.compile(r"(\S+\.pprof)")

def _cli_module(name):
    """A module of the CLI's (cli/NAME.py), loaded by its path."""
    import importlib.util
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("profshim_cli_" + name, os.path.join(repo, "cli", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_kinds = _cli_module("kinds")
# The kinds every image writes at its stop, in the shim's order (cli/kinds.py,
# the one list; test_cli_run holds it to the shim's engines).
KINDS = list(_kinds.NAMES)


def is_libc(path):
    """glibc's libc: libc.so.6, or libc-2.NN.so before glibc 2.34 (Debian 11)."""
    base = os.path.basename(path)
    return base.startswith("libc.so") or re.match(r"libc-2\.\d+\.so$", base) is not None


def image_files(stem="run"):
    """The files of an image's stop, STEM.KIND.pprof for every kind, sorted
    as pprofs() and files_in() list them."""
    return _kinds.files(stem)


CPU_TYPES = ["samples/count", "cpu/nanoseconds"]
HEAP_TYPES = ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"]

MiB = 1 << 20


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    """Raised by a test that cannot run on this machine (say why): reported
    as SKIP, never counted as passed."""


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def fail(msg):
    raise TestFailure(msg)


def indent(text, n=4):
    pad = " " * n
    return "\n".join(pad + line for line in text.rstrip("\n").split("\n"))


def clip(data, limit=3000):
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if len(data) > limit:
        data = data[:limit] + "\n... (%d more characters)" % (len(data) - limit)
    return data


# --------------------------------------------------------------------------
# Running programs


class Result:
    def __init__(self, argv, env_desc, rc, out, err, wall, cpu, cwd, pid=None):
        self.argv, self.env_desc, self.rc, self.pid = argv, env_desc, rc, pid
        self.out, self.err, self.wall, self.cpu, self.cwd = out, err, wall, cpu, cwd

    @property
    def stderr_lines(self):
        return self.err.decode("utf-8", "replace").splitlines()

    @property
    def stdout_text(self):
        return self.out.decode("utf-8", "replace")

    def shim_lines(self):
        """Every stderr line that starts with '# profshim'."""
        return [l for l in self.stderr_lines if l.startswith("# profshim")]

    def summary_lines(self):
        return [l for l in self.stderr_lines
                if l.startswith(SUMMARY_PREFIX) and not l.startswith(ERROR_PREFIX)]

    def error_lines(self):
        return [l for l in self.stderr_lines if l.startswith(ERROR_PREFIX)]

    def named_files(self):
        """Paths ending in .pprof named in '# profshim: ' lines, made absolute
        against the run's cwd."""
        paths = []
        for line in self.summary_lines():
            for p in PPROF_PATH_RE.findall(line):
                p = p.strip("'\"`,;()[]")
                paths.append(os.path.normpath(os.path.join(self.cwd, p)))
        return paths

    def status_text(self):
        if self.rc < 0:
            try:
                return "killed by signal %d (%s)" % (-self.rc, signal.Signals(-self.rc).name)
            except ValueError:
                return "killed by signal %d" % -self.rc
        return "exit status %d" % self.rc

    def describe(self):
        return "command: %s\nenv: %s\n%s, %.2f s wall, %.2f s CPU\nstdout:\n%s\nstderr:\n%s" % (
            " ".join(self.argv), self.env_desc, self.status_text(), self.wall, self.cpu,
            indent(clip(self.out) or "(empty)"), indent(clip(self.err) or "(empty)"))


def base_env():
    """The harness's environment without anything that would change how a
    program under test behaves (preloads, our variables, allocator tuning)."""
    env = {}
    for k, v in os.environ.items():
        if k.startswith("PROFILE_") or k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "MALLOC_CONF",
                                              "MALLOC_CHECK_", "GLIBC_TUNABLES"):
            continue
        env[k] = v
    env["LC_ALL"] = "C"
    return env


def _no_core():
    # Programs that die of SIGSEGV/SIGABRT must not litter cores; the kernel
    # core-dump decision is unaffected by the shim either way.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def group_cpu_s(pgid):
    """The CPU time, in seconds, of the live processes of a process group
    (from /proc: what the kernel has charged them so far)."""
    ticks = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # pgrp, the 5th field
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


class HangGuard:
    """A hang guard that tells a hang from a loaded machine: at the bound,
    a process group that used CPU in the last stretch (0.2 s or more) is
    progressing, slowly, and gets another quarter of the bound, up to five
    times it in all; one that waits (a deadlock) fails at the bound. On
    machines at load 20 a program that needs 16 s of CPU takes over a
    minute, which is not a hang."""
    GRACE_FACTOR = 5

    def __init__(self, pgid, timeout):
        self.pgid, self.timeout = pgid, timeout
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        self.cpu = None

    def expired(self):
        now = time.monotonic()
        if now < self.deadline:
            return False
        cpu = group_cpu_s(self.pgid)
        progressing = self.cpu is not None and cpu - self.cpu >= 0.2 or self.cpu is None and cpu >= 0.2
        self.cpu = cpu
        if progressing and now < self.t0 + self.timeout * self.GRACE_FACTOR:
            self.deadline = now + max(self.timeout / 4.0, 5.0)
            return False
        return True

    def left(self):
        return max(0.05, self.deadline - time.monotonic())

    def waited(self):
        return time.monotonic() - self.t0


def communicate_bounded(p, timeout, stdin=None):
    """p.communicate() until HangGuard says the process hangs; then the
    process's whole group (started with start_new_session) is killed.
    Returns (out, err, timed_out)."""
    guard = HangGuard(p.pid, timeout)
    first = True
    while True:
        try:
            out, err = p.communicate(stdin if first else None, timeout=guard.left())
            return out, err, False
        except subprocess.TimeoutExpired:
            first = False
            if not guard.expired():
                continue
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
            return out, err, True


def run_program(argv, env, cwd, timeout=RUN_TIMEOUT, stdin=b"", ignore_signals=()):
    """Runs argv; returns a Result. A hang is a failure (the shim must never
    hang a process): the whole process group is killed and TestFailure raised.
    ignore_signals: signals the program starts with set to SIG_IGN."""
    def preexec():
        _no_core()
        for sig in ignore_signals:
            signal.signal(sig, signal.SIG_IGN)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
    out, err, hung = communicate_bounded(p, timeout, stdin)
    if hung:
        fail("program did not finish within %d s (the hang guard, longer while its CPU advances; hang?): %s\nenv: %s\nstdout:\n%s\nstderr:\n%s" % (
            timeout, " ".join(argv), describe_env(env), indent(clip(out) or "(empty)"),
            indent(clip(err) or "(empty)")))
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Result(list(argv), describe_env(env), p.returncode, out, err, wall, cpu, cwd, p.pid)


def describe_env(env):
    keys = sorted(k for k in env if k.startswith("PROFILE_") or k in ("LD_PRELOAD",))
    return " ".join("%s=%r" % (k, env[k]) for k in keys) or "(no LD_PRELOAD, no PROFILE_*)"


# --------------------------------------------------------------------------
# go tool pprof


def find_go():
    go = os.environ.get("PROFSHIM_GO")
    if go and os.access(go, os.X_OK):
        return go
    go = shutil.which("go")
    if go:
        return go
    for cand in ("/usr/lib/go/bin/go", "/usr/local/go/bin/go"):
        if os.access(cand, os.X_OK):
            return cand
    return None


def pprof_env(home):
    """Environment for go tool pprof: a private HOME (pprof looks for
    binaries under $HOME/pprof/binaries), a GOCACHE, no toolchain switching."""
    env = base_env()
    env["HOME"] = home
    env["GOCACHE"] = os.environ.get("GOCACHE") or os.path.join(home, "gocache")
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = ""
    env["PPROF_TMPDIR"] = home
    return env


class Frame:
    __slots__ = ("name", "file", "line", "system_name")

    def __init__(self, name, file, line, system_name):
        self.name, self.file, self.line, self.system_name = name, file, line, system_name

    def __repr__(self):
        return "%s %s:%d" % (self.name, self.file, self.line)


class Location:
    __slots__ = ("id", "address", "mapping", "frames")

    def __init__(self, id, address, mapping):
        self.id, self.address, self.mapping, self.frames = id, address, mapping, []


class Mapping:
    __slots__ = ("id", "start", "limit", "offset", "file", "build_id", "bits")

    def __init__(self, id, start, limit, offset, file, build_id, bits):
        self.id, self.start, self.limit, self.offset = id, start, limit, offset
        self.file, self.build_id, self.bits = file, build_id, bits


class Sample:
    __slots__ = ("values", "location_ids", "stack", "frame_mappings", "labels")

    def __init__(self, values, location_ids):
        self.values, self.location_ids, self.stack, self.labels = values, location_ids, [], []
        self.frame_mappings = []  # the mapping id of each frame in stack (None: none)


_LOC_RE = re.compile(r"^\s*(\d+): (0x[0-9a-fA-F]+) (?:M=(\d+) )?(?:\[F\] )?(.*)$")
# pprof from Go 1.23 on prints a column after the line (`file:line:column s=...`),
# older ones `file:line s=...`: both read as file and line.
_LINE_RE = re.compile(r"^(.*) (\S*?):(-?\d+)(?::-?\d+)? s=(-?\d+)(?:\((.*)\))?$")
_SAMPLE_RE = re.compile(r"^\s*(-?\d+(?:\s+-?\d+)*):((?:\s+\d+)*)\s*$")
_MAP_RE = re.compile(r"^\s*(\d+): (0x[0-9a-fA-F]+)/(0x[0-9a-fA-F]+)/(0x[0-9a-fA-F]+) (.*)$")


def parse_raw(text):
    """Parses `go tool pprof -raw` output (the text form of profile.Profile;
    see pprof's profile.go String()) into a Profile."""
    prof = Profile()
    prof.raw = text
    lines = text.split("\n")
    i = 0
    section = "header"
    cur_loc = None
    while i < len(lines):
        line = lines[i]
        i += 1
        if section == "header":
            if line.startswith("PeriodType: "):
                prof.period_type = line[len("PeriodType: "):].strip().replace(" ", "/", 1)
            elif line.startswith("Period: "):
                prof.period = int(line[len("Period: "):].strip())
            elif line.startswith("Duration: "):
                prof.duration = line[len("Duration: "):].strip()
            elif line.startswith("Comment: "):
                prof.comments.append(line[len("Comment: "):])
            elif line == "Samples:":
                header = lines[i]
                i += 1
                for tok in header.split():
                    if tok.endswith("[dflt]"):
                        tok = tok[:-len("[dflt]")]
                        prof.default_type = tok
                    prof.sample_types.append(tok)
                section = "samples"
        elif section == "samples":
            if line == "Locations":
                section = "locations"
                continue
            m = _SAMPLE_RE.match(line)
            if m:
                values = [int(v) for v in m.group(1).split()]
                ids = [int(v) for v in m.group(2).split()]
                prof.samples.append(Sample(values, ids))
            elif line.strip() and prof.samples:
                prof.samples[-1].labels.append(line.strip())
        elif section == "locations":
            if line == "Mappings":
                section = "mappings"
                continue
            if not line.strip():
                continue
            m = _LOC_RE.match(line)
            if m and not line.startswith(" " * 13):
                cur_loc = Location(int(m.group(1)), int(m.group(2), 16),
                                   int(m.group(3)) if m.group(3) else None)
                prof.locations[cur_loc.id] = cur_loc
                rest = m.group(4)
            else:
                rest = line.strip()
            if cur_loc is not None and rest.strip():
                cur_loc.frames.append(_parse_line(rest.rstrip()))
        elif section == "mappings":
            m = _MAP_RE.match(line)
            if not m:
                continue
            rest = m.group(5)
            parts = rest.rsplit(" ", 2)
            while len(parts) < 3:
                parts.append("")
            prof.mappings.append(Mapping(int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16),
                                         int(m.group(4), 16), parts[0], parts[1], parts[2]))
    for s in prof.samples:
        for lid in s.location_ids:
            loc = prof.locations.get(lid)
            if loc is None:
                continue
            s.stack.extend(loc.frames)
            s.frame_mappings.extend([loc.mapping] * len(loc.frames))
    return prof


def _parse_line(text):
    if text == "??":
        return Frame("??", "", 0, "")
    m = _LINE_RE.match(text)
    if not m:
        return Frame(text, "", 0, "")
    return Frame(m.group(1), m.group(2), int(m.group(3)), m.group(5) or m.group(1))


def func_matches(name, want):
    """'hot_a' matches 'hot_a' and 'hot_a(unsigned long)'; 'wl::f' matches
    'wl::f()' and 'wl::f(unsigned long)'."""
    return name == want or name.startswith(want + "(")


class Profile:
    def __init__(self):
        self.sample_types = []  # "type/unit"
        self.default_type = None
        self.period_type = None  # "type/unit"
        self.period = None
        self.duration = None
        self.comments = []
        self.samples = []
        self.locations = {}
        self.mappings = []
        self.raw = ""
        self.path = None
        self.top_text = None  # filled lazily by the reader

    def index(self, t):
        for i, st in enumerate(self.sample_types):
            if st == t or st.split("/")[0] == t:
                return i
        fail("sample type %r not in %s (profile %s)" % (t, self.sample_types, self.path))

    def total(self, t):
        i = self.index(t)
        return sum(s.values[i] for s in self.samples)

    def cum(self, func, t):
        """Sum of t over samples with a frame named func anywhere in the stack
        (each sample counted once)."""
        i = self.index(t)
        return sum(s.values[i] for s in self.samples if any(func_matches(f.name, func) for f in s.stack))

    def flat(self, func, t):
        i = self.index(t)
        return sum(s.values[i] for s in self.samples if s.stack and func_matches(s.stack[0].name, func))

    def mapping_ids(self, basename):
        """Ids of the mappings whose file's basename is basename."""
        return {m.id for m in self.mappings if os.path.basename(m.file) == basename}

    def function_names(self):
        names = set()
        for loc in self.locations.values():
            for f in loc.frames:
                names.add(f.name)
        return names

    def has_function(self, func):
        return any(func_matches(n, func) for n in self.function_names())

    def frames_of(self, func):
        return [f for loc in self.locations.values() for f in loc.frames if func_matches(f.name, func)]

    def cum_table(self, t, n=20):
        """A -top-like text of the n largest cumulative values, from the parsed
        samples (for failure messages)."""
        i = self.index(t)
        cum = {}
        for s in self.samples:
            for name in set(f.name for f in s.stack):
                cum[name] = cum.get(name, 0) + s.values[i]
        total = sum(s.values[i] for s in self.samples)
        rows = sorted(cum.items(), key=lambda kv: -kv[1])[:n]
        out = ["%s total %d in %d samples; largest cumulative:" % (t, total, len(self.samples))]
        for name, v in rows:
            out.append("  %14d %6.2f%%  %s" % (v, 100.0 * v / total if total else 0, name))
        return "\n".join(out)


class PprofReader:
    def __init__(self, go, scratch):
        self.go = go
        self.scratch = scratch
        self.count = 0

    def _dir(self):
        self.count += 1
        d = os.path.join(self.scratch, "pprof-%d" % self.count)
        os.makedirs(os.path.join(d, "work"))
        os.makedirs(os.path.join(d, "nobinaries"))
        os.makedirs(os.path.join(d, "home"))
        return d

    def run(self, path, args, symbolize_none=True):
        """Runs go tool pprof ARGS on a copy of path in an empty dir with no
        binaries reachable. Returns stdout text; fails on a nonzero status."""
        check(self.go, "go not found (need golang-go: `go` on PATH or /usr/lib/go/bin/go) to read %s" % path)
        check(os.path.isfile(path), "profile %s does not exist" % path)
        d = self._dir()
        copy = os.path.join(d, "work", os.path.basename(path))
        shutil.copyfile(path, copy)
        env = pprof_env(os.path.join(d, "home"))
        env["PPROF_BINARY_PATH"] = os.path.join(d, "nobinaries")
        argv = [self.go, "tool", "pprof"] + (["-symbolize=none"] if symbolize_none else []) + args + [copy]
        try:
            p = subprocess.run(argv, env=env, cwd=os.path.join(d, "work"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=PPROF_TIMEOUT)
        except subprocess.TimeoutExpired:
            fail("go tool pprof timed out on %s" % path)
        if p.returncode != 0:
            fail("go tool pprof %s failed on %s (%d bytes, starts %r):\n%s" % (
                " ".join(args), path, os.path.getsize(path), open(path, "rb").read(8),
                indent(clip(p.stderr))))
        return p.stdout.decode("utf-8", "replace")

    def read(self, path):
        text = self.run(path, ["-raw"])
        prof = parse_raw(text)
        prof.path = path
        check(prof.sample_types, "go tool pprof -raw %s printed no sample types:\n%s" % (path, indent(clip(text))))
        return prof

    def top(self, path, sample_index=None, nodecount=20, cum=False, symbolize_none=True):
        args = ["-top", "-nodecount=%d" % nodecount]
        if sample_index:
            args.append("-sample_index=%s" % sample_index)
        if cum:
            args.append("-cum")
        return self.run(path, args, symbolize_none=symbolize_none)


# --------------------------------------------------------------------------
# The per-test context


class Ctx:
    # What each program is started through, and its hang guard
    # (tests/arm64: the emulator, several times slower).
    launcher = ()
    run_timeout = RUN_TIMEOUT

    def __init__(self, build, tmp, go):
        self.build = os.path.abspath(build)
        self.tmp = tmp
        self.lib = os.path.join(self.build, "libprofshim.so")
        self.go = go
        self.pprof = PprofReader(go, self.mkdtemp("scratch"))

    # -- paths
    def mkdtemp(self, prefix="d"):
        return tempfile.mkdtemp(prefix=prefix + "-", dir=self.tmp)

    def workload(self, name):
        p = os.path.join(self.build, "workloads", name)
        check(os.access(p, os.X_OK), "workload %s not built (run `make test`, which builds "
                                     "tests/workloads/%s.c into it)" % (p, name))
        return p

    # -- running
    def env(self, preload=True, **vars):
        """An environment: base_env() plus LD_PRELOAD (when preload) plus the
        given PROFILE_* variables (None values are left out)."""
        env = base_env()
        if preload:
            check(os.path.isfile(self.lib), "%s not found: the shim is not built (`make`)" % self.lib)
            env["LD_PRELOAD"] = self.lib
        for k, v in vars.items():
            if v is not None:
                env[k] = str(v)
        return env

    def run(self, argv, env=None, cwd=None, timeout=None, preload=True, ignore_signals=(), **vars):
        """Runs argv (argv[0] may be a workload name) under the shim with the
        given PROFILE_* variables; cwd defaults to a fresh empty dir."""
        if isinstance(argv, str):
            argv = [argv]
        argv = list(argv)
        if os.sep not in argv[0]:
            argv[0] = self.workload(argv[0])
        if env is None:
            env = self.env(preload=preload, **vars)
        if cwd is None:
            cwd = self.mkdtemp("cwd")
        return run_program(list(self.launcher) + argv, env, cwd, timeout=timeout or self.run_timeout,
                           ignore_signals=ignore_signals)

    def run_plain(self, argv, cwd=None, timeout=RUN_TIMEOUT, ignore_signals=()):
        """The same program with no LD_PRELOAD and no PROFILE_*: the baseline."""
        return self.run(argv, cwd=cwd, timeout=timeout, preload=False, ignore_signals=ignore_signals)

    def profile(self, argv, name="run", expect_rc=0, dir=None, cwd=None, ignore_signals=(), **vars):
        """Runs argv with profiling on (PROFILE_DIR=dir or a fresh dir,
        PROFILE_NAME=name unless name is None), checks its status, and returns
        (result, dir)."""
        if dir is None:
            dir = self.mkdtemp("prof")
        r = self.run(argv, cwd=cwd, ignore_signals=ignore_signals, PROFILE_DIR=dir, PROFILE_NAME=name, **vars)
        if expect_rc is not None:
            check(r.rc == expect_rc, "expected exit status %d under the shim, got %s\n%s" % (
                expect_rc, r.status_text(), r.describe()))
        return r, dir

    def read(self, path, result=None):
        """Reads a profile; if it is missing, the failure shows the run."""
        if not os.path.isfile(path):
            listing = sorted(os.listdir(os.path.dirname(path))) if os.path.isdir(os.path.dirname(path)) else "(dir missing)"
            fail("profile %s was not written; dir has %s%s" % (
                path, listing, ("\n" + result.describe()) if result else ""))
        return self.pprof.read(path)

    def top(self, path, sample_index=None, nodecount=20):
        try:
            return self.pprof.top(path, sample_index=sample_index, nodecount=nodecount)
        except TestFailure as e:
            return "(go tool pprof -top failed: %s)" % e


# --------------------------------------------------------------------------
# Small helpers used by several tests


def truths(result):
    """Parses 'truth SITE key=value ...' lines a workload prints on stdout:
    {site: {key: int}}."""
    out = {}
    for line in result.stdout_text.splitlines():
        if line.startswith("truth "):
            parts = line.split()
            out[parts[1]] = {k: int(v) for k, v in (p.split("=", 1) for p in parts[2:])}
    check(out, "the workload printed no truth lines:\n%s" % result.describe())
    return out


# The symbol cache the images of a session share, a hidden directory in
# PROFILE_DIR (docs/DESIGN.md, "The symbol cache"): not a profile, and
# left out of what a test expects PROFILE_DIR to hold.
SYMBOL_CACHE = ".profshim-symbols"


# The summary lines `profshim run` appends (PROFILE_LOG, docs/CONFIG.md
# "Process trees"): the run's log, not a profile.
RUN_LOG = "profshim.log"


def profile_dir_names(d):
    """What PROFILE_DIR d holds besides the symbol cache and the run's log, sorted."""
    return sorted(n for n in os.listdir(d) if n not in (SYMBOL_CACHE, RUN_LOG)) if os.path.isdir(d) else []


def files_in(d):
    return profile_dir_names(d)


def walk_all(d, skip_symbol_cache=False):
    """Every path under d (relative), dirs included (the symbol cache's left
    out if asked)."""
    out = []
    for root, dirs, files in os.walk(d):
        if skip_symbol_cache and SYMBOL_CACHE in dirs:
            dirs.remove(SYMBOL_CACHE)
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), d))
    return sorted(out)


def within(value, truth, rel):
    return abs(value - truth) <= rel * truth


def pct(value, truth):
    return "%.1f%%" % (100.0 * value / truth) if truth else "n/a"


class CpuHog:
    """Busy loops beside a test, as a loaded machine has them: `per_core`
    plain processes (nice 0) for each core, ended on exit. For tests of what
    must hold however late the program's threads get the CPU."""

    def __init__(self, per_core=2):
        self.n = per_core * (os.cpu_count() or 1)
        self.procs = []

    def __enter__(self):
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        return False

