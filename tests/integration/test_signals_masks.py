"""Signal masks as programs set them, each run compared with a plain run
(tests/workloads/sig_habits.c, review_habits.c): every thread is sampled
whatever its mask (worker pools that block every signal, sigwait threads);
the shim's signal is its own -- the program can neither block nor wait for
it, and its mask queries answer as without the shim.
"""

import os
import shutil

from common import Skip, check
from sig_helpers import both, both_same, masked_threads_sampled, same_as_plain
from st_helpers import prof_env, run


def test_workers_created_with_every_signal_blocked_are_sampled(ctx):
    """liblzma's habit: pthread_sigmask(SIG_SETMASK, all) around
    pthread_create, so the workers start with a full mask; each still asks
    its mask and sees SIGRTMAX-4 blocked, as without the shim."""
    masked_threads_sampled(ctx, "lzma", ["lzma-0", "lzma-1"])


def test_signal_thread_program_is_sampled_and_gets_its_signal(ctx):
    """The "signal thread" idiom: main blocks everything, one thread loops on
    sigwaitinfo(full set), workers burn. The workers are sampled, and the
    signal thread gets SIGUSR1 (10), never one of the shim's."""
    masked_threads_sampled(ctx, "sigthread", ["sigthr-0", "sigthr-1"])


def test_threads_started_with_attr_sigmask_are_sampled(ctx):
    """pthread_attr_setsigmask_np(full set)."""
    plain = run(ctx, ["sig_habits", "attrmask"], env=ctx.env(preload=False))
    if plain.stdout_text.startswith("no pthread_attr_setsigmask_np"):
        raise Skip(plain.stdout_text.strip())
    masked_threads_sampled(ctx, "attrmask", ["attr-0", "attr-1"])


def test_threads_that_block_everything_later_are_sampled(ctx):
    """pthread_sigmask(SIG_BLOCK, all) later in the thread's life."""
    masked_threads_sampled(ctx, "later", ["later-0", "later-1"])


def test_sigwait_on_a_full_set_gets_the_programs_signal(ctx):
    """Every signal blocked, alarm(1), sigwait(full set): SIGALRM (14), as
    without the shim -- not the shim's SIGRTMAX-4 (the profile of its 0.3 s
    burn is taken meanwhile at 1000 Hz)."""
    plain, r, d = both(ctx, ["sig_habits", "sigwait_alarm"], PROFILE_CPU_HZ=1000)
    same_as_plain(plain, r, "sigwait_alarm")
    check("sigwait got 14" in r.stdout_text, "sigwait should get SIGALRM\n%s" % r.describe())


def test_xz_threads_are_sampled(ctx):
    """xz -T2 (liblzma blocks every signal around pthread_create): the CPU
    profile holds nearly all of xz's CPU, as its rusage says (it held 0.4%)."""
    xz = shutil.which("xz")
    check(xz, "xz not found (install-deps installs xz-utils)")
    cwd = ctx.mkdtemp("cwd")
    data = os.path.join(cwd, "data")
    with open(data, "wb") as f:
        seed = 12345
        chunk = bytearray()
        for i in range(1 << 20):
            seed = (seed * 1103515245 + 12345) & 0x7fffffff
            chunk.append(97 + (seed >> 16) % 16)
        for _ in range(6):
            f.write(chunk)
    d = ctx.mkdtemp("prof")
    r = run(ctx, [xz, "-T2", "-6", "-k", "-f", data], env=prof_env(ctx, d), cwd=cwd, timeout=120)
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    total = prof.total("cpu") / 1e9
    check(total >= 0.8 * r.cpu, "xz used %.2f s of CPU (rusage); its profile holds %.2f s\n%s" % (
        r.cpu, total, prof.cum_table("cpu")))


def test_program_waits_for_the_shims_signal_number_in_sigsuspend(ctx):
    """The program blocks SIGRTMAX-4, sends it to itself, and waits in
    sigsuspend with its old mask: its handler runs once (it livelocked:
    100,000 sigsuspend returns, the handler never ran)."""
    both_same(ctx, ["review_habits", "sigsuspend_own"], timeout=30)


def test_sighold_and_sigrelse_of_the_shims_signal_number(ctx):
    """sighold, raise, sigrelse: the handler runs after the release."""
    both_same(ctx, ["review_habits", "sigrelse_own"])
