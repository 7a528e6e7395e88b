"""Regressions found by reviewing the shim: each of these hung a process
before it was fixed (docs/DESIGN.md). The signal ones are in
test_signals_api.py."""

from common import check
from sig_helpers import same_outcome


def test_fork_child_whose_only_thread_returns_exits(ctx):
    """A worker thread forks; in the child, that (only) thread returns from its
    start routine, so libc ends the child. The shim's stop thread must not
    keep it alive (it did: the parent hung in waitpid)."""
    r, _ = same_outcome(ctx, ["rv_forkret"])
    check(b"exited=1" in r.out, "the forked child did not exit normally:\n%s" % r.describe())
