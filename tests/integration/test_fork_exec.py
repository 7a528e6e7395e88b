"""Process images: a forked child (PROFILE_FORKS=own; test_forks_merge.py
has the default, merge) and the image before an execve each write their own
files (named with program name and pid), the root process's final image
writes NAME.*, and no image overwrites another's."""

import os
import re

from common import KINDS, check, indent

PROG = "fork_exec"


def _pid(r, label):
    m = re.search(r"^%s pid=(\d+)" % label, r.stdout_text, re.M)
    check(m, "workload did not report the %s pid\n%s" % (label, r.describe()))
    return m.group(1)


def _other_images(d, name="run"):
    root = {"%s.%s.pprof" % (name, k) for k in KINDS}
    return sorted(n for n in os.listdir(d) if n.endswith(".pprof") and n not in root)


def _image_files(ctx, d, pid, r, what):
    others = _other_images(d)
    mine = [n for n in others if pid in n and PROG in n]
    check(sorted(n.split(".")[-2] for n in mine) == sorted(KINDS),
          "%s (pid %s) should write its own file of each kind, named with %r and its pid; PROFILE_DIR has "
          "%s\n%s" % (what, pid, PROG, sorted(os.listdir(d)), r.describe()))
    cpu = [os.path.join(d, n) for n in mine if n.endswith(".cpu.pprof")][0]
    heap = [os.path.join(d, n) for n in mine if n.endswith(".heap.pprof")][0]
    return ctx.read(cpu, r), ctx.read(heap, r)


def test_fork_child_profiles_itself(ctx):
    r, d = ctx.profile([PROG, "fork"], PROFILE_FORKS="own")
    child = _pid(r, "child")
    ccpu, cheap = _image_files(ctx, d, child, r, "the forked child")
    pcpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    pheap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    check(pcpu.cum("parent_work", "samples") > 0 and pcpu.cum("child_work", "samples") == 0,
          "the parent's CPU profile must have parent_work and not child_work\n%s" % pcpu.cum_table("samples"))
    check(ccpu.cum("child_work", "samples") > 0 and ccpu.cum("parent_work", "samples") == 0,
          "the child's CPU profile must have child_work and not the parent's parent_work (it profiles "
          "itself from the fork on)\n%s" % ccpu.cum_table("samples"))
    got = cheap.cum("child_hold", "inuse_space")
    check(got >= 0.9 * (8 << 20), "the child's heap profile should hold 8 MiB at child_hold, has %d\n%s" % (
        got, cheap.cum_table("inuse_space")))
    check(pheap.cum("child_hold", "inuse_space") == 0, "the child's allocation is in the parent's heap profile")
    summaries = r.summary_lines()
    check(len(summaries) == 2, "want one summary line per image (2), got %d\n%s" % (len(summaries), r.describe()))
    named = sorted(r.named_files())
    want = sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".pprof"))
    check(named == want, "the summary lines name %s; files written: %s" % (named, want))


def test_exec_writes_the_old_image(ctx):
    r, d = ctx.profile([PROG, "exec"])
    pid = _pid(r, "before-exec")
    check(_pid(r, "after-exec") == pid, "exec changed the pid?\n%s" % r.describe())
    ocpu, oheap = _image_files(ctx, d, pid, r, "the image before execve")
    ncpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    nheap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    check(ocpu.cum("before_exec", "samples") > 0 and ocpu.cum("after_exec", "samples") == 0,
          "the pre-exec image's CPU profile should have before_exec only\n%s" % ocpu.cum_table("samples"))
    check(ncpu.cum("after_exec", "samples") > 0 and ncpu.cum("before_exec", "samples") == 0,
          "the final image's run.cpu.pprof should have after_exec only\n%s" % ncpu.cum_table("samples"))
    got = oheap.cum("hold_before_exec", "inuse_space")
    check(got >= 0.9 * (8 << 20), "pre-exec heap profile: hold_before_exec holds 8 MiB, shows %d\n%s" % (
        got, indent(oheap.cum_table("inuse_space"))))
    got = nheap.cum("hold_after_exec", "inuse_space")
    check(got >= 0.9 * (4 << 20), "final heap profile: hold_after_exec holds 4 MiB, shows %d\n%s" % (
        got, indent(nheap.cum_table("inuse_space"))))
    check(len(r.summary_lines()) == 2, "want one summary line per image (2)\n%s" % r.describe())
