"""Regressions found by reviewing the shim: each of these hung a process or
sent it the shim's own signals before it was fixed (docs/DESIGN.md)."""

from common import check


def _same_as_plain(ctx, argv, timeout=30):
    plain = ctx.run_plain(argv, timeout=timeout)
    d = ctx.mkdtemp("prof")
    r = ctx.run(argv, timeout=timeout, PROFILE_DIR=d)
    check(r.rc == plain.rc and r.out == plain.out,
          "%s under the shim: %s, stdout %r; without it: %s, stdout %r\n%s" % (
              " ".join(argv), r.status_text(), r.out, plain.status_text(), plain.out, r.describe()))
    return r, d


def test_fork_child_whose_only_thread_returns_exits(ctx):
    """A worker thread forks; in the child, that (only) thread returns from its
    start routine, so libc ends the child. The shim's stop thread must not
    keep it alive (it did: the parent hung in waitpid)."""
    r, _ = _same_as_plain(ctx, ["rv_forkret"])
    check(b"exited=1" in r.out, "the forked child did not exit normally:\n%s" % r.describe())


def test_signal_called_inside_a_handler(ctx):
    """The SysV idiom: a SIGALRM handler re-arms itself with signal() while
    main keeps calling signal() for another signal. The shim's sigaction
    bookkeeping must not deadlock on itself (it spun forever). The alarm
    count depends on timing, so only the outcome is compared."""
    r = ctx.run(["rv_reent"], timeout=30, PROFILE_DIR=ctx.mkdtemp("prof"))
    check(r.rc == 0 and r.out.startswith(b"done, ") and len(r.summary_lines()) == 1,
          "rv_reent under the shim should finish, exit 0 and write its profiles:\n%s" % r.describe())


def test_program_took_the_sampling_signal_then_forks(ctx):
    """After the program installs its own handler on the shim's sampling
    signal, neither the parent nor a forked child may receive a timer signal
    of the shim's (the child got 10 a second)."""
    r, _ = _same_as_plain(ctx, ["rv_handover"])
    check(r.out.count(b"timer=0") == 2, "a process got the shim's timer signals:\n%s" % r.describe())


def test_vfork_child_signal_change_does_not_leak_into_parent_view(ctx):
    """A vfork child's signal(SIGPIPE, SIG_IGN) changes the child's own table;
    the parent's sigaction(SIGPIPE, NULL, &old) must still say SIG_DFL, as
    without the shim (the shim's bookkeeping lives in shared memory)."""
    r, _ = _same_as_plain(ctx, ["rv_vforksig"])
    check(r.out == b"parent SIGPIPE default\n", "the parent's view changed:\n%s" % r.describe())
