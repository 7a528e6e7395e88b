"""A forking server is one program (PROFILE_FORKS=merge, the default): a
forked child that does not exec hands its samples to the image it was
forked from, whose NAME.* hold every process's CPU, waits and allocations
with a pid label; a child that outlives that image, execs, or finds the
hand-over area full writes its own files, and PROFILE_FORKS=own keeps
today's per-child files."""

import os
import re
import signal
import struct

from cli_helpers import profshim
from common import KINDS, check, profile_dir_names
from test_images import MiB, _fork, _lacks, _read_pair

PROG = "fork_many"


def _children(r):
    """{pid: cpu_ns} of the children that reported, and the parent's (pid, cpu_ns) or None."""
    kids = {int(p): int(c) for p, c in re.findall(r"^truth child pid=(\d+) cpu_ns=(\d+)$", r.stdout_text, re.M)}
    m = re.search(r"^truth parent pid=(\d+) cpu_ns=(\d+)$", r.stdout_text, re.M)
    return kids, ((int(m.group(1)), int(m.group(2))) if m else None)


def _by_pid(prof, type_index):
    """{pid: the sum of one sample type} over a profile's samples."""
    out = {}
    for s in prof.samples:
        for line in s.labels:
            m = re.search(r"pid:\[(\d+)\]", line)
            if m:
                pid = int(m.group(1))
                out[pid] = out.get(pid, 0) + s.values[type_index]
    return out


def _merged_line(r):
    lines = [l for l in r.summary_lines() if " | forks " in l]
    check(len(lines) == 1, "want the parent's one line to count its forks\n%s" % r.describe())
    m = re.search(r" \| forks (\d+) merged \(([\d.]+) s cpu, pid labels\)(?:, (\d+) wrote their own)?", lines[0])
    check(m, "the forks segment is not as documented: %s" % lines[0])
    return int(m.group(1)), float(m.group(2)), int(m.group(3) or 0)


def test_two_hundred_children_are_the_programs(ctx):
    r, d = ctx.profile([PROG, "200", "2000", "8"])
    kids, parent = _children(r)
    check(len(kids) == 200 and parent, "the workload should report 200 children and itself\n%s" % r.describe())
    want = sorted("run.%s.pprof" % k for k in KINDS)
    check(profile_dir_names(d) == want, "one set of files and nothing of the children's (no spool left): "
          "want %s, PROFILE_DIR has %s\n%s" % (want, profile_dir_names(d), r.describe()))
    merged, merged_s, fell = _merged_line(r)
    check(merged == 200 and fell == 0, "the line should count 200 merged, none on their own\n%s" % r.describe())
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    per_pid = _by_pid(cpu, cpu.index("cpu"))
    check(set(per_pid) == set(kids) | {parent[0]}, "the CPU profile's pid labels should be the 200 children's and "
          "the parent's: %d labels, %d children missing, %d unknown" % (
              len(per_pid), len(set(kids) - set(per_pid)), len(set(per_pid) - set(kids) - {parent[0]})))
    truth = sum(kids.values()) + parent[1]
    got = cpu.total("cpu")
    # Each process's CPU is its threads' clocks (credited at their ends),
    # so the only loss is what each used after its profile stopped.
    check(got >= 0.9 * truth, "the CPU profile holds %.3f s of the 201 processes' %.3f s (by their own clocks)" % (
        got / 1e9, truth / 1e9))
    check(got <= 1.5 * truth + 0.2e9, "the CPU profile holds %.3f s, more than the processes used (%.3f s)" % (
        got / 1e9, truth / 1e9))
    kids_got = sum(v for p, v in per_pid.items() if p in kids)
    check(kids_got >= 0.9 * sum(kids.values()), "the children's samples hold %.3f s of their %.3f s" % (
        kids_got / 1e9, sum(kids.values()) / 1e9))
    check(abs(merged_s * 1e9 - kids_got) <= 0.5 * kids_got + 0.05e9,
          "the line's merged cpu %.2f s and the children's samples %.3f s disagree" % (merged_s, kids_got / 1e9))
    check(cpu.cum("child_burn", "cpu") > 0, "the children's child_burn is not in the CPU profile\n%s" %
          cpu.cum_table("cpu"))
    heap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    alloc = heap.cum("child_alloc", "alloc_space")
    truth_alloc = 200 * 8 * (64 << 10)
    check(0.5 * truth_alloc <= alloc <= 2 * truth_alloc, "child_alloc's alloc_space %d, the children allocated %d "
          "(sampled)\n%s" % (alloc, truth_alloc, heap.cum_table("alloc_space")))
    check(heap.cum("child_alloc", "inuse_space") == 0, "a child's memory at its end is no part of the parent's "
          "in-use heap\n%s" % heap.cum_table("inuse_space"))
    ls = profshim(ctx, ["ls", d])
    check(ls.rc == 0 and "200 forked processes merged (%.2f s cpu" % merged_s in ls.stdout_text,
          "profshim ls should show the merged processes under their parent's row\n%s" % ls.describe())
    heap_pids = set(_by_pid(heap, heap.index("alloc_space"))) - {parent[0]}
    check(len(heap_pids) >= 50 and heap_pids <= set(kids), "the heap profile should label the children's "
          "allocations with their pids: %d of them" % len(heap_pids))


def test_own_keeps_a_file_set_per_child(ctx):
    r, d = ctx.profile([PROG, "10", "2000", "2"], PROFILE_FORKS="own")
    kids, _ = _children(r)
    names = profile_dir_names(d)
    for pid in kids:
        mine = [n for n in names if ".%s.%d." % (PROG, pid) in n]
        check(len(mine) == len(KINDS), "PROFILE_FORKS=own: child %d should write its own files; has %s" % (pid, mine))
    check(not any(" | forks " in l for l in r.summary_lines()), "own mode merges nothing\n%s" % r.describe())
    check(len(r.summary_lines()) == 11, "own mode: one line per image (11)\n%s" % r.describe())


def test_a_child_that_outlives_its_parent_writes_its_own(ctx):
    # The run ends when the lingering child closes the output it inherited.
    r, d = ctx.profile([PROG, "5", "2000", "2", "linger", "1500"])
    m = re.search(r"^truth lingerer pid=(\d+)$", r.stdout_text, re.M)
    check(m, "the workload did not report its lingering child\n%s" % r.describe())
    lingerer = m.group(1)
    names = profile_dir_names(d)
    mine = [n for n in names if ".%s.%s." % (PROG, lingerer) in n]
    check(len(mine) == len(KINDS), "the child that outlived its parent should write its own files; PROFILE_DIR "
          "has %s\n%s" % (names, r.describe()))
    merged, _, _ = _merged_line(r)
    check(merged == 4, "the 4 children that ended first should be merged, the line says %d" % merged)
    cpu = ctx.read(os.path.join(d, mine[[n.split(".")[-2] for n in mine].index("cpu")]), r)
    check(cpu.cum("child_burn", "cpu") > 0 or cpu.total("cpu") > 0, "the lingerer's own CPU profile is empty")


def test_a_child_that_execs_is_another_program(ctx):
    r, d = ctx.profile([PROG, "3", "2000", "2", "exec", ctx.workload("fork_exec")])
    m = re.search(r"^truth execer pid=(\d+)$", r.stdout_text, re.M)
    check(m, "the workload did not report its exec'ing child\n%s" % r.describe())
    pid = m.group(1)
    names = profile_dir_names(d)
    new = sorted(n for n in names if n.startswith("run.fork_exec.%s." % pid))
    check(len(new) == len(KINDS), "the exec'd program should write its own files; PROFILE_DIR has %s" % names)
    ncpu = ctx.read(os.path.join(d, [n for n in new if n.endswith(".cpu.pprof")][0]), r)
    check(ncpu.cum("after_exec", "cpu") > 0, "the exec'd program's profile lacks after_exec\n%s" %
          ncpu.cum_table("cpu"))
    merged, _, _ = _merged_line(r)
    check(merged == 2, "the two children that did not exec are merged; the line says %d" % merged)
    pcpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    check(pcpu.cum("after_exec", "cpu") == 0, "the exec'd program is in its parent's profile")


def test_a_full_area_leaves_children_their_own_files(ctx):
    n = 30
    r, d = ctx.profile([PROG, str(n), "2000", "4"], PROFILE_FORKS_SPOOL="8K", PROFILE_HEAP_SAMPLE="1")
    kids, parent = _children(r)
    check(len(kids) == n, "the workload should report %d children\n%s" % (n, r.describe()))
    merged, _, fell = _merged_line(r)
    check(fell >= 1 and merged >= 1 and merged + fell == n, "in an 8 KiB area some children fit and the rest "
          "write their own files: %d merged, %d on their own, of %d" % (merged, fell, n))
    names = profile_dir_names(d)
    own = {int(m.group(1)) for m in (re.match(r"run\.%s\.(\d+)\.cpu\.pprof$" % PROG, x) for x in names) if m}
    check(len(own) == fell, "the line says %d wrote their own files, PROFILE_DIR has %d children's CPU files" % (
        fell, len(own)))
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    in_parent = set(_by_pid(cpu, cpu.index("cpu"))) - {parent[0]}
    check(in_parent | own == set(kids) and not (in_parent & own),
          "nothing lost: every child is in the parent's profile or in its own files, once (%d + %d of %d)" % (
              len(in_parent), len(own), n))


def test_sigkill_of_the_parent_keeps_what_children_handed_over(ctx):
    d = ctx.mkdtemp("prof")
    r = ctx.run([ctx.workload(PROG), "4", "2000", "2", "kill", "0"], PROFILE_DIR=d, PROFILE_NAME="run")
    check(r.rc == -signal.SIGKILL, "the workload should die of SIGKILL, got %s\n%s" % (r.status_text(), r.describe()))
    kids, _ = _children(r)
    check(len(kids) == 4, "the workload should report 4 children\n%s" % r.describe())
    spools = [n for n in os.listdir(d) if n.endswith(".spool")]
    check(len(spools) == 1 and spools[0].startswith(".run."), "the hand-over file should stay: %s" % os.listdir(d))
    with open(os.path.join(d, spools[0]), "rb") as f:
        magic, _, owner, _, _, _, _, merged, cpu_ns, fell, _ = struct.unpack("<QIiIIQQQQQQ", f.read(72))
    check(merged == 4 and cpu_ns >= 0.9 * sum(kids.values()), "the file should hold the 4 children (%.3f s): "
          "has %d (%.3f s)" % (sum(kids.values()) / 1e9, merged, cpu_ns / 1e9))
    out = profshim(ctx, ["ls", d])
    check(out.rc == 0 and spools[0] in out.stdout_text and "4 forked processes handed over" in out.stdout_text,
          "profshim ls should list what was kept\n%s" % out.describe())


def _pids(prof, func, t):
    """The pid labels of the samples with func in their stack and t > 0."""
    i, out = prof.index(t), set()
    for s in prof.samples:
        if s.values[i] and any(fr.name == func or fr.name.startswith(func + " ") for fr in s.stack):
            out |= {int(p) for line in s.labels for p in re.findall(r"pid:\[(\d+)\]", line)}
    return out


def test_fork_child_stop_paths_hand_over(ctx):
    """st_fork's children end by exit(3), _exit(4), SIGTERM, and a child
    that forks a grandchild: each stop path hands the child's samples to the
    parent's files under the child's pid (the grandchild's to the same
    image), and what it held at its end is not the parent's memory."""
    for mode, status in (("exit", "exit:3"), ("_exit", "exit:4"), ("term", "signal:15"), ("forkfork", "exit:3")):
        r, d, pid = _fork(ctx, mode, 1, status, forks="merge")
        pcpu, pheap = _read_pair(ctx, d, "run", r)
        what = "the forked child (%s), merged" % mode
        check(_pids(pcpu, "child_burn", "samples") == {pid}, "%s: child_burn should be in run.cpu.pprof under the "
              "child's pid %d alone: %s\n%s" % (what, pid, _pids(pcpu, "child_burn", "samples"), r.describe()))
        check(pid not in _pids(pcpu, "parent_burn", "samples"), "%s: parent_burn under the child's pid" % what)
        if mode == "forkfork":
            m = re.search(r"^grandchild pid=(\d+) status=(\S+)$", r.stdout_text, re.M)
            check(m and _pids(pcpu, "grandchild_burn", "samples") == {int(m.group(1))},
                  "%s: grandchild_burn should be in run.cpu.pprof under the grandchild's pid\n%s" % (
                      what, pcpu.cum_table("samples")))
            continue
        got = pheap.cum("child_hold", "alloc_space")
        check(got >= 0.9 * 8 * MiB and _pids(pheap, "child_hold", "alloc_space") == {pid},
              "%s: the child's 8 MiB at child_hold should be in run.heap.pprof's alloc_space under its pid: "
              "%d\n%s" % (what, got, pheap.cum_table("alloc_space")))
        _lacks(pheap, "child_hold", "the parent (merged)", "inuse_space")


def test_snapshots_and_the_stop_add_up_to_the_children(ctx):
    """With a snapshot a second, each child's samples are in the first set
    written after it handed over and in no other: the numbered CPU profiles
    and the final one add up to the children's CPU (not twice it)."""
    r, d = ctx.profile([PROG, "100", "25000", "2"], PROFILE_INTERVAL="1s", PROFILE_SNAPSHOT_KEEP="1000")
    kids, _ = _children(r)
    files = [n for n in os.listdir(d) if re.match(r"run\.(\d+\.)?cpu\.pprof$", n)]
    check(len(files) >= 2, "want snapshots beside the final CPU profile: %s\n%s" % (files, r.describe()))
    got = 0
    for n in files:
        prof = ctx.read(os.path.join(d, n), r)
        got += sum(v for p, v in _by_pid(prof, prof.index("cpu")).items() if p in kids)
    truth = sum(kids.values())
    check(0.9 * truth <= got <= 1.5 * truth + 0.05e9, "the children's CPU over %d files is %.3f s; they used "
          "%.3f s by their own clocks" % (len(files), got / 1e9, truth / 1e9))
