"""Helpers shared by test_images, test_threads, test_stress, test_real_programs,
test_cpu_threads and test_transparency (not a test module: no test_*).

common.run_program gives Popen's returncode, which hides the core-dump flag
and the child's rusage. These run a program with os.wait4 on it, so a test
can check the raw wait status (WIFEXITED/WEXITSTATUS, WIFSIGNALED/WTERMSIG,
WCOREDUMP) and the CPU the process really used. stdout and stderr go to
files in the run's cwd's sibling dir, so a test can poll stdout ("ready")
while the program runs and then send it a signal.
"""

import gzip
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time

from common import (HangGuard, ERROR_PREFIX, SUMMARY_PREFIX, PPROF_PATH_RE, check, clip, describe_env, fail,
                    image_files, indent)

RUN_TIMEOUT = 60


class Status:
    """A raw wait status, decoded."""

    def __init__(self, raw):
        self.raw = raw
        self.exited = os.WIFEXITED(raw)
        self.signaled = os.WIFSIGNALED(raw)
        self.code = os.WEXITSTATUS(raw) if self.exited else None
        self.sig = os.WTERMSIG(raw) if self.signaled else None
        self.core = bool(os.WCOREDUMP(raw)) if self.signaled else False

    def key(self):
        """Comparable: ('exit', code) or ('signal', sig, core)."""
        return ("exit", self.code) if self.exited else ("signal", self.sig, self.core)

    def __str__(self):
        if self.exited:
            return "exit status %d" % self.code
        try:
            name = signal.Signals(self.sig).name
        except ValueError:
            name = "signal %d" % self.sig
        return "killed by %s%s" % (name, " (core dumped)" if self.core else "")

    def is_exit(self, code):
        return self.exited and self.code == code

    def is_signal(self, sig, core=None):
        return self.signaled and self.sig == sig and (core is None or self.core == core)


class Run:
    """One started program. stdout/stderr are files; wait() reaps it with
    os.wait4 and fills status, rusage, out, err."""

    def __init__(self, argv, env, cwd, core=False, ignore=(), rlimits=(), stdin_path=None,
                 stdout_path=None):
        self.argv, self.env, self.cwd = list(argv), env, cwd
        io = tempfile.mkdtemp(prefix="io-", dir=os.path.dirname(cwd.rstrip("/")))
        self.out_path = stdout_path or os.path.join(io, "stdout")
        self.err_path = os.path.join(io, "stderr")
        self.status = None
        self.rusage = None
        self.out = b""
        self.err = b""
        self.wall = 0.0

        def preexec():
            os.setsid()
            # Cores only where asked (RLIMIT_CORE unlimited; they land in
            # cwd per /proc/sys/kernel/core_pattern), none otherwise.
            lim = resource.RLIM_INFINITY if core else 0
            resource.setrlimit(resource.RLIMIT_CORE, (lim, lim))
            for which, soft in rlimits:
                resource.setrlimit(which, (soft, resource.getrlimit(which)[1]))
            for sig in ignore:
                signal.signal(sig, signal.SIG_IGN)

        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.t0 = time.monotonic()
            self.p = subprocess.Popen(self.argv, env=env, cwd=cwd, stdin=stdin, stdout=out, stderr=err,
                                      preexec_fn=preexec, close_fds=True)
        if stdin_path:
            stdin.close()
        self.pid = self.p.pid

    def stdout_now(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_for(self, pattern, timeout=20):
        """Polls stdout until the regex matches; returns the match."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.stdout_now(), re.M)
            if m:
                return m
            if self.poll():
                fail("%s ended (%s) before printing %r\n%s" % (self.argv[0], self.status, pattern,
                                                                self.describe()))
            if time.monotonic() > deadline:
                self.kill_group()
                self.wait(timeout=5)
                fail("%s did not print %r within %d s\n%s" % (self.argv[0], pattern, timeout, self.describe()))
            time.sleep(0.005)

    def kill(self, sig):
        os.kill(self.pid, sig)

    def kill_group(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self, flags):
        pid, raw, ru = os.wait4(self.pid, flags)
        if pid == 0:
            return False
        self.wall = time.monotonic() - self.t0
        self.status, self.rusage = Status(raw), ru
        self.p.returncode = -self.status.sig if self.status.signaled else self.status.code
        with open(self.out_path, "rb") as f:
            self.out = f.read()
        with open(self.err_path, "rb") as f:
            self.err = f.read()
        return True

    def poll(self):
        if self.status is not None:
            return True
        return self._reap(os.WNOHANG)

    def wait(self, timeout=RUN_TIMEOUT):
        """Reaps the program; a program still running after timeout is a
        hang: its process group is killed and the test fails."""
        guard = HangGuard(self.pid, timeout)
        delay = 0.001
        while not self.poll():
            if guard.expired():
                self.kill_group()
                self._reap(0)
                fail("program did not finish within %d s (the hang guard, longer while its CPU advances; hang?)\n%s" % (
                    guard.waited(), self.describe()))
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        return self

    # -- what it said
    @property
    def cpu(self):
        return (self.rusage.ru_utime + self.rusage.ru_stime) if self.rusage else 0.0

    @property
    def stdout_text(self):
        return self.out.decode("utf-8", "replace")

    @property
    def stderr_lines(self):
        return self.err.decode("utf-8", "replace").splitlines()

    def summary_lines(self):
        return [l for l in self.stderr_lines if l.startswith(SUMMARY_PREFIX) and not l.startswith(ERROR_PREFIX)]

    def wrote_lines(self):
        return [l for l in self.stderr_lines if l.startswith(SUMMARY_PREFIX + "wrote")]

    def error_lines(self):
        return [l for l in self.stderr_lines if l.startswith(ERROR_PREFIX)]

    def describe(self):
        return "command: %s\ncwd: %s\nenv: %s\n%s, %.2f s wall, %.2f s CPU\nstdout:\n%s\nstderr:\n%s" % (
            " ".join(self.argv), self.cwd, describe_env(self.env) if self.env else "(inherited)",
            self.status if self.status else "(running)", self.wall, self.cpu,
            indent(clip(self.out) or "(empty)"), indent(clip(self.err) or "(empty)"))


def start(ctx, argv, env=None, cwd=None, **kw):
    argv = list(argv)
    if os.sep not in argv[0]:
        argv[0] = ctx.workload(argv[0])
    if cwd is None:
        cwd = ctx.mkdtemp("cwd")
    return Run(argv, env if env is not None else ctx.env(preload=False), cwd, **kw)


def run(ctx, argv, env=None, cwd=None, timeout=RUN_TIMEOUT, **kw):
    return start(ctx, argv, env=env, cwd=cwd, **kw).wait(timeout)


def prof_env(ctx, d, name="run", extra_path=None, **vars):
    env = ctx.env(PROFILE_DIR=d, PROFILE_NAME=name, **vars)
    if extra_path:
        env["PATH"] = extra_path + ":" + env.get("PATH", "/usr/bin:/bin")
    return env


# --------------------------------------------------------------------------
# Files and summary lines


def pprofs(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".pprof")) if os.path.isdir(d) else []


def written(line):
    """The files a summary line says were written: the paths after its
    "wrote" (an error's text may mention a name it did not write)."""
    out = []
    toks = line.split()
    for i, t in enumerate(toks):
        if t == "wrote" and (i == 0 or toks[i - 1] in ("profshim:", "|") or toks[i - 1].endswith(";")):
            for p in toks[i + 1:]:
                if not p.endswith(".pprof"):
                    break
                out.append(os.path.normpath(p))
    return out


def reap_bounded(p, seconds, what):
    """Reaps the Popen p (started in a session of its own) with os.wait4
    and returns its raw status; past `seconds`, kills its group and fails
    with `what`. p.returncode is set, so Popen does not reap it again."""
    deadline = time.monotonic() + seconds
    while True:
        pid, raw, _ = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = 0  # reaped here
            return raw
        if time.monotonic() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            os.wait4(p.pid, 0)
            fail(what)
        time.sleep(0.01)


def named_in(line):
    return [p.strip("'\"`,;()[]") for p in PPROF_PATH_RE.findall(line)]


def check_summaries_name_files(r, d, images):
    """Exactly `images` summary lines; each names one cpu and one heap file
    of one stem; the stems differ; and together they name every .pprof in d
    (and nothing else)."""
    lines = r.summary_lines()
    check(len(lines) == images, "want %d summary lines (one per image), got %d\n%s" % (
        images, len(lines), r.describe()))
    stems = []
    all_named = []
    for line in lines:
        named = named_in(line)
        all_named += named
        bases = sorted(os.path.basename(p) for p in named)
        stem = bases[0].rsplit(".", 2)[0] if bases else ""
        check(bases == image_files(stem),
              "a summary line should name its image's files, one of each kind (one stem): %r" % line)
        stems.append(stem)
    check(len(set(stems)) == len(stems), "two images named the same files (one overwrote the other): "
          "stems %s\n%s" % (stems, r.describe()))
    want = sorted(os.path.join(d, n) for n in pprofs(d))
    check(sorted(os.path.normpath(p) for p in all_named) == want,
          "the summary lines name %s; PROFILE_DIR holds %s" % (sorted(all_named), want))
    return stems


def gzip_ok(path):
    """The file is a complete gzip stream of a non-empty profile.proto."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:2] == b"\x1f\x8b", "%s: not gzip (starts %r, %d bytes)" % (path, data[:8], len(data)))
    try:
        raw = gzip.decompress(data)
    except Exception as e:  # noqa: BLE001 (any decode error is the failure)
        fail("%s: gzip stream is broken (%s), %d bytes" % (path, e, len(data)))
    check(len(raw) > 0 and raw[0] == 0x0a, "%s: decompressed data does not start with field 1 (sample_type) "
          "of profile.proto: %r" % (path, raw[:8]))
    return raw


# --------------------------------------------------------------------------
# Labels


_LABEL_RE = re.compile(r"(\w+):\[([^\]]*)\]")


def labels(sample):
    """{key: value} of a parsed sample's labels (numbers stay strings)."""
    out = {}
    for line in sample.labels:
        for k, v in _LABEL_RE.findall(line):
            out[k] = v.split()[0] if v else v
    return out


def by_thread(prof, t, key="thread_id"):
    """Sum of sample type t per value of label key."""
    i = prof.index(t)
    out = {}
    for s in prof.samples:
        k = labels(s).get(key)
        out[k] = out.get(k, 0) + s.values[i]
    return out


def truths(text, kind):
    """'truth KIND k=v ...' lines → list of dicts (values kept as str)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "truth" and parts[1] == kind:
            out.append(dict(p.split("=", 1) for p in parts[2:] if "=" in p))
    return out


def compile_c(ctx, out, sources, args=(), shared=False):
    """Compiles C sources with gcc into out (in the test's temp dir)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    check(gcc, "gcc not found: this test builds a shared library at run time")
    argv = [gcc, "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-pthread"]
    if shared:
        argv += ["-shared", "-fPIC"]
    argv += ["-o", out] + list(sources) + list(args)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(p.returncode == 0, "compiling %s failed:\n%s\n%s" % (out, " ".join(argv), indent(clip(p.stdout))))
    return out


def workload_source(name):
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(here), "workloads", name)
