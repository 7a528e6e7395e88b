"""The signal API behaves as without the shim, each run compared with a
plain run (tests/workloads/sig_habits.c): siginterrupt, sysv_signal,
sigset, SA_RESETHAND, and signal() beside fork.
"""

from common import check
from sig_helpers import both, same_as_plain


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
