"""A program's own handlers for the fault signals (SIGSEGV, SIGBUS, SIGFPE,
SIGILL), which the shim keeps out of the kernel's masks, run as the kernel
would run them (tests/workloads/fault_masks.c): each run is compared with a
plain run of the same program.

- A fault signal sent while the program blocks it stays pending: the
  handler ran at raise(), the pending set was empty.
- A fault while the program blocks it is the default action, whatever the
  handler: the kernel forces it, and plain the process dies of SIGSEGV; under
  the shim a siglongjmp handler ran and the process exited 0.
- A one-shot handler's backtrace() finds the faulting frame right above the
  signal frame: a frame of libprofshim.so stood between them.

An SA_ONSTACK handler on a thread where the program set no alternate stack
runs on the thread's own stack, as without the shim, not on the shim's
64 KiB one (tests/workloads/onstack_handlers.c).
"""

import os
import re
import signal

from common import check, func_matches, image_files, indent
from st_helpers import prof_env, pprofs, run


def _both(ctx, mode, program="fault_masks"):
    argv = [program, mode]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d))
    check(r.status.key() == plain.status.key() and r.out == plain.out,
          "%s: under the shim %s, stdout:\n%swithout it %s, stdout:\n%s%s" % (
              mode, r.status, indent(r.stdout_text), plain.status, indent(plain.stdout_text), r.describe()))
    check(pprofs(d) == image_files("run") and len(r.summary_lines()) == 1,
          "%s: PROFILE_DIR holds %s\n%s" % (mode, pprofs(d), r.describe()))
    r.prof_dir = d
    return plain, r


def test_sent_fault_signal_stays_pending_while_blocked(ctx):
    plain, r = _both(ctx, "raise")
    check("handler ran: 0, pending: 1" in plain.stdout_text, "plain: %s" % plain.stdout_text)


def test_fault_while_blocked_gets_the_default_action(ctx):
    plain, r = _both(ctx, "jump")
    check(plain.status.is_signal(signal.SIGSEGV), "plain must die of SIGSEGV: %s" % plain.status)


def test_one_shot_handler_backtrace_shows_the_faulting_frame(ctx):
    plain, r = _both(ctx, "trace")
    check("second frame in fault_here: 1" in plain.stdout_text, "plain: %s" % plain.stdout_text)
    check("libprofshim" not in r.stdout_text, "a frame of the shim's:\n%s" % indent(r.stdout_text))


def test_the_shims_alternate_stacks_are_not_the_programs(ctx):
    """sigaltstack() tells the program of no alternate stack where it set
    none, though the shim keeps one on each thread for its own fatal
    handler; a thread that sets its own and switches it off leaves none of
    the shim's behind. 20,000 threads: main and every thread saw the
    shim's stack as theirs, and the process ended with 1.3 GB more address
    space than plain (each replaced stack stayed mapped)."""
    plain = ctx.run_plain(["altstack_views"])
    check(plain.rc == 0 and plain.stdout_text == "main: no alternate stack\n"
          "threads that found none: 20000 of 20000\n", "plain:\n%s" % plain.describe())
    base = int(re.search(r"vmsize_kib (\d+)", plain.err.decode()).group(1))
    for vars in ({}, {"PROFILE_DIR": ctx.mkdtemp("prof"), "PROFILE_HEAP_SAMPLE": "0"}):
        r = ctx.run(["altstack_views"], **vars)
        what = "profiled" if vars else "inert"
        check(r.rc == 0 and r.out == plain.out, "%s: what the program saw differs\n%s" % (what, r.describe()))
        m = re.search(r"vmsize_kib (\d+)", r.err.decode())
        check(m and int(m.group(1)) < base + 256 * 1024, "%s: VmSize %s KiB at the end, plain %d KiB\n%s"
              % (what, m.group(1) if m else "?", base, r.describe()))


def test_an_alternate_stack_set_inside_a_handler(ctx):
    """A handler sets the program's own alternate stack; the kernel puts
    back the shim's, saved at the handler's entry, when it returns; an
    SA_ONSTACK handler then runs on it. The shim had unmapped its stack
    when the program replaced it: SIGSEGV (139) where plain exits 0."""
    plain = ctx.run_plain(["altstack_in_handler"])
    check(plain.rc == 0 and plain.stdout_text == "survived, got SIGUSR2\n", "plain:\n%s" % plain.describe())
    for vars in ({}, {"PROFILE_DIR": ctx.mkdtemp("prof")}):
        r = ctx.run(["altstack_in_handler"], **vars)
        check(r.rc == 0 and r.out == plain.out, "%s:\n%s" % ("profiled" if vars else "inert", r.describe()))


def test_onstack_handlers_with_big_frames_run_on_the_threads_stack(ctx):
    """Handlers installed with SA_ONSTACK (SIGUSR1 raised 320 times, a
    SIGSEGV left by siglongjmp 20 times, on main and on a second thread, both
    computing meanwhile) with a 256 KiB frame, no sigaltstack called: the
    kernel ran them on the shim's 64 KiB alternate stack, their frames ran
    over what lay below it, and the process died of SIGSEGV (plain: exit 0).
    Each handler sees SS_DISABLE and its frame inside its thread's stack, and
    CPU samples land in them, walked through the moved signal frame to the
    code the signal interrupted."""
    plain, r = _both(ctx, "big", "onstack_handlers")
    for who in ("main", "thread"):
        check("%s: handled 320, sum 10695475200, SS_DISABLE in 320, inside its stack 320," % who
              in plain.stdout_text, "plain: %s" % plain.stdout_text)
    prof = ctx.pprof.read(os.path.join(r.prof_dir, "run.cpu.pprof"))
    inside = [s for s in prof.samples if s.stack and func_matches(s.stack[0].name, "on_big")
              and any(func_matches(f.name, "run_big") for f in s.stack)]
    check(inside, "no CPU sample in on_big walked on to run_big:\n%s" % indent(prof.cum_table("cpu")))


def test_onstack_handler_backtrace_shows_the_faulting_frame(ctx):
    """The moved frame is the signal frame backtrace() reads: the frame after
    it is the function whose write faulted, as plain."""
    plain, r = _both(ctx, "trace", "onstack_handlers")
    check("second frame in fault_here: 1" in plain.stdout_text, "plain: %s" % plain.stdout_text)


def test_onstack_handler_with_the_programs_own_alternate_stack(ctx):
    """Where the program set its own alternate stack, the handler runs on it,
    as plain."""
    plain, r = _both(ctx, "own", "onstack_handlers")
    check("handler on the program's alternate stack: 1, SS_ONSTACK: 1" in plain.stdout_text,
          "plain: %s" % plain.stdout_text)
