"""Language runtimes under the shim, each run compared with a plain run of
the same program.

C++ exceptions: a CPU sample may land while the program's unwinder installs
a landing pad's context, where the unwind information is wrong for a few
instructions; the sampler's walk must stop there, never follow it into
memory that holds no frame (tests/workloads/throw_deep.cc, and
wild_unwind.c, which stays in such code). Ruby: it frees its alternate
signal stack, then re-raises a signal at its default action, which runs no
handler without the shim; the shim's stand-in for that default must not
run on the freed stack (altstack_gone.c does the same without Ruby).
"""

import shutil
import signal

from common import Skip, check, image_files, indent
from st_helpers import pprofs, prof_env, run, start

RUBY_LOOP = 'STDOUT.sync = true; puts "up"; loop { 1 + 1 }'
FILES = image_files("run")


def _program_lines(r):
    return [l for l in r.stderr_lines if not l.startswith("# profshim: ")]


def _same_as_plain(plain, r, what, said=_program_lines):
    """Status and stdout as plain; stderr too, as `said` reads it."""
    check(r.status.key() == plain.status.key(), "%s: under the shim the process %s, without it %s\n%s" % (
        what, r.status, plain.status, r.describe()))
    check(r.stdout_text == plain.stdout_text, "%s: stdout differs.\nwithout:\n%s\nwith:\n%s" % (
        what, indent(plain.stdout_text), indent(r.stdout_text)))
    check(said(r) == said(plain), "%s: the program's stderr differs.\nwithout:\n%s\nwith:\n%s" % (
        what, indent("\n".join(_program_lines(plain))), indent("\n".join(_program_lines(r)))))


def _cpu_profile(ctx, d, r, what):
    check(pprofs(d) == FILES and len(r.summary_lines()) == 1, "%s: PROFILE_DIR holds %s\n%s" % (
        what, pprofs(d), r.describe()))
    return ctx.read(d + "/run.cpu.pprof", r)


def _profiled_runs(ctx, argv, runs):
    """runs profiled runs of argv at 1000 Hz, each as plain: (what, d, r, its CPU profile) each."""
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(0), "the plain run failed: %s\n%s" % (plain.status, plain.describe()))
    for i in range(runs):
        d = ctx.mkdtemp("prof")
        r = run(ctx, argv, env=prof_env(ctx, d, PROFILE_CPU_HZ=1000))
        what = "%s run %d" % (argv[0], i)
        _same_as_plain(plain, r, what)
        yield what, d, r, _cpu_profile(ctx, d, r, what)


def test_throwing_cpp_program_sampled_at_1000_hz_runs_as_plain(ctx):
    for what, d, r, prof in _profiled_runs(ctx, ["throw_deep", "1"], 5):
        n = prof.index("samples/count")
        total = sum(s.values[n] for s in prof.samples)
        # Samples in the unwinder are walked, not cut off at the leaf:
        # nearly all reach the program's main.
        to_main = sum(s.values[n] for s in prof.samples if any(f.name == "main" for f in s.stack))
        check(total > 0 and to_main >= 0.9 * total, "%s: %d of %d samples reach main\n%s" % (
            what, to_main, total, ctx.top(d + "/run.cpu.pprof")))


def test_code_with_wrong_unwind_information_is_sampled_without_a_crash(ctx):
    for what, d, r, prof in _profiled_runs(ctx, ["wild_unwind", "0.3"], 3):
        check(prof.frames_of("spin_wild"), "%s: no sample in spin_wild\n%s" % (what, ctx.top(d + "/run.cpu.pprof")))
        check("stacks cut short" in r.summary_lines()[0], "%s: the summary does not count the cut stacks:\n%s" % (
            what, r.summary_lines()[0]))


def test_program_whose_alternate_stack_is_gone_dies_of_its_signal(ctx):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        argv = ["altstack_gone", str(int(sig))]
        plain = run(ctx, argv, env=ctx.env(preload=False))
        check(plain.status.is_signal(sig), "the plain run must die of %s: %s" % (sig.name, plain.status))
        for hz in (0, 100):
            d = ctx.mkdtemp("prof")
            r = run(ctx, argv, env=prof_env(ctx, d, PROFILE_CPU_HZ=hz))
            _same_as_plain(plain, r, "%s at %d Hz" % (sig.name, hz))


def _ruby_said(r):
    """What Ruby's report of the signal says, without where it was: on
    SIGINT it prints the Interrupt with a backtrace of wherever the signal
    found it (`write`, `loop`, the block; with or without a line of its own
    first), which differs from run to run without the shim too."""
    return sorted(set(l.rsplit(": ", 1)[-1] for l in _program_lines(r) if not l.startswith("\t")))


def _ruby_until(ctx, sig, env):
    p = start(ctx, [shutil.which("ruby"), "-e", RUBY_LOOP], env=env)
    p.wait_for("^up$")
    p.kill(sig)
    return p.wait(60)


def test_ruby_dies_of_the_signal_it_handles_as_plain(ctx):
    ruby = shutil.which("ruby")
    if not ruby:
        raise Skip("no ruby (scripts/install-deps installs it)")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        plain = _ruby_until(ctx, sig, ctx.env(preload=False))
        check(plain.status.is_signal(sig), "plain ruby must die of %s: %s" % (sig.name, plain.status))
        for i in range(2):
            d = ctx.mkdtemp("prof")
            r = _ruby_until(ctx, sig, prof_env(ctx, d))
            what = "ruby, %s, run %d" % (sig.name, i)
            _same_as_plain(plain, r, what, said=_ruby_said)
            check(pprofs(d) == FILES and len(r.summary_lines()) == 1, "%s: PROFILE_DIR holds %s\n%s" % (
                what, pprofs(d), r.describe()))
