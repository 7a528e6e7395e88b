"""Programs that detach (setsid) under the shim, each compared with a plain
run: the program's descriptors are untouched at setsid whether the shim is
inert or profiling, and a helper the root leaves behind when it exits does
not take NAME from the root that did the work."""

import os
import re
import shutil
import subprocess
import sys
import time

from cli_helpers import CLI
from common import check, fail, indent
from st_helpers import prof_env, start


def _piped(ctx, argv, env, data, timeout=30):
    """argv with data on a pipe as its stdin, stderr a file (a fork child's
    shim keeps no duplicate of a pipe); (status, stdout, stderr, wall)."""
    err_path = os.path.join(ctx.mkdtemp("err"), "stderr")
    t0 = time.monotonic()
    with open(err_path, "wb") as err:
        # A session leader, as a service manager or a shell's job starts it.
        p = subprocess.run(argv, env=env, input=data, stdout=subprocess.PIPE, stderr=err, timeout=timeout,
                           start_new_session=True)
    with open(err_path, "rb") as f:
        return p.returncode, p.stdout, f.read(), time.monotonic() - t0


def _as_plain(ctx, argv, data=b"", timeout=30):
    """argv plain, inert (LD_PRELOAD only) and profiling: the same status
    and stdout each time; the three runs."""
    runs = {"plain": ctx.env(preload=False), "inert": ctx.env(), "profiled": prof_env(ctx, ctx.mkdtemp("prof"))}
    got = {k: _piped(ctx, argv, env, data, timeout) for k, env in runs.items()}
    want = got["plain"]
    for k in ("inert", "profiled"):
        rc, out, err, _ = got[k]
        check((rc, out) == want[:2], "%s %s: status %d, stdout %r; plain: status %d, stdout %r\nstderr:\n%s" % (
            k, " ".join(argv), rc, out, want[0], want[1], indent(err.decode("utf-8", "replace"))))
    return got


def test_setsid_keeps_stdin(ctx):
    """`setsid -w cat` with its stdin on a pipe: setsid(1) forks (it leads
    its process group here), the child calls setsid() and execs cat. The
    inert shim closed descriptor 0 at that setsid() (its stderr duplicate's
    zero-initialised number): cat said "-: Bad file descriptor", exit 1."""
    setsid = shutil.which("setsid")
    check(setsid, "setsid not found (Debian package util-linux)")
    data = b"hello through setsid\n"
    got = _as_plain(ctx, [setsid, "-w", "cat"], data)
    check(got["plain"][:2] == (0, data), "baseline: %r" % (got["plain"],))


def test_a_duplicate_number_closed_behind_the_shims_back(ctx):
    """The program closes fd 2 (the profiling shim keeps a duplicate), then
    closes that number with a raw syscall and puts a copy of its stdin
    there, then calls setsid: the shim let go of "its" duplicate by number
    and closed the program's stdin copy."""
    data = b"read through the copy\n"
    got = _as_plain(ctx, [ctx.workload("detach"), "stale_dup"], data)
    check(got["plain"][:2] == (0, data), "baseline: %r" % (got["plain"],))


def test_erlang_inert_is_as_plain(ctx):
    """erl's port helpers (inet_gethost, started through erl_child_setup,
    which calls setsid) lost descriptor 0 to the inert shim: a FATAL line
    from inet_gethost and 9 s instead of under 1 s."""
    erl = shutil.which("erl")
    check(erl, "erl not found (Debian package erlang-base; scripts/install-deps installs it)")
    argv = [erl, "-noshell", "-eval", 'io:format("hi~n"), halt().']
    runs = {"plain": ctx.env(preload=False), "inert": ctx.env()}
    got = {k: _piped(ctx, argv, env, b"", timeout=60) for k, env in runs.items()}
    rc, out, err, wall = got["inert"]
    check((rc, out) == got["plain"][:2] and b"FATAL" not in err,
          "inert: status %d, stdout %r, stderr:\n%s\nplain: %r" % (rc, out, indent(err.decode()), got["plain"]))
    # A hang guard, not a benchmark: the broken run took 9 s.
    check(wall < got["plain"][3] + 4, "inert erl took %.2f s, plain %.2f s" % (wall, got["plain"][3]))


def _wait_gone(pidfile, what, seconds=30):
    """The pid PIDFILE names, once it has ended (its stop ran before)."""
    pid = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pid is None and os.path.exists(pidfile):
            pid = int(open(pidfile).read())
        if pid is not None and not os.path.exists("/proc/%d" % pid):
            return pid
        time.sleep(0.01)
    fail("%s did not end within %d s (pid %s)" % (what, seconds, pid))


def _marker(path):
    """The gzip header's marker of the image that wrote path (the CLI's reader)."""
    sys.path.insert(0, CLI)
    import pprofile
    return pprofile.parse_marker(pprofile.gzip_comment(path))


def _summaries_naming(err, path):
    return [l for l in err.decode("utf-8", "replace").splitlines()
            if l.startswith("# profshim: ") and (" %s " % path) in l + " "]


def test_a_helper_left_behind_keeps_its_own_name(ctx):
    """Erlang's erl_child_setup: the root forks a helper that execs, calls
    setsid and ends only once the root has gone (orphaned, detached: the
    daemon rule's image). The root did the work: NAME.* stays the root's,
    named in its summary line alone; the helper keeps its own stem. Before,
    the helper took NAME in every run (in erl, 11 runs of 20, by the race
    with the reaping of BEAM). Five runs into one directory: the old rule
    failed on the first, and later runs meet the files the earlier left."""
    d = ctx.mkdtemp("prof")
    cpu = os.path.join(d, "e.cpu.pprof")
    for i in range(5):
        pidfile = os.path.join(d, "helper.pid")
        if os.path.exists(pidfile):
            os.unlink(pidfile)
        r = start(ctx, ["detach", "root", pidfile], env=prof_env(ctx, d, name="e"))
        r.wait(60)
        check(r.status.is_exit(0), "run %d: %s" % (i, r.describe()))
        helper = _wait_gone(pidfile, "the helper")
        with open(r.err_path, "rb") as f:
            err = f.read()
        prof = ctx.read(cpu)
        check(prof.cum("root_work", "cpu") > 0 and "pid:[%d]" % r.pid in " ".join(
            " ".join(s.labels) for s in prof.samples),
            "run %d: e.cpu.pprof is not the root's (pid %d; the helper %d): %s\n%s" % (
                i, r.pid, helper, sorted(os.listdir(d)), indent(err.decode())))
        lines = _summaries_naming(err, cpu)
        check(len(lines) == 1 and lines[0].split(" | pid ")[1].startswith("%d " % r.pid),
              "run %d: one summary line, the root's (pid %d), should name %s:\n%s" % (i, r.pid, cpu, indent(
                  err.decode())))
        own = "e.detach.%d.1.cpu.pprof" % helper
        check(own in os.listdir(d), "run %d: the helper's %s is not there: %s" % (i, own, sorted(os.listdir(d))))


def test_erlang_root_keeps_its_name(ctx):
    """erl profiled as e, twenty runs into one directory: e.* is BEAM's
    (the root's pid: erl execs erlexec, which execs beam.smp), named in
    one summary line, BEAM's; erl_child_setup, which BEAM leaves behind,
    keeps its own stem. It took e.* in 11 runs of 20 (whenever BEAM was
    reaped before its stop), and each later run's BEAM then found e.*
    another program's and wrote under its own stem."""
    erl = shutil.which("erl")
    check(erl, "erl not found (Debian package erlang-base; scripts/install-deps installs it)")
    d = ctx.mkdtemp("prof")
    heap = os.path.join(d, "e.heap.pprof")
    argv = [erl, "-noshell", "-eval", 'io:format("hi~n"), halt().']
    for i in range(20):
        # Profiled whole, CPU included (BEAM used to die under CPU sampling
        # in about one run of ten: the sampling handler was not on the
        # alternate stack; test_runtimes.py).
        r = start(ctx, argv, env=prof_env(ctx, d, name="e"))
        r.wait(60)
        check(r.status.is_exit(0) and r.stdout_text == "hi\n", "run %d: %s" % (i, r.describe()))
        # erl_child_setup is BEAM's forked child (its image before the exec
        # ran beam.smp) under the same pid; its own line comes after BEAM's.
        deadline = time.monotonic() + 30
        while True:
            with open(r.err_path, "rb") as f:
                err = f.read()
            ids = re.findall(r" \| pid (\d+) \(parent \d+\): (\S+)", err.decode("utf-8", "replace"))
            forked = {p for p, prog in ids if prog.endswith("/beam.smp") and p != str(r.pid)}
            if any(p in forked and prog == "erl_child_setup" for p, prog in ids) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        check(forked and any(p in forked and prog == "erl_child_setup" for p, prog in ids),
              "run %d: erl_child_setup's summary line is missing:\n%s" % (i, indent(err.decode())))
        lines = _summaries_naming(err, heap)
        check(len(lines) == 1 and lines[0].split(" | pid ")[1].startswith("%d " % r.pid),
              "run %d: one summary line, BEAM's (pid %d), should name %s:\n%s" % (i, r.pid, heap, indent(
                  err.decode())))
        for kind in ("heap", "wait"):
            marker = _marker(os.path.join(d, "e.%s.pprof" % kind))
            check(marker and marker["pid"] == r.pid, "run %d: e.%s.pprof is not BEAM's (pid %d) but %s: %s" % (
                i, kind, r.pid, marker, sorted(os.listdir(d))))
