"""The signal API behaves as without the shim, each run compared with a
plain run (tests/workloads/sig_habits.c): siginterrupt, sysv_signal,
sigset, SA_RESETHAND, signal() beside fork and inside a handler, the
program taking the shim's signal, a vfork child's signal().
"""

from common import check
from sig_helpers import both, same_as_plain, same_outcome


def test_siginterrupt_makes_read_fail_with_eintr(ctx):
    """siginterrupt(SIGALRM, 1): alarm(1) interrupts a read of an empty pipe
    with EINTR, both times (the shim's signal() used to restart it)."""
    plain, r, _ = both(ctx, ["sig_habits", "siginterrupt"], timeout=20)
    same_as_plain(plain, r, "siginterrupt")
    check(r.stdout_text.count("Interrupted system call") == 2, "both reads must fail with EINTR\n%s" % r.describe())


def test_views_after_sysv_signal_sigset_and_resethand(ctx):
    """What sigaction() reports after sysv_signal, sigset (and SIG_HOLD), a
    one-shot handler's delivery, signal() and sigignore, line for line as
    without the shim."""
    plain, r, _ = both(ctx, ["sig_habits", "views"])
    same_as_plain(plain, r, "views")


def test_fork_while_another_thread_calls_signal(ctx):
    """One thread loops signal(SIGUSR1, h) while another forks 40 children
    that call signal(SIGUSR1, SIG_DFL): every child exits (the shim's lock
    used to be inherited held, and children spun forever)."""
    plain, r, _ = both(ctx, ["sig_habits", "forksig"], timeout=60)
    same_as_plain(plain, r, "forksig")
    check("children ok: 40" in r.stdout_text, "every child must exit 0\n%s" % r.describe())


def test_signal_called_inside_a_handler(ctx):
    """The SysV idiom: a SIGALRM handler re-arms itself with signal() while
    main keeps calling signal() for another signal. The shim's sigaction
    bookkeeping must not deadlock on itself (it spun forever). The alarm
    count depends on timing, so only the outcome is compared. The timeout
    only catches a spin: the program itself takes 16 s at load 10."""
    r = ctx.run(["rv_reent"], timeout=300, PROFILE_DIR=ctx.mkdtemp("prof"))
    check(r.rc == 0 and r.out.startswith(b"done, ") and len(r.summary_lines()) == 1,
          "rv_reent under the shim should finish, exit 0 and write its profiles:\n%s" % r.describe())


def test_program_took_the_sampling_signal_then_forks(ctx):
    """After the program installs its own handler on the shim's sampling
    signal, neither the parent nor a forked child may receive a timer signal
    of the shim's (the child got 10 a second)."""
    r, _ = same_outcome(ctx, ["rv_handover"])
    check(r.out.count(b"timer=0") == 2, "a process got the shim's timer signals:\n%s" % r.describe())


def test_vfork_child_signal_change_does_not_leak_into_parent_view(ctx):
    """A vfork child's signal(SIGPIPE, SIG_IGN) changes the child's own table;
    the parent's sigaction(SIGPIPE, NULL, &old) must still say SIG_DFL, as
    without the shim (the shim's bookkeeping lives in shared memory)."""
    r, _ = same_outcome(ctx, ["rv_vforksig"])
    check(r.out == b"parent SIGPIPE default\n", "the parent's view changed:\n%s" % r.describe())
