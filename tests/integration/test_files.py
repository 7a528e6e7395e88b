"""How the files are written: atomically (a new file renamed over the old
name: symlinks and hard links at the name are replaced, not written
through), undisturbed by stale temp files, and a full disk at the stop is a
reported teardown error that changes nothing else."""

import os
import shutil
import sys
import tempfile
import signal
import subprocess
import time

from common import ERROR_PREFIX, KINDS, Result, Skip, check, describe_env, files_in, image_files
from st_helpers import run

VICTIM_TEXT = b"victim: must never be written by the shim\n"


def _victim(ctx, name="victim"):
    d = ctx.mkdtemp("outside")
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(VICTIM_TEXT)
    return p


def _check_victim(p, what):
    with open(p, "rb") as f:
        data = f.read()
    check(data == VICTIM_TEXT, "%s: the file at the far end (%s) was overwritten: now %d bytes starting %r" % (
        what, p, len(data), data[:16]))


def _check_profiles(ctx, d, r, name="run"):
    for kind in KINDS:
        p = os.path.join(d, "%s.%s.pprof" % (name, kind))
        check(os.path.lexists(p), "%s not written\n%s" % (p, r.describe()))
        check(not os.path.islink(p) and os.path.isfile(p), "%s is not a regular file (symlink followed?)" % p)
        ctx.read(p, r)


def test_symlink_at_the_name_is_replaced(ctx):
    d = ctx.mkdtemp("prof")
    victims = {}
    for kind in KINDS:
        v = _victim(ctx, "victim-" + kind)
        os.symlink(v, os.path.join(d, "run.%s.pprof" % kind))
        victims[kind] = v
    r, _ = ctx.profile(["hello"], dir=d)
    for kind, v in victims.items():
        _check_victim(v, "run.%s.pprof was a symlink" % kind)
    _check_profiles(ctx, d, r)


def test_hard_link_at_the_name_is_replaced(ctx):
    """Writing in place (open O_TRUNC) would clobber the other link; a rename
    of a complete new file does not."""
    d = ctx.mkdtemp("prof")
    victims = {}
    for kind in KINDS:
        v = _victim(ctx, "victim-" + kind)
        target = os.path.join(d, "run.%s.pprof" % kind)
        try:
            os.link(v, target)
        except OSError:
            # different file systems: put the victim next to it instead
            os.unlink(v)
            v = os.path.join(d, "victim-" + kind)
            with open(v, "wb") as f:
                f.write(VICTIM_TEXT)
            os.link(v, target)
        victims[kind] = v
    r, _ = ctx.profile(["hello"], dir=d)
    for kind, v in victims.items():
        _check_victim(v, "run.%s.pprof was a hard link" % kind)
    _check_profiles(ctx, d, r)


def test_existing_profiles_replaced(ctx):
    d = ctx.mkdtemp("prof")
    for kind in KINDS:
        with open(os.path.join(d, "run.%s.pprof" % kind), "wb") as f:
            f.write(b"old contents, not a profile\n" * 1000)
    r, _ = ctx.profile(["hello"], dir=d)
    _check_profiles(ctx, d, r)
    check(files_in(d) == image_files("run"), "PROFILE_DIR holds %s" % files_in(d))


def test_stale_temp_files_do_not_block(ctx):
    """Junk that looks like the shim's temp files, and symlinks at the temp
    names the program's pid gives, must neither stop the write nor be
    written through. The program is started stopped before its exec, so its
    pid is known when the names are planted (guessing the next pids failed
    when other processes on the machine took them)."""
    d = ctx.mkdtemp("prof")
    victim = _victim(ctx)
    junk = []
    for kind in KINDS:
        base = "run.%s.pprof" % kind
        for n in (".%s.tmp" % base, ".%s.tmp.1" % base, ".%s.tmp.XXXXXX" % base, "%s.tmp" % base, ".run"):
            p = os.path.join(d, n)
            if not os.path.exists(p):
                with open(p, "wb") as f:
                    f.write(b"stale junk\n")
                junk.append(n)

    def plant(pid):
        for kind in KINDS:
            base = "run.%s.pprof" % kind
            pats = [".{b}.tmp.{p}", ".{b}.{p}.tmp", "{b}.tmp.{p}", ".{b}.tmp{p}"]
            # "<dir>/.<name>.tmp.<pid>.<seq>": what one killed run with the same
            # pid (pid reuse) leaves behind: its probe, cpu, heap and wait temporaries.
            pats += [".{b}.tmp.{p}.%d" % seq for seq in range(4)]
            pats += [".profshim-probe.tmp.{p}.%d" % seq for seq in range(4)]
            for pat in pats:
                n = pat.format(b=base, p=pid)
                if not os.path.lexists(os.path.join(d, n)):
                    os.symlink(victim, os.path.join(d, n))
                    junk.append(n)

    r = _run_planted(ctx, d, plant)
    check(r.rc == 0, "hello under the shim: %s\n%s" % (r.status_text(), r.describe()))
    _check_victim(victim, "symlinks planted at the program's temp-file names")
    _check_profiles(ctx, d, r)
    left = sorted(set(files_in(d)) - set(junk))
    check(left == image_files("run"), "after the run PROFILE_DIR has new entries %s "
          "(leftover temp files?)" % left)


def _run_planted(ctx, d, plant):
    """Runs hello profiled into d: forked, stopped before its exec (the shim
    not loaded yet, its pid known), plant(pid), then let go."""
    env = ctx.env(PROFILE_DIR=d, PROFILE_NAME="run")
    argv = [ctx.workload("hello")]
    cwd = ctx.mkdtemp("cwd")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.chdir(cwd)
            os.kill(os.getpid(), signal.SIGSTOP)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(err_w)
    _, st = os.waitpid(pid, os.WUNTRACED)
    check(os.WIFSTOPPED(st), "the child did not stop before its exec (status %#x)" % st)
    try:
        plant(pid)
    finally:
        os.kill(pid, signal.SIGCONT)
    _, st = os.waitpid(pid, 0)
    out, err = _drain(out_r), _drain(err_r)
    return Result(argv, describe_env(env), os.waitstatus_to_exitcode(st), out, err, time.monotonic() - t0, 0.0,
                  cwd, pid)


def _drain(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


def test_full_disk_at_the_stop(ctx):
    """The program fills the file system just before exit(5): the profiles
    cannot be written. The status stays 5, one error line says so, and no
    partial or temp file is left behind."""
    mnt = ctx.mkdtemp("tmpfs")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,nr_inodes=1000", "tmpfs", mnt],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(p.returncode == 0, "cannot mount a small tmpfs to make a full disk (needs root): %s" %
          p.stdout.decode(errors="replace"))
    try:
        d = os.path.join(mnt, "prof")
        r, _ = ctx.profile(["exit_code", "5", mnt], dir=d, expect_rc=None)
        check(r.rc == 5, "exit status must stay the program's 5 when the profiles cannot be written; "
              "got %s\n%s" % (r.status_text(), r.describe()))
        check("exit_code: filled" in r.stdout_text, "the workload did not fill the disk\n%s" % r.describe())
        errors = r.error_lines()
        check(len(errors) == 1, "want exactly one %r line for the failed write, got %d\n%s" % (
            ERROR_PREFIX, len(errors), r.describe()))
        stray = [l for l in r.stderr_lines if not l.startswith("# profshim: ") and l != "exit_code: stderr line"]
        check(not stray, "unexpected stderr lines: %s" % stray)
        names = files_in(d)
        for n in names:
            if n.endswith(".pprof"):
                ctx.read(os.path.join(d, n), r)  # a file under the real name must be complete
        left = [n for n in names if not n.endswith(".pprof")]
        check(not left, "temp files left behind in PROFILE_DIR on a full disk: %s" % left)
        for p in r.named_files():
            check(os.path.isfile(p), "the summary names %s, which was not written\n%s" % (p, r.describe()))
    finally:
        subprocess.run(["umount", "-l", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# A daemon's privilege drop: to nobody, then a normal exit.
FORK = "import os\npid = os.fork()\nif pid == 0:\n    sum(range(2000000))\n    os._exit(0)\nos.waitpid(pid, 0)\n"
DROP = "import os\nos.setgroups([])\nos.setresgid(65534, 65534, 65534)\nos.setresuid(65534, 65534, 65534)\nprint('dropped')\n"


def test_a_program_that_drops_privileges(ctx):
    """A program started as root that changes to another user before it
    ends: into a PROFILE_DIR only root may write (the one setup made) the
    files cannot go, and the line says why and what to do, once; into one
    the new user may write (mode 1777) they go."""
    if os.geteuid() != 0:
        raise Skip("needs root, to change to another user")
    r, d = ctx.profile([sys.executable, "-c", DROP], expect_rc=0)
    check(r.stdout_text == "dropped\n" and files_in(d) in ([], [".profshim-symbols"]),
          "the directory only root may write holds %s\n%s" % (files_in(d), r.describe()))
    errors = r.error_lines()
    check(len(errors) == 1 and errors[0].count("must be writable by the user it changes to") == 1 and
          "uid 65534 now, uid 0 at its start" in errors[0], "want one line with the reason once\n%s" % r.describe())
    # The test's own directories are 0700: this one's path must be open to nobody.
    # A child forked before the drop handed its samples over: the line says
    # where they stay.
    r, d = ctx.profile([sys.executable, "-c", FORK + DROP], expect_rc=0)
    errors = r.error_lines()
    check(len(errors) == 1 and "1 forked processes' samples stay in" in errors[0],
          "the line should say where the child's samples stay\n%s" % r.describe())
    d = tempfile.mkdtemp(prefix="profshim-drop-", dir="/tmp")
    try:
        os.chmod(d, 0o1777)
        r, _ = ctx.profile([sys.executable, "-c", DROP], dir=d, expect_rc=0)
        _check_profiles(ctx, d, r)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_planted_marker_file_is_not_read(ctx):
    """PROFILE_DIR may be one others write (1777). The marker a Go program
    leaves there for its children (.profshim-image.PID) is read only from a
    small regular file of this user's: a FIFO planted under the parent's
    pid blocked the child's start for ever, a symlink to /dev/zero read
    without end. Each run starts, ends and writes run.* as the root."""
    for plant in ("fifo", "zero", "forged"):
        d = ctx.mkdtemp("prof")
        path = os.path.join(d, ".profshim-image.%d" % os.getpid())
        if plant == "fifo":
            os.mkfifo(path)
        elif plant == "zero":
            os.symlink("/dev/zero", path)
        else:
            with open(path, "w") as f:
                f.write("1:1:0:0:1:1\n0\n")
        r = run(ctx, ["/bin/true"], env=ctx.env(PROFILE_DIR=d, PROFILE_NAME="run"), timeout=30)
        check(r.status.is_exit(0) and len(r.wrote_lines()) == 1 and "/run.cpu.pprof " in r.wrote_lines()[0],
              "%s: want a clean start and run.*\n%s" % (plant, r.describe()))
