"""Programs that detach (setsid) under the shim, each compared with a plain
run: the program's descriptors are untouched at setsid whether the shim is
inert or profiling, and a helper the root leaves behind when it exits does
not take NAME from the root that did the work."""

import os
import shutil
import subprocess
import time

from common import check, indent
from st_helpers import prof_env


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
    check(erl, "erl not found (Debian package erlang-nox; scripts/install-deps installs it)")
    argv = [erl, "-noshell", "-eval", 'io:format("hi~n"), halt().']
    runs = {"plain": ctx.env(preload=False), "inert": ctx.env()}
    got = {k: _piped(ctx, argv, env, b"", timeout=60) for k, env in runs.items()}
    rc, out, err, wall = got["inert"]
    check((rc, out) == got["plain"][:2] and b"FATAL" not in err,
          "inert: status %d, stdout %r, stderr:\n%s\nplain: %r" % (rc, out, indent(err.decode()), got["plain"]))
    # A hang guard, not a benchmark: the broken run took 9 s.
    check(wall < got["plain"][3] + 4, "inert erl took %.2f s, plain %.2f s" % (wall, got["plain"][3]))
