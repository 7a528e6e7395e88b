"""profshim ls, top and diff on the files of a real process tree; the
stdlib decoder behind ls against go tool pprof's reading."""

import os
import re
import shutil
import sys

from cli_helpers import CLI, diff_table, figure, ls_rows, profshim, tree
from common import check, indent


def _heap_mib(line):
    m = re.search(r" (\d+\.\d) MiB ", line)
    return float(m.group(1)) if m else -1.0


def test_ls_lists_every_image_of_a_fork_exec_tree_once(ctx):
    r, d, stems = tree(ctx)
    check(len(stems) >= 3 and sum(len(v) for v in stems.values()) >= 5,
          "the tree should have 5 images (sh, a parent and its child, an image before and after exec):\n%s"
          % r.describe())
    out = profshim(ctx, ["ls", d])
    check(out.rc == 0 and not out.err, "profshim ls %s:\n%s" % (d, out.describe()))
    rows = ls_rows(out.stdout_text)
    want = sorted(s for v in stems.values() for s in v)
    got = sorted(name for name, _, _, _ in rows)
    check(got == want, "ls should list each image once, as its summary line named it:\nwant %s\ngot  %s\n%s" % (
        want, got, indent(out.stdout_text)))
    for name, _, pid, line in rows:
        check(name in stems.get(int(pid), []), "row %r: pid %s did not write %s" % (line, pid, name))
    check(rows[0][0] == "tree", "the root (tree.*) must come first:\n%s" % indent(out.stdout_text))
    # The forked child holds 8 MiB at child_hold and one 4 KiB block more
    # (stdout's buffer; PROFILE_HEAP_SAMPLE=1 shows exactly these two). Heap
    # in use is sampled: that block is taken in 1 - exp(-4 KiB / 512 KiB) =
    # 0.8% of runs and then counts ~0.5 MiB, so the row says 8.0 or 8.5 MiB.
    child = [n for n, _, _, line in rows if " exit " in line and 8.0 <= _heap_mib(line) <= 9.0]
    check(len(child) == 1, "the forked child stopped by exit holding 8 MiB should be one row:\n%s" % indent(
        out.stdout_text))
    # COMMAND is each image's own command line, from its identity comments:
    # the forked child's is its parent's; exec gives the next image its own.
    by_name = {n: line for n, _, _, line in rows}
    check(by_name["tree"].split("  ")[-1].startswith("/bin/sh -c ")
          and by_name[child[0]].endswith("fork_exec fork")
          and sorted(l.split()[-1] for l in by_name.values() if " exec " in l or "fork_exec after" in l)
          == ["after", "exec"],
          "COMMAND should be each image's argv:\n%s" % indent(out.stdout_text))
    only = profshim(ctx, ["ls", os.path.join(d, child[0])])
    check([n for n, _, _, _ in ls_rows(only.stdout_text)] == [child[0]],
          "ls DIR/NAME lists NAME's image alone:\n%s" % only.describe())


def _decoder():
    sys.path.insert(0, CLI)
    import pprofile
    return pprofile


def test_decoder_agrees_with_pprof(ctx):
    pprofile = _decoder()
    _, d, _ = tree(ctx, "dec")
    files = sorted(f for f in os.listdir(d) if f.endswith(".pprof"))
    check(len(files) >= 8, "too few files to compare: %s" % files)
    for f in files:
        path = os.path.join(d, f)
        mine, theirs = pprofile.read(path), ctx.read(path)
        check(mine.types == theirs.sample_types, "%s: types %s, pprof says %s" % (f, mine.types, theirs.sample_types))
        for t in theirs.sample_types:
            check(mine.total(t.split("/")[0]) == theirs.total(t), "%s: %s total %s, pprof says %s" % (
                f, t, mine.total(t.split("/")[0]), theirs.total(t)))
        check(mine.comments == theirs.comments, "%s: comments %s, pprof says %s" % (f, mine.comments, theirs.comments))
        check(mine.period == theirs.period and mine.samples == len(theirs.samples),
              "%s: period %s/%s, samples %d/%d" % (f, mine.period, theirs.period, mine.samples, len(theirs.samples)))
        marker = pprofile.parse_marker(pprofile.gzip_comment(path))
        check(marker and marker["pid"] > 0 and marker["exe"].startswith("/"), "%s: marker %s" % (f, marker))


def test_ls_shows_other_kinds_and_snapshots(ctx):
    # The wait profile, heap-peak and snapshots come from other branches'
    # writers; copies of real profiles under those names stand for them:
    # what ls must do is group them with their image and show them.
    _, d, stems = tree(ctx, "kinds")
    before = ls_rows(profshim(ctx, ["ls", d]).stdout_text)
    shutil.copy(os.path.join(d, "kinds.heap.pprof"), os.path.join(d, "kinds.heap-peak.pprof"))
    for seq in ("1", "2"):
        shutil.copy(os.path.join(d, "kinds.cpu.pprof"), os.path.join(d, "kinds.%s.cpu.pprof" % seq))
    child = [n for n, _, _, line in before if " exit " in line][0]
    shutil.copy(os.path.join(d, child + ".heap.pprof"), os.path.join(d, child + ".heap-peak.pprof"))
    shutil.copy(os.path.join(d, child + ".cpu.pprof"), os.path.join(d, child + ".3.cpu.pprof"))
    open(os.path.join(d, "kinds.mem.tsv"), "w").write("t_s\trss_bytes\n0\t100\n1\t200\n")
    out = profshim(ctx, ["ls", d])
    rows = {n: line for n, _, _, line in ls_rows(out.stdout_text)}
    check(sorted(rows) == sorted(n for n, _, _, _ in before), "other kinds must not add images:\n%s" % indent(
        out.stdout_text))
    # A snapshot is written without a word: the row names its files.
    check("heap-peak" in rows["kinds"] and "2 snapshots (cpu): kinds.1.* to kinds.2.*" in rows["kinds"]
          and "mem.tsv" in rows["kinds"],
          "the root's row should show heap-peak, 2 snapshots by their files and mem.tsv:\n%s" % indent(
              out.stdout_text))
    check(re.search(r"heap-peak 8\.0 MiB", rows[child]) and "1 snapshot (cpu): %s.3.*" % child in rows[child],
          "the child's heap-peak (8 MiB in use) and its snapshot:\n%s" % indent(out.stdout_text))
    # A CPU snapshot holds the CPU since the one before, the final file the
    # rest: the image's CPU is their sum, and top reads them together.
    one = _decoder().read(os.path.join(d, child + ".cpu.pprof")).total("cpu")
    check(one > 0 and " %.2f s " % (2 * one / 1e9) in rows[child],
          "the child's CPU should be its final file's and its snapshot's, %.2f s twice:\n%s" % (
              one / 1e9, indent(out.stdout_text)))
    r = profshim(ctx, ["top", os.path.join(d, child)])
    m = re.search(r"Showing nodes accounting for .* of ([\d.]+)(ms|s) total", r.stdout_text)
    got = float(m.group(1)) * (1e6 if m.group(2) == "ms" else 1e9) if m else -1
    # pprof prints the total to 3 significant digits (1.17s: 10 ms apart).
    tolerance = 6e6 if m and m.group(2) == "s" else 1e6
    check(r.rc == 0 and "and 1 snapshot\n" in r.stdout_text and abs(got - 2 * one) < tolerance,
          "top DIR/NAME merges the CPU snapshot (%.0f ms twice):\n%s" % (one / 1e6, r.describe()))
    # An image killed before its stop leaves only snapshots.
    for f in os.listdir(d):  # each kind's final file (a wait profile's too), not the snapshot
        if f.startswith(child + ".") and f.endswith(".pprof") and "." not in f[len(child) + 1:-len(".pprof")]:
            os.remove(os.path.join(d, f))
    out = profshim(ctx, ["ls", d])
    rows = {n: line for n, _, _, line in ls_rows(out.stdout_text)}
    check("not stopped (snapshot 3)" in rows.get(child, ""), "an image with only a snapshot:\n%s" % indent(
        out.stdout_text))
    r = profshim(ctx, ["top", os.path.join(d, child)])
    check(r.rc == 0 and "Type: cpu" in r.stdout_text and "child_work" in r.stdout_text,
          "top DIR/NAME of an image that never stopped reads its snapshot:\n%s" % r.describe())


_UNITS = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}


def _bytes(v):
    """pprof's rendering of a byte count (8MB, 8192kB, -8MB) as bytes: its
    unit follows the largest value shown, so a sampled stdio buffer beside
    the 8 MiB turns 8MB into 8192kB."""
    m = re.match(r"^(-?[\d.]+)(B|kB|MB|GB)$", v or "")
    return round(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _cum(text, func):
    for line in text.splitlines():
        v = line.split()
        if len(v) >= 6 and v[-1] == func:
            return v[3]
    return None


def test_top_and_diff_read_real_profiles(ctx):
    _, d, _ = tree(ctx, "td")
    rows = ls_rows(profshim(ctx, ["ls", d]).stdout_text)
    child = [n for n, _, _, line in rows if " exit " in line][0]
    parent = [n for n, _, _, line in rows if "return from main" in line and n != "td" and not
              re.search(r"\.\d+\.\d+$", n)][0]
    r = profshim(ctx, ["top", os.path.join(d, child)])
    check(r.rc == 0 and "== cpu:" in r.stdout_text and "== heap:" in r.stdout_text,
          "top DIR/NAME shows each kind:\n%s" % r.describe())
    cpu, heap = r.stdout_text.split("== heap:")
    check(_cum(cpu, "child_work") and _bytes(_cum(heap, "child_hold")) == 8 << 20,
          "the child burns in child_work and holds 8 MiB at child_hold:\n%s" % indent(r.stdout_text))
    r = profshim(ctx, ["top", d])
    check(r.rc == 0 and "== cpu: %s" % os.path.join(d, "td.cpu.pprof") in r.stdout_text,
          "top DIR reads the root's files:\n%s" % r.describe())
    root_cpu = os.path.join(d, "td.cpu.pprof")
    r = profshim(ctx, ["diff", d, d])
    check(r.rc == 0 and "== cpu: %s -> %s" % (root_cpu, root_cpu) in r.stdout_text,
          "diff DIR DIR compares the roots' files:\n%s" % r.describe())
    # A directory without its root's files says so and names the way out.
    rootless = ctx.mkdtemp("rootless")
    for f in os.listdir(d):
        if f.startswith(child + "."):
            shutil.copy(os.path.join(d, f), rootless)
    r = profshim(ctx, ["top", rootless])
    check(r.rc == 66 and len(r.error_lines()) == 1 and "profshim ls" in r.error_lines()[0],
          "top on a directory without a root:\n%s" % r.describe())
    r = profshim(ctx, ["top", "-i", "alloc_space", "-n", "3", os.path.join(d, child + ".heap.pprof")])
    check(r.rc == 0 and "Type: alloc_space" in r.stdout_text, "top -i FILE:\n%s" % r.describe())
    # Every node (-n): pprof lists those with no flat time by name after the
    # rest, and a child with samples in a few more functions (a page fault
    # in memset, its exit) pushed parent_work past the default 20.
    r = profshim(ctx, ["diff", "-n", "1000", os.path.join(d, child), os.path.join(d, parent), "--"])
    check(r.rc == 0, "diff:\n%s" % r.describe())
    shares = diff_table(r.stdout_text)
    check(shares["cpu"]["child_work"][0] == "CHANGED" and figure(shares["cpu"]["child_work"][1][6]) < 0
          and shares["cpu"]["parent_work"][0] == "CHANGED" and figure(shares["cpu"]["parent_work"][1][6]) > 0,
          "from the child to the parent, child_work's share falls and parent_work's rises:\n%s" % indent(r.stdout_text))
    r = profshim(ctx, ["diff", "--abs", os.path.join(d, child), os.path.join(d, parent)])
    held = diff_table(r.stdout_text)["heap"].get("child_hold", ("", [""] * 8))
    check(r.rc == 0 and figure(held[1][6]) == -(8 << 20) and held[0] == "CHANGED",
          "the 8 MiB the child held are gone (one block larger than the sample interval: exact):\n%s" % r.describe())
    # pprof's own difference, its options after --.
    r = profshim(ctx, ["diff", "-n", "1000", os.path.join(d, child), os.path.join(d, parent), "--", "-normalize"])
    check(r.rc == 0, "diff:\n%s" % r.describe())
    cpu, heap = r.stdout_text.split("== heap:")
    check("(-base)" in cpu and "(-diff_base)" in heap, "CPU by -base, heap by -diff_base:\n%s" % indent(r.stdout_text))
    check((_cum(cpu, "child_work") or "").startswith("-") and not (_cum(cpu, "parent_work") or "-").startswith("-"),
          "from the child to the parent, child_work falls and parent_work rises:\n%s" % indent(cpu))


def test_without_go_ls_works_and_the_others_say_what_to_install(ctx):
    _, d, _ = tree(ctx, "nogo")
    nogo = os.path.join(d, "nogo")
    for cmd in (["top", nogo], ["diff", nogo, nogo, "--", "-normalize"], ["report", d]):
        r = profshim(ctx, cmd, PROFSHIM_GO="/nonexistent/go")
        errs = r.error_lines()
        check(r.rc == 69 and len(errs) == 1 and "golang-go" in errs[0],
              "%s without Go: want 69 and one line naming golang-go:\n%s" % (cmd[0], r.describe()))
    # ls never starts go: a go first on PATH that leaves a mark is not run.
    fake = ctx.mkdtemp("fakego")
    mark = os.path.join(fake, "ran")
    with open(os.path.join(fake, "go"), "w") as f:
        f.write("#!/bin/sh\ntouch %s\nexit 1\n" % mark)
    os.chmod(os.path.join(fake, "go"), 0o755)
    env = ctx.env(preload=False)
    env.pop("PROFSHIM_GO", None)
    env["PATH"] = fake + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    r = profshim(ctx, ["ls", d], env=env)
    check(r.rc == 0 and ls_rows(r.stdout_text) and not os.path.exists(mark), "ls needs no Go:\n%s" % r.describe())
    r = profshim(ctx, ["diff", nogo, nogo], env=dict(env))
    check(r.rc == 0 and diff_table(r.stdout_text).get("cpu") and not os.path.exists(mark),
          "diff reads the files itself and needs no Go:\n%s" % r.describe())
    r = profshim(ctx, ["top", os.path.join(d, "nogo.cpu.pprof")], env=dict(env))
    check(os.path.exists(mark) and r.rc != 0, "top should have run the go on PATH (the check's premise):\n%s"
          % r.describe())


def test_ls_of_a_missing_directory_says_so(ctx):
    # DIR/NAME and a DIR that is not there look alike; with no NAME.* files
    # beside it, the operator meant a directory, and it is missing.
    base = ctx.mkdtemp("ls")
    for arg in (os.path.join(base, "no-such-dir"), os.path.join(base, "no", "such", "dir")):
        r = profshim(ctx, ["ls", arg])
        errs = r.error_lines()
        check(r.rc != 0 and len(errs) == 1 and arg in errs[0] and "does not exist" in errs[0] and not r.out,
              "profshim ls %s: want one line saying the directory does not exist:\n%s" % (arg, r.describe()))
