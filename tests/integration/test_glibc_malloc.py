"""glibc's malloc introspection under the shim (docs/ALLOCATOR.md). While
the heap is profiled mallinfo, mallinfo2, malloc_stats and malloc_info
describe the jemalloc heap that serves the program, malloc_trim gives its
free pages back, and mallopt answers as glibc's does. Inert and with the
heap off they are glibc's own, about glibc's heap. Each compared with the
same program without the shim. Workload: tests/workloads/glibc_introspect.c.
"""

import os
import re
import xml.etree.ElementTree as ET

from common import MiB, check, indent, pct, within


def _fields(r, key):
    m = re.search(r"^%s (.*)$" % re.escape(key), r.stdout_text, re.M)
    check(m, "no %r line:\n%s" % (key, r.describe()))
    return dict(kv.split("=", 1) for kv in m.group(1).split())


def _num(r, key, field):
    return int(_fields(r, key)[field])


def _stats_total_in_use(r):
    text = r.err.decode("utf-8", "replace")
    m = re.search(r"^Total \(incl\. mmap\):\nsystem bytes\s+=\s+(\d+)\nin use bytes\s+=\s+(\d+)\n"
                  r"max mmap regions =\s+\d+\nmax mmap bytes\s+=\s+\d+$", text, re.M)
    check(m, "malloc_stats printed no glibc-format total on stderr:\n%s" % r.describe())
    return int(m.group(2))


def _xml(r):
    path = os.path.join(r.cwd, "malloc_info.xml")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise AssertionError("malloc_info wrote malformed XML (%s):\n%s" % (e, open(path).read()[:3000]))
    return root


def _shape(root):
    """The tags malloc_info emits, in order, without the per-size lines; a
    run of heaps of one shape counts once (the shim's stop thread has an
    arena of its own)."""
    out = [root.tag + str(sorted(root.attrib.items()))]
    for child in root:
        if child.tag == "heap":
            line = "heap[" + ",".join(c.tag + c.attrib.get("type", "") for c in child if c.tag != "sizes") + "]"
        else:
            line = child.tag + child.attrib.get("type", "")
        if line != out[-1]:
            out.append(line)
    return out


def _runs(ctx):
    """The plain run, and the run where the shim's jemalloc serves."""
    plain = ctx.run_plain(["glibc_introspect"])
    check(plain.rc == 0, "glibc_introspect fails without the shim:\n%s" % plain.describe())
    active, _ = ctx.profile(["glibc_introspect"])
    return plain, {"heap profiled": active}


def test_inert_and_heap_off_answer_about_glibcs_heap(ctx):
    """Inert and with PROFILE_HEAP_SAMPLE=0 glibc's malloc serves, and its
    introspection is its own: the held bytes are uordblks + hblkhd (glibc
    counts its separately mapped blocks apart; jemalloc's answer has
    hblkhd 0), malloc_trim and mallopt return what they return without the
    shim."""
    plain = ctx.run_plain(["glibc_introspect"])
    check(plain.rc == 0, "glibc_introspect fails without the shim:\n%s" % plain.describe())
    held = _num(plain, "held", "bytes")
    runs = {"inert": ctx.run(["glibc_introspect"]),
            "heap off": ctx.profile(["glibc_introspect"], PROFILE_HEAP_SAMPLE=0)[0]}
    for mode, r in runs.items():
        check(r.rc == 0, "%s: exit status %s\n%s" % (mode, r.status_text(), r.describe()))
        m = _fields(r, "mallinfo2")
        check(int(m["hblkhd"]) > 0 and within(int(m["uordblks"]) + int(m["hblkhd"]), held, 0.10),
              "%s: mallinfo2 uordblks+hblkhd %s+%s vs held %d: not glibc's heap\n%s"
              % (mode, m["uordblks"], m["hblkhd"], held, r.describe()))
        check(_fields(r, "mallopt") == _fields(plain, "mallopt"),
              "%s: mallopt returns %s, without the shim %s" % (mode, _fields(r, "mallopt"), _fields(plain, "mallopt")))
        check(_fields(r, "trim")["rc"] == _fields(plain, "trim")["rc"],
              "%s: malloc_trim returned %s, without the shim %s" % (mode, _fields(r, "trim"), _fields(plain, "trim")))


def test_mallinfo_and_stats_describe_the_heap_in_use(ctx):
    """mallinfo2().uordblks within 10% of the bytes held (plain glibc counts
    its mmapped blocks in hblkhd instead); malloc_stats' total in use within
    10% as plain's; malloc_info is glibc's XML with the same elements;
    malloc_info(1) fails with EINVAL as glibc's."""
    plain, runs = _runs(ctx)
    held = _num(plain, "held", "bytes")
    pm = _fields(plain, "mallinfo2")
    check(within(int(pm["uordblks"]) + int(pm["hblkhd"]), held, 0.10),
          "plain: mallinfo2 uordblks+hblkhd %s+%s vs held %d: the workload's own check is wrong"
          % (pm["uordblks"], pm["hblkhd"], held))
    plain_shape = _shape(_xml(plain))
    for mode, r in runs.items():
        check(r.rc == 0, "%s: exit status %s\n%s" % (mode, r.status_text(), r.describe()))
        m = _fields(r, "mallinfo2")
        used = int(m["uordblks"])
        check(within(used, held, 0.10), "%s: mallinfo2().uordblks %d, held %d (%s)\n%s"
              % (mode, used, held, pct(used, held), r.describe()))
        check(int(m["arena"]) >= used and int(m["arena"]) == used + int(m["fordblks"]),
              "%s: mallinfo2 arena %s should be uordblks %d + fordblks %s" % (mode, m["arena"], used, m["fordblks"]))
        check(int(m["usmblks"]) == 0, "%s: usmblks is always 0 in glibc" % mode)
        old = _num(r, "mallinfo", "uordblks")
        check(within(old, used, 0.05), "%s: mallinfo().uordblks %d vs mallinfo2's %d" % (mode, old, used))
        total = _stats_total_in_use(r)
        check(within(total, held, 0.10) and within(_stats_total_in_use(plain), held, 0.10),
              "%s: malloc_stats total in use %d (plain %d), held %d" % (mode, total, _stats_total_in_use(plain), held))
        root = _xml(r)
        check(_shape(root) == plain_shape, "%s: malloc_info's elements differ from glibc's:\n%s\nplain:\n%s"
              % (mode, indent("\n".join(_shape(root))), indent("\n".join(plain_shape))))
        current = [int(e.get("size")) for e in root if e.tag == "system" and e.get("type") == "current"]
        check(current and current[0] >= held, "%s: malloc_info system current %s < held %d" % (mode, current, held))
        check(re.search(r"^malloc_info\(1\)=22$", r.stdout_text, re.M),
              "%s: malloc_info(1, fp) should fail with EINVAL (22) as glibc's\n%s" % (mode, r.describe()))


def test_mallopt_answers_as_glibc(ctx):
    """mallopt is glibc's own: the same return value for every option, valid
    or not, as without the shim (jemalloc has no run-time equivalent)."""
    plain, runs = _runs(ctx)
    want = _fields(plain, "mallopt")
    for mode, r in runs.items():
        got = _fields(r, "mallopt")
        check(got == want, "%s: mallopt returns %s, glibc's %s" % (mode, got, want))


def test_malloc_trim_releases_freed_memory(ctx):
    """After 256 MiB of 64 KiB blocks are freed (jemalloc keeps freed pages
    for a decay time; glibc gives the top of its heap back at once),
    malloc_trim(0) returns 1, RSS falls by at least 16 MiB and half of
    what it stood above glibc's, and ends within 32 MiB of where glibc's
    heap ends after the same."""
    plain, runs = _runs(ctx)
    pt = _fields(plain, "trim")
    for mode, r in runs.items():
        t = _fields(r, "trim")
        freed, trimmed = int(t["rss_freed"]), int(t["rss_trimmed"])
        check(t["rc"] == "1", "%s: malloc_trim(0) returned %s after a large free, want 1" % (mode, t["rc"]))
        excess = freed - int(pt["rss_trimmed"])
        check(freed - trimmed >= max(16 * MiB, excess / 2),
              "%s: RSS %.1f MiB after the free, %.1f MiB after malloc_trim(0) (plain ends at %.1f MiB): "
              "want at least max(16 MiB, half the excess) less"
              % (mode, freed / MiB, trimmed / MiB, int(pt["rss_trimmed"]) / MiB))
        check(trimmed <= int(pt["rss_trimmed"]) + 32 * MiB,
              "%s: RSS after malloc_trim %.1f MiB, plain %.1f MiB" % (mode, trimmed / MiB, int(pt["rss_trimmed"]) / MiB))
