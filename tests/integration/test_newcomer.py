"""A newcomer's path: relative paths that stay put through a child
that changes directory, one line for what would otherwise be silent (an exec
into a statically linked program, a misspelt variable)."""

import calendar
import os
import re
import subprocess
import time

from common import KINDS, check, files_in
from st_helpers import compile_c, run


def _sh(ctx):
    return "/bin/sh"


def test_relative_dir_and_preload_through_a_child_that_cds(ctx):
    """PROFILE_DIR=out and LD_PRELOAD=<relative path to the shim>, then
    `sh -c 'cd sub && exec prog'`: every image is profiled (no ld.so
    "cannot be preloaded") and every file lands in the one directory out/
    (not sub/out/)."""
    cwd = ctx.mkdtemp("cwd")
    os.makedirs(os.path.join(cwd, "sub"))
    env = ctx.env(preload=False, PROFILE_DIR="out")
    env["LD_PRELOAD"] = os.path.relpath(ctx.lib, cwd)
    hello = ctx.workload("hello")
    r = run(ctx, [_sh(ctx), "-c", "cd sub && %s && true" % hello], env=env, cwd=cwd)
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    check("cannot be preloaded" not in "\n".join(r.stderr_lines), "a child lost the shim\n%s" % r.describe())
    check(not os.path.exists(os.path.join(cwd, "sub", "out")), "files landed in sub/out: %s" % (
        files_in(os.path.join(cwd, "sub", "out"))))
    got = files_in(os.path.join(cwd, "out"))
    check(any(".hello." in f for f in got) and "run.cpu.pprof" in got,
          "out/ should hold the shell's and hello's profiles, holds %s\n%s" % (got, r.describe()))


def test_exec_into_a_static_binary_says_so(ctx):
    """A wrapper script that execs a statically linked program: one line
    names it (the shim cannot enter it), instead of leaving only the
    wrapper's empty profile in silence."""
    tmp = ctx.mkdtemp("static")
    src = os.path.join(tmp, "s.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 5; }\n")
    exe = os.path.join(tmp, "static_prog")
    c = subprocess.run(["gcc", "-static", "-o", exe, src], capture_output=True)
    check(c.returncode == 0, "cannot build a static test program: %s" % c.stderr.decode())
    d = ctx.mkdtemp("prof")
    r = run(ctx, [_sh(ctx), "-c", "exec %s" % exe], env=ctx.env(PROFILE_DIR=d))
    check(r.status.is_exit(5), "%s\n%s" % (r.status, r.describe()))
    lines = [l for l in r.stderr_lines if "statically linked" in l]
    # Nothing failed (the exec went on, the files written are whole): a
    # warning, so that a search of the journal for errors does not find it.
    check(len(lines) == 1 and exe in lines[0] and lines[0].startswith("# profshim: warning: "),
          "want one warning line naming %s\n%s" % (exe, r.describe()))


def test_unknown_profile_variable_is_named_once(ctx):
    """PROFILE_CPU_HERTZ=1000 (a misspelling): one line names it, from the
    root image only (a build's hundreds of images do not repeat it); the run
    goes on with the defaults."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, [_sh(ctx), "-c", "%s; %s" % (ctx.workload("hello"), ctx.workload("hello"))],
            env=ctx.env(PROFILE_DIR=d, PROFILE_CPU_HERTZ="1000"))
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    lines = [l for l in r.stderr_lines if "PROFILE_CPU_HERTZ" in l]
    check(len(lines) == 1 and lines[0].startswith("# profshim: "), "want one line naming the variable\n%s" % (
        r.describe()))


_WHO_RE = re.compile(r"^profshim: pid (\d+) \(parent (\d+)\) program (\S+)$")
_ARGV_RE = re.compile(r"^profshim: argv (.*)$")
_START_RE = re.compile(r"^profshim: started (\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z$")


def _identity(ctx, path):
    prof = ctx.read(path)
    who = [m for m in map(_WHO_RE.match, prof.comments) if m]
    argv = [m.group(1) for m in map(_ARGV_RE.match, prof.comments) if m]
    start = [m for m in map(_START_RE.match, prof.comments) if m]
    check(len(who) == 1 and len(argv) == 1 and len(start) == 1,
          "%s: comments lack pid/parent/program, argv or start:\n%s" % (path, "\n".join(prof.comments)))
    g = [int(x) for x in start[0].groups()]
    t = calendar.timegm((g[0], g[1], g[2], g[3], g[4], g[5])) + g[6] / 1000.0
    return prof, int(who[0].group(1)), int(who[0].group(2)), who[0].group(3), argv[0], t


def test_images_record_who_they_are(ctx):
    """sh -c 'fork_exec fork "two words" ...': the shell (root), fork_exec
    (exec'd by the shell) and its forked child (PROFILE_FORKS=own). Each
    profile's comments give its pid, its parent's pid, the executable, the
    command line and a start
    time within the run; every sample carries labels pid and program; each
    summary line ends with the pid, the parent and the command line. So a
    tree's files say which image is which."""
    d = ctx.mkdtemp("prof")
    fe = ctx.workload("fork_exec")
    t0 = time.time()
    r = run(ctx, ["/bin/sh", "-c", "%s fork 'two words' it\\'s; true" % fe],
            env=ctx.env(PROFILE_DIR=d, PROFILE_FORKS="own"))
    t1 = time.time()
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    cpu = sorted(f for f in files_in(d) if f.endswith(".cpu.pprof"))
    check(len(cpu) == 3, "want three images' CPU profiles, have %s\n%s" % (cpu, r.describe()))
    ids = {}
    for f in cpu:
        prof, pid, ppid, exe, argv, start = _identity(ctx, os.path.join(d, f))
        check(t0 - 1 <= start <= t1 + 1, "%s: start %.3f is not within the run [%.3f, %.3f]" % (f, start, t0, t1))
        if f != "run.cpu.pprof":
            check(".%d." % pid in f, "%s names a pid other than its comment's %d" % (f, pid))
        program = os.path.basename(exe)
        for s in prof.samples:
            tags = " ".join(s.labels).split()
            check("pid:[%d]" % pid in tags and "program:[%s]" % program in tags,
                  "%s: a sample lacks labels pid:[%d] program:[%s]: %s" % (f, pid, program, s.labels))
        check(prof.samples or f == "run.cpu.pprof", "%s: no samples to check labels on" % f)
        ids[pid] = (ppid, exe, argv)
    shell = [p for p, (_, exe, _) in ids.items() if os.path.basename(exe) in ("dash", "sh", "bash")]
    check(len(shell) == 1, "one image should be the shell: %s" % ids)
    want_argv = "%s fork 'two words' 'it'\\''s'" % fe
    fes = sorted((p for p in ids if ids[p][2] == want_argv), key=lambda p: ids[p][0] == shell[0])
    check(len(fes) == 2, "two images (fork_exec and its forked child) should show argv %r: %s" % (want_argv, ids))
    child, parent = fes
    check(ids[parent][0] == shell[0] and ids[child][0] == parent,
          "parents: fork_exec's should be the shell %d, its child's fork_exec %d: %s" % (shell[0], parent, ids))
    lines = r.summary_lines()
    for pid, (ppid, _, argv) in ids.items():
        # The line cuts a command line past 100 bytes and says so with
        # "..." (a checkout at a long path makes the shell's that long).
        shown = argv if len(argv.encode()) <= 100 else argv.encode()[:100].decode(errors="ignore") + "..."
        tail = " | pid %d (parent %d): %s" % (pid, ppid, shown)
        check(sum(l.endswith(tail) for l in lines) == 1, "one summary line should end %r:\n%s" % (
            tail, "\n".join(lines)))


def _pid_in(ctx, path):
    return _identity(ctx, path)[1]


def _run_daemon(ctx, d, mode, **env):
    """Starts `daemonize MODE` profiled into d as svc and waits (60 s at
    most) for its daemon to end; the parent's Popen and the daemon's pid."""
    pidfile = os.path.join(d, "daemon.pid")
    p = subprocess.Popen([ctx.workload("daemonize"), mode, pidfile],
                         env=ctx.env(PROFILE_DIR=d, PROFILE_NAME="svc", **env),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 0, "%s: the parent exited %d\n%s" % (mode, p.returncode, err.decode()))
    daemon = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if daemon is None and os.path.exists(pidfile):
            daemon = int(open(pidfile).read())
        if daemon is not None and not os.path.exists("/proc/%d" % daemon):
            break
        time.sleep(0.05)
    check(daemon is not None and not os.path.exists("/proc/%d" % daemon),
          "%s: the daemon did not finish within 60 s" % mode)
    time.sleep(0.2)  # its stop ran before it exited; nothing else is left to write
    return p, daemon


def test_a_daemonized_child_takes_the_name(ctx):
    """A daemon started the classic ways (fork, setsid, parent exits; and
    with a second fork, the intermediate exiting too), as systemd's
    Type=forking and `daemonize yes` do: NAME.* is the daemon's, holding
    its work, and the parents' short lives are kept under their own names
    (NAME.daemonize.PID.*), not lost."""
    for mode in ("classic", "double"):
        d = ctx.mkdtemp("prof")
        p, daemon = _run_daemon(ctx, d, mode)
        got = files_in(d)
        images = 2 if mode == "classic" else 3
        check(len([f for f in got if f.endswith(".pprof")]) == 3 * images,
              "%s: %d images should leave %d files: %s" % (mode, images, 3 * images, got))
        check(_pid_in(ctx, os.path.join(d, "svc.cpu.pprof")) == daemon,
              "%s: svc.cpu.pprof is not the daemon's (pid %d)" % (mode, daemon))
        prof = ctx.read(os.path.join(d, "svc.cpu.pprof"))
        check(prof.cum("daemon_work", "cpu") >= 0.1e9, "%s: the daemon's work is not in svc.cpu.pprof:\n%s" % (
            mode, prof.cum_table("cpu", 8)))
        root = "svc.daemonize.%d" % p.pid
        for kind in KINDS:
            check(root + "." + kind + ".pprof" in got, "%s: the parent's %s profile is not kept as %s: %s" % (
                mode, kind, root, got))
            check(_pid_in(ctx, os.path.join(d, root + "." + kind + ".pprof")) == p.pid,
                  "%s: %s.%s.pprof is not the parent's" % (mode, root, kind))


def test_a_daemons_workers_leave_the_name_to_it(ctx):
    """A daemon that forks workers which end while it lives (PostgreSQL's
    backends, six ending at once, each calling setsid): the workers are
    detached from the root's session, but their parent, the daemon, is
    alive, so none of them takes NAME: svc.* is the daemon's, and every
    image keeps its files (none lost to another's rename). (Each worker
    writes its own files: PROFILE_FORKS=own.)"""
    d = ctx.mkdtemp("prof")
    _, daemon = _run_daemon(ctx, d, "server", PROFILE_FORKS="own")
    got = files_in(d)
    check(_pid_in(ctx, os.path.join(d, "svc.cpu.pprof")) == daemon, "svc.cpu.pprof is not the daemon's (pid %d): %s" % (
        daemon, got))
    kinds = [f[len("svc."):-len(".pprof")] for f in got if f.startswith("svc.") and f.count(".") == 2 and f.endswith(".pprof")]
    images = 2 + 6
    check(len([f for f in got if f.endswith(".pprof")]) == len(kinds) * images,
          "%d images should leave %d files (%s each): %s" % (images, len(kinds) * images, kinds, got))


def test_a_daemons_workers_merge_into_the_daemon(ctx):
    """The same daemon with forks merged (the default): the area the root
    made closed when the root ended, so the daemon makes its own at its
    first fork and its six workers hand their samples to it: two images'
    files (the root's, the daemon's svc.*), none of a worker's."""
    d = ctx.mkdtemp("prof")
    _, daemon = _run_daemon(ctx, d, "server")
    got = files_in(d)
    check(_pid_in(ctx, os.path.join(d, "svc.cpu.pprof")) == daemon, "svc.cpu.pprof is not the daemon's (pid %d): %s" % (
        daemon, got))
    kinds = [f[len("svc."):-len(".pprof")] for f in got if f.startswith("svc.") and f.count(".") == 2 and f.endswith(".pprof")]
    check(len([f for f in got if f.endswith(".pprof")]) == len(kinds) * 2,
          "the root and the daemon should leave %d files (%s each), the workers none: %s" % (
              len(kinds) * 2, kinds, got))


def test_a_later_different_program_keeps_the_roots_files(ctx):
    """A unit's ExecStopPost=/bin/true after its daemon, same environment:
    the daemon's svc.* stay, the later program's files take its own name;
    re-running the daemon's program replaces svc.*, as ever."""
    d = ctx.mkdtemp("prof")
    env = ctx.env(PROFILE_DIR=d, PROFILE_NAME="svc")
    first = run(ctx, [ctx.workload("fork_exec"), "after"], env=env)
    check(first.status.is_exit(0), first.describe())
    pid1 = _pid_in(ctx, os.path.join(d, "svc.cpu.pprof"))
    later = run(ctx, ["/bin/true"], env=env)
    check(later.status.is_exit(0), later.describe())
    check(_pid_in(ctx, os.path.join(d, "svc.cpu.pprof")) == pid1 and
          _pid_in(ctx, os.path.join(d, "svc.heap.pprof")) == pid1,
          "/bin/true replaced the first program's svc.*: %s" % files_in(d))
    true_files = [f for f in files_in(d) if f.startswith("svc.true.")]
    check(len(true_files) == 3, "/bin/true's profiles should be svc.true.PID.*: %s" % files_in(d))
    check(any(f in l for l in later.summary_lines() for f in true_files), "the summary line should name them:\n%s"
          % later.describe())
    again = run(ctx, [ctx.workload("fork_exec"), "after"], env=env)
    check(again.status.is_exit(0), again.describe())
    pid3 = _pid_in(ctx, os.path.join(d, "svc.cpu.pprof"))
    check(pid3 != pid1, "re-running the same program should replace svc.* (pid %d still there)" % pid1)


def test_summary_says_which_module_lacks_names(ctx):
    """sym_stripped built without -rdynamic and stripped: all its CPU is in
    code with no name, and the summary line names the executable and how a
    Debian user gets its symbols. The same program unstripped: no such
    note."""
    tmp = ctx.mkdtemp("strip")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads", "sym_stripped.c")
    exe = os.path.join(tmp, "bare_prog")
    for cmd in (["gcc", "-O1", "-o", exe, src], ["strip", "--strip-all", exe]):
        c = subprocess.run(cmd, capture_output=True)
        check(c.returncode == 0, "%s: %s" % (cmd, c.stderr.decode()))
    r, d = ctx.profile([exe, "0.3"])
    lines = r.summary_lines()
    check(len(lines) == 1 and ("unnamed, most in %s: its package's debug symbols" % exe) in lines[0]
          and "dpkg -S %s" % exe in lines[0], "the summary should name %s as lacking names:\n%s" % (exe, r.describe()))
    r2, _ = ctx.profile(["sym_stripped", "0.3"])
    check(all("unnamed" not in l for l in r2.summary_lines()), "a named program got the note:\n%s" % r2.describe())
