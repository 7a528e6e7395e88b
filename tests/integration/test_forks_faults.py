"""The fork hand-over (PROFILE_FORKS=merge) where things go wrong: a full
file system, a period so long the heap's per-child skip was seconds. The
program lives as without the shim, and no child is counted twice or lost
from the owner's line."""

import os
import re
import subprocess

from common import check

PROG = "fork_many"


def _small_tmpfs(ctx, size):
    mnt = ctx.mkdtemp("tmpfs")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,nr_inodes=1000" % size, "tmpfs", mnt],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(p.returncode == 0, "cannot mount a small tmpfs to make a full disk (needs root): %s" %
          p.stdout.decode(errors="replace"))
    return mnt


def _fill(path):
    """Writes path until the file system has no room left."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def _kids(r):
    return re.findall(r"^truth child pid=(\d+) ", r.stdout_text, re.M)


def test_a_full_file_system_at_the_first_fork(ctx):
    """The area's header was written through the mapping of a sparse file:
    on a full file system the first fork died of SIGBUS. Now there is no
    area, and the program runs as without the shim."""
    mnt = _small_tmpfs(ctx, "256k")
    try:
        d = os.path.join(mnt, "prof")
        os.mkdir(d)
        _fill(os.path.join(mnt, "fill"))
        r, _ = ctx.profile([PROG, "3", "2000", "1"], dir=d, expect_rc=0)
        check(len(_kids(r)) == 3, "the workload should report 3 children\n%s" % r.describe())
        check(not [n for n in os.listdir(d) if n.endswith(".spool")], "no area on a full disk: %s" % os.listdir(d))
    finally:
        subprocess.run(["umount", "-l", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_room_for_the_area_but_not_for_every_child(ctx):
    """Room for the area's header and a few blobs: a child whose blob finds
    no room on disk (its pwrite fails, where a store into the mapping was
    SIGBUS) writes its own files; every child is either merged or counted
    as on its own in the owner's line."""
    mnt = _small_tmpfs(ctx, "2m")
    try:
        d = os.path.join(mnt, "prof")
        os.mkdir(d)
        gap = os.path.join(mnt, "gap")
        with open(gap, "wb") as f:
            f.write(b"\0" * (524 << 10))  # the area's header and index are 516 KiB
        _fill(os.path.join(mnt, "fill"))
        os.unlink(gap)
        n = 12
        r, _ = ctx.profile([PROG, str(n), "2000", "4"], dir=d, expect_rc=0, PROFILE_HEAP_SAMPLE="1")
        check(len(_kids(r)) == n, "the workload should report %d children\n%s" % (n, r.describe()))
        m = re.search(r" \| forks (\d+) merged \([\d.]+ s cpu, pid labels\), (\d+) wrote their own", r.err.decode("utf-8", "replace"))
        check(m, "the owner's line should count children on their own\n%s" % r.describe())
        merged, fell = int(m.group(1)), int(m.group(2))
        check(merged + fell == n and fell >= 1, "every child merged or on its own: %d + %d of %d\n%s" % (
            merged, fell, n, r.describe()))
    finally:
        subprocess.run(["umount", "-l", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_the_longest_heap_period_forks_at_once(ctx):
    """A merged child moves its heap sampler by a pid-seeded amount: in
    64 KiB steps up to 8 periods that was ~30 s per fork at the longest
    period (the run's 60 s guard caught it). Now at most 64 steps."""
    r, d = ctx.profile([PROG, "3", "2000", "1"], PROFILE_HEAP_SAMPLE=str(1 << 40))
    check(len(_kids(r)) == 3, "the workload should report 3 children\n%s" % r.describe())
    check(" | forks 3 merged" in r.err.decode("utf-8", "replace"), "the 3 children should be merged\n%s" % r.describe())
