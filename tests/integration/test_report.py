"""profshim report: one self-contained HTML page that a browser shows
with its call graphs: Debian's headless Chromium renders it, and the
screenshot must show the graph (its hot path is drawn in pprof's red)."""

import os
import re
import shutil
import subprocess

import png
from cli_helpers import profshim
from common import check, communicate_bounded, indent

CHROMIUM = "chromium"


def _graph_red(r, g, b):
    # pprof draws the hottest nodes' borders and edges in #b20000; nothing
    # else in the page is red.
    return r >= 150 and g <= 80 and b <= 80


def _screenshot(ctx, page):
    exe = shutil.which(CHROMIUM)
    check(exe, "chromium is not installed (Debian package chromium; scripts/install-deps installs it)")
    shot = os.path.join(ctx.mkdtemp("shot"), "page.png")
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-dev-shm-usage",  # a container's /dev/shm is often 64 MiB
            "--user-data-dir=" + ctx.mkdtemp("chromium"), "--window-size=1000,2400",
            "--screenshot=" + shot, "file://" + os.path.abspath(page)]
    env = dict(ctx.env(preload=False), HOME=ctx.mkdtemp("home"))
    # Its own process group: a hang guard kills the zygote and renderers
    # too, which would otherwise hold the pipes open past the timeout.
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    # A hang guard only (two screenshots must fit the runner's 120 s per test).
    _, err, hung = communicate_bounded(p, 45)
    check(not hung, "chromium did not finish within 45 s: killed (%s)" % err.decode(errors="replace")[-2000:])
    check(p.returncode == 0 and os.path.isfile(shot), "chromium could not screenshot %s (%d):\n%s" % (
        page, p.returncode, err.decode(errors="replace")[-2000:]))
    return shot


def _report(ctx):
    d = ctx.mkdtemp("prof")
    r = profshim(ctx, ["run", "-d", d, "-n", "demo", "--", ctx.workload("demo")])
    check(r.rc == 0, "demo under profshim run:\n%s" % r.describe())
    # Memory over time comes from another branch's writer (CONTRACT.md,
    # snapshots); a table in its documented shape stands for it here.
    with open(os.path.join(d, "demo.mem.tsv"), "w") as f:
        f.write("time\tseconds\tevent\trss_bytes\theap_allocated_bytes\tallocator_mapped_bytes\theap_peak_bytes\n"
                "1764523000.10\t0.100\tpeak\t1000\t10\t64\t10\n"
                "1764523000.50\t0.500\tsnapshot 1\t3000\t25\t64\t10\n"
                "1764523001.00\t1.000\tstop\t2000\t40\t128\t10\n")
    out = os.path.join(ctx.mkdtemp("out"), "demo.html")
    r = profshim(ctx, ["report", os.path.join(d, "demo"), "-o", out])
    check(r.rc == 0 and os.path.isfile(out) and not r.error_lines(), "profshim report:\n%s" % r.describe())
    return open(out, encoding="utf-8").read(), out


def test_report_is_self_contained_and_has_the_graphs(ctx):
    text, _ = _report(ctx)
    graphs = re.findall(r'<svg class="graph" viewBox="0 0 [\d.]+ [\d.]+"', text)
    check(len(graphs) == 2, "want the CPU and the heap graph inline, found %d" % len(graphs))
    for fn in ("compress_summary", "build_index", "fill_cache"):
        check(fn in text, "%s (the demo's hot functions) should be in the page" % fn)
    fetches = re.findall(r"<(?:script|link|iframe|img|object)\b|\bsrc=|url\(|@import|href=\"(?!#)[^\"]*\"", text)
    check(not fetches, "the page must fetch nothing and run nothing: %s" % sorted(set(fetches)))
    charts = re.findall(r'<figure class="chart"><figcaption>([^<]*)</figcaption>.*?<polyline[^>]* points="([^"]*)"',
                        text, flags=re.S)
    want = ["rss_bytes", "heap_allocated_bytes", "allocator_mapped_bytes", "heap_peak_bytes"]
    check("memory over time" in text and [c[0].split(" ")[0] for c in charts] == want
          and all("(by seconds)" in c[0] and len(c[1].split()) == 3 for c in charts),
          "memory over time: a chart of 3 points by seconds per byte column of demo.mem.tsv, got %s" % charts)


def test_report_renders_its_graph_in_chromium(ctx):
    text, page = _report(ctx)
    shot = _screenshot(ctx, page)
    red, total = png.count(shot, _graph_red)
    other, _ = png.count(shot, lambda r, g, b: r + g + b < 600)
    check(other > total // 100, "the screenshot is blank: %d of %d pixels not white" % (other, total))
    check(red >= 500, "the call graph is not visible: %d of %d pixels in pprof's red (%s)" % (red, total, shot))
    # The control: the same page without its graphs has none of that red,
    # so the red seen above is the graph's.
    bare = os.path.join(os.path.dirname(page), "bare.html")
    open(bare, "w").write(re.sub(r'<svg class="graph".*?</svg>', "", text, flags=re.S))
    red0, _ = png.count(_screenshot(ctx, bare), _graph_red)
    check(red0 < 20, "without the graphs the page still has %d red pixels: the check proves nothing" % red0)
