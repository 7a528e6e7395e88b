"""Signal transparency: with profiling on, the program sees the dispositions
it would see without the shim, its own handlers work, and signals ignored at
start stay ignored."""

import signal

from common import check, indent


def _compare(ctx, argv, ignore=()):
    plain = ctx.run_plain(argv, ignore_signals=ignore)
    r, d = ctx.profile(argv, expect_rc=None, ignore_signals=ignore)
    what = " ".join(argv) + (" (started with %s ignored)" % ", ".join(signal.Signals(s).name for s in ignore)
                             if ignore else "")
    check(r.rc == plain.rc, "%s: %s under the shim, %s without it\n%s" % (
        what, r.status_text(), plain.status_text(), r.describe()))
    check(r.out == plain.out, "%s: the program sees different signal state under the shim\nwithout:\n%s\nwith:\n%s"
          % (what, indent(plain.stdout_text), indent(r.stdout_text)))
    return r, d


def test_sigaction_reports_what_the_program_set(ctx):
    _compare(ctx, ["signals_view"])


def test_ignored_signals_stay_ignored(ctx):
    r, _ = _compare(ctx, ["signals_view"], ignore=(signal.SIGPIPE, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1))
    check("write to a closed pipe: EPIPE" in r.stdout_text, "SIGPIPE ignored at start: the write to a closed "
          "pipe should fail with EPIPE\n%s" % r.describe())


def test_ignored_sigterm_is_not_fatal(ctx):
    """stop_paths raises SIGTERM; started with SIGTERM ignored it must go on
    and return 0, as without the shim."""
    r, d = _compare(ctx, ["stop_paths", "sigterm"], ignore=(signal.SIGTERM,))
    check(r.rc == 0, "SIGTERM was ignored at start, yet the process ended: %s" % r.status_text())
