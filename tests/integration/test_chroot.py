"""A program that changes its root before it stops -- a daemon that sandboxes
itself: chroot into an empty directory, then chdir("/") -- still leaves its
three profiles where PROFILE_DIR named, named from the images it had before
the chroot. The stop used to write by path and found neither PROFILE_DIR,
nor /proc, nor the program's images inside the new root: "wrote no
profile", an error line, and the heap dump failed as well.

chroot_self computes (work_before_chroot), holds 64 MiB (hold_memory),
chroots, computes a little more and exits 0, or raises SIGTERM there. To
chroot it needs root, or a user namespace of its own (it enters one when
not root); without either the tests skip.
"""

import os
import resource
import signal
import subprocess

from common import Skip, check, image_files, indent
from st_helpers import pprofs, prof_env, run, start

WANT = image_files("run")


def _can_chroot():
    if os.geteuid() == 0:
        return
    try:
        p = subprocess.run(["unshare", "-Ur", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Skip("not root, and `unshare -Ur true` could not run (%s): chroot is not allowed here" % e)
    if p.returncode != 0:
        raise Skip("not root, and no user namespace (`unshare -Ur true`: %s): chroot is not allowed here" %
                   p.stderr.decode(errors="replace").strip())


def _chrooted(ctx, extra, want_status):
    _can_chroot()
    argv = ["chroot_self", ctx.mkdtemp("newroot")] + extra
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(want_status(plain.status), "%s without the shim: %s\n%s" % (" ".join(argv), plain.status, plain.describe()))
    d = ctx.mkdtemp("prof")
    argv[1] = ctx.mkdtemp("newroot")
    r = run(ctx, argv, env=prof_env(ctx, d))
    what = " ".join(argv)
    check(r.status.key() == plain.status.key() and r.out == plain.out,
          "%s: under the shim %s, stdout %r; without it %s, stdout %r\n%s" % (
              what, r.status, r.stdout_text, plain.status, plain.stdout_text, r.describe()))
    check(pprofs(d) == WANT and len(r.summary_lines()) == 1 and not r.error_lines(),
          "%s: PROFILE_DIR holds %s, want %s and one summary line\n%s" % (what, pprofs(d), WANT, r.describe()))
    check(os.listdir(argv[1]) == [], "%s: the new root holds %s: the shim wrote there" % (what, os.listdir(argv[1])))
    cpu = ctx.pprof.top(os.path.join(d, "run.cpu.pprof"))
    check("work_before_chroot" in cpu,
          "%s: the CPU profile does not name work_before_chroot (symbols read after the chroot?):\n%s" % (
              what, indent(cpu)))
    heap = ctx.pprof.top(os.path.join(d, "run.heap.pprof"))
    check("hold_memory" in heap, "%s: the heap profile does not name hold_memory:\n%s" % (what, indent(heap)))


def test_a_program_that_chroots_then_exits_leaves_its_profiles(ctx):
    _chrooted(ctx, [], lambda s: s.is_exit(0))


def test_a_program_that_chroots_then_dies_of_sigterm_leaves_its_profiles(ctx):
    _chrooted(ctx, ["term"], lambda s: s.is_signal(signal.SIGTERM))


def _descriptors_while_waiting(ctx, env):
    r = start(ctx, ["chroot_self", ctx.mkdtemp("newroot"), "wait"], env=env)
    r.wait_for(r"^waiting$")
    fd_dir = "/proc/%d/fd" % r.pid
    fds = {}
    for n in os.listdir(fd_dir):
        try:
            fds[int(n)] = os.readlink(os.path.join(fd_dir, n))
        except OSError:
            pass
    r.kill(signal.SIGTERM)
    r.wait()
    check(r.status.is_signal(signal.SIGTERM), "chroot_self wait: %s, want killed by SIGTERM\n%s" % (
        r.status, r.describe()))
    return fds, r


def test_the_one_descriptor_more_is_the_root_it_started_with_at_the_top(ctx):
    """The shim holds one descriptor after the program's chroot: the root
    the program had, close to RLIMIT_NOFILE's soft limit, where a program's
    own numbers rarely reach; the program's own numbers are as without it."""
    _can_chroot()
    plain, _ = _descriptors_while_waiting(ctx, ctx.env(preload=False))
    d = ctx.mkdtemp("prof")
    shim, r = _descriptors_while_waiting(ctx, prof_env(ctx, d))
    extra = sorted(set(shim) - set(plain))
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY or limit >= 1 << 20:
        limit = 1024  # the shim's top then (sys::top_free_fd)
    check(len(extra) == 1 and set(plain) <= set(shim),
          "descriptors under the shim %s, without it %s: want the same numbers and one more" % (shim, plain))
    check(shim[extra[0]] == "/" and extra[0] >= limit - 64,
          "the shim's descriptor is %d -> %s, want the root near the limit (%d)" % (extra[0], shim[extra[0]], limit))
    check(pprofs(d) == WANT, "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
