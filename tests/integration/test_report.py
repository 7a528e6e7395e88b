"""profshim report: one self-contained HTML page that a browser shows
with its flame graphs, tables and call graphs: Debian's headless Chromium
renders it; the screenshot must show the graph (its hot path is drawn in
pprof's red), and a probe run in the rendered page measures the flame
graphs, the tables and the contents (what a reader sees, not the source)."""

import html
import json
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
    shot = os.path.join(ctx.mkdtemp("shot"), "page.png")
    _chromium(ctx, page, "--screenshot=" + shot)
    check(os.path.isfile(shot), "chromium wrote no screenshot of %s" % page)
    return shot


def _chromium(ctx, page, action):
    """Runs headless Chromium on page with action (--screenshot=F,
    --dump-dom); its stdout."""
    exe = shutil.which(CHROMIUM)
    check(exe, "chromium is not installed (Debian package chromium; scripts/install-deps installs it)")
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-dev-shm-usage",  # a container's /dev/shm is often 64 MiB
            "--user-data-dir=" + ctx.mkdtemp("chromium"), "--window-size=1000,2400",
            action, "file://" + os.path.abspath(page)]
    env = dict(ctx.env(preload=False), HOME=ctx.mkdtemp("home"))
    # Its own process group: a hang guard kills the zygote and renderers
    # too, which would otherwise hold the pipes open past the timeout.
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    # A hang guard only (two screenshots must fit the runner's 120 s per test).
    out, err, hung = communicate_bounded(p, 45)
    check(not hung, "chromium did not finish within 45 s: killed (%s)" % err.decode(errors="replace")[-2000:])
    check(p.returncode == 0, "chromium could not render %s (%d):\n%s" % (
        page, p.returncode, err.decode(errors="replace")[-2000:]))
    return out.decode("utf-8", "replace")


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
    fetches = re.findall(r"<(?:link|iframe|img|object)\b|\bsrc=|url\(|@import|href=\"(?!#)[^\"]*\"", text)
    check(not fetches, "the page must fetch nothing: %s" % sorted(set(fetches)))
    scripts = re.findall(r"<script\b[^>]*>", text)
    check(scripts == ["<script>"], "one inline script (the flame graphs' zoom), no more: %s" % scripts)
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


# Run in the rendered page (appended to a copy of it): what a reader sees,
# measured, written into the DOM that --dump-dom prints. It clicks one
# flame frame (ZOOM_CLICK) to check the zoom.
PROBE = r"""<script>(function () {
  function box(e) { var b = e.getBoundingClientRect(); return {w: b.width, h: b.height}; }
  var r = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth};
  r.flames = Array.from(document.querySelectorAll("svg.flame")).map(function (s) {
    return {kind: s.dataset.kind, w: box(s).w, inBase: !!s.closest("#base-section"),
            fills: Array.from(new Set(Array.from(s.querySelectorAll("rect")).map(function (x) { return x.getAttribute("fill"); }))),
            frames: Array.from(s.querySelectorAll("g.f")).map(function (g) {
              return {n: g.dataset.n, d: +g.dataset.d, w: box(g.querySelector("rect")).w,
                      label: g.querySelector("text").textContent, title: g.querySelector("title").textContent};
            })};
  });
  r.tables = Array.from(document.querySelectorAll("table.t")).map(function (t) {
    return {cls: t.className, w: box(t).w,
            clipped: Array.from(t.querySelectorAll("td.fn")).filter(function (c) { return c.scrollWidth > c.clientWidth + 1; }).length,
            rows: Array.from(t.rows).slice(1).map(function (row) {
              return {cls: row.className, cells: Array.from(row.cells).map(function (c) { return c.textContent; }),
                      title: (row.querySelector("td.fn[title]") || {title: ""}).title};
            })};
  });
  r.toc = Array.from(document.querySelectorAll("nav.toc a")).map(function (a) {
    var id = a.getAttribute("href").slice(1), t = document.getElementById(id);
    return [id, !!t && box(t).h > 0];
  });
  var g = Array.from(document.querySelectorAll("svg.flame g.f")).filter(function (x) { return x.dataset.n === ZOOM_CLICK; })[0];
  if (g) {
    var before = box(g.querySelector("rect")).w, svg = g.closest("svg");
    g.querySelector("rect").dispatchEvent(new MouseEvent("click", {bubbles: true}));
    r.zoom = {before: before, after: box(g.querySelector("rect")).w, svg: box(svg).w,
              hidden: svg.querySelectorAll("g.f.hide").length, label: g.querySelector("text").textContent};
  }
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(r);
  document.body.appendChild(pre);
})();</script>"""


def _probe(ctx, page, click):
    probed = page + ".probe.html"
    text = open(page, encoding="utf-8").read()
    with open(probed, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", PROBE.replace("ZOOM_CLICK", json.dumps(click)) + "</body>"))
    dom = _chromium(ctx, probed, "--dump-dom")
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    check(m, "the probe wrote nothing into the rendered page:\n%s" % indent(dom[-3000:]))
    return json.loads(html.unescape(m.group(1)))


def _frames(probe, kind):
    fl = [f for f in probe["flames"] if f["kind"] == kind and not f["inBase"]]
    return fl[0]["frames"] if fl else []


def test_report_of_a_cpp_program_reads_well_in_the_browser(ctx):
    d = ctx.mkdtemp("prof")
    r = profshim(ctx, ["run", "-d", d, "-n", "cc", "--", ctx.workload("report_cc")])
    check(r.rc == 0, "report_cc under profshim run:\n%s" % r.describe())
    page = os.path.join(ctx.mkdtemp("out"), "cc.html")
    r = profshim(ctx, ["report", os.path.join(d, "cc"), "-o", page])
    check(r.rc == 0 and not r.error_lines(), "profshim report:\n%s" % r.describe())
    click = "shop::Ledger<\u2026>::sort_rows()"
    p = _probe(ctx, page, click)
    check(p["scrollWidth"] <= p["innerWidth"], "the page scrolls sideways: %d wide in a %d window" % (
        p["scrollWidth"], p["innerWidth"]))
    for kind in ("cpu", "heap", "wait"):
        drawn = [f for f in _frames(p, kind) if f["w"] > 0]
        check(len(drawn) >= 5, "the %s flame graph draws %d frames" % (kind, len(drawn)))
    cpu = {f["n"]: f for f in _frames(p, "cpu")}
    for short, full in ((click, "shop::Ledger<unsigned long, std::__cxx11::basic_string<"),
                        ("void shop::fill_index<\u2026>(\u2026)", "void shop::fill_index<std::unordered_map<")):
        f = cpu.get(short)
        check(f and f["w"] > 100 and f["label"].startswith(short[:12]) and full in f["title"],
              "%s: a frame over 100 px wide, labelled short, the full name on hover: %s" % (short, f))
    check(not any("<" in f["label"] and "\u2026" not in f["label"] for f in cpu.values()),
          "flame labels carry template arguments: %s" % [f["label"] for f in cpu.values() if "<" in f["label"]][:5])
    z = p.get("zoom") or {}
    check(z and z["after"] > z["svg"] * 0.95 > z["before"] and z["hidden"] > 0 and z["label"] == click,
          "a click zooms %s to the graph's width: %s" % (click, z))
    tops = [t for t in p["tables"] if "top" in t["cls"]]
    check(len(tops) == 3 and all(t["rows"] and t["w"] <= p["innerWidth"] and not t["clipped"] for t in tops),
          "three top tables, none wider than the window, no function cut off: %s" % [
              (t["w"], t["clipped"], len(t["rows"])) for t in tops])
    titled = [row for t in tops for row in t["rows"] if row["title"]]
    check(titled and all("\u2026" in row["cells"][-1] and len(row["title"]) > len(row["cells"][-1]) for row in titled),
          "shortened names in the tables keep the full one on hover: %s" % titled[:3])
    threads = [t for t in p["tables"] if "threads" in t["cls"]]
    rows = {row["cells"][0]: row["cells"] for row in (threads[0]["rows"] if threads else [])}
    check(set(rows) >= {"parser", "hasher", "report_cc"} and rows["report_cc"][3] not in ("0", "")
          and rows["parser"][1] not in ("0", ""),
          "a table of CPU and waits by thread (parser and hasher burn, report_cc waits): %s" % rows)
    check(len(p["toc"]) >= 5 and all(ok for _, ok in p["toc"]), "every contents link leads somewhere: %s" % p["toc"])
    check(set(x for x, _ in p["toc"]) >= {"images", "img-cc-cpu", "img-cc-heap", "img-cc-wait", "img-cc-threads"},
          "the contents name each kind and the threads: %s" % p["toc"])


def test_report_with_a_base_shows_the_change(ctx):
    d = ctx.mkdtemp("prof")
    for sub, args in (("old", ["cpu", "1"]), ("new", ["cpu", "1", "8"])):
        r = profshim(ctx, ["run", "-d", os.path.join(d, sub), "-n", "mix", "--", ctx.workload("diff_mix")] + args)
        check(r.rc == 0, "diff_mix under profshim run:\n%s" % r.describe())
    page = os.path.join(ctx.mkdtemp("out"), "change.html")
    r = profshim(ctx, ["report", "--base", os.path.join(d, "old", "mix"), os.path.join(d, "new", "mix"), "-o", page])
    check(r.rc == 0 and not r.error_lines(), "profshim report --base:\n%s" % r.describe())
    p = _probe(ctx, page, "mix_f")
    change = [t for t in p["tables"] if "change" in t["cls"]]
    check(change, "no before/after table in the page")
    rows = {row["cells"][-1]: row for row in change[0]["rows"]}
    f = rows.get("mix_f")
    # mix_f did 1/8 of its work: from half the run to a ninth.
    check(f and f["cls"] == "changed" and f["cells"][2].startswith("-") and f["cells"][-2] == "CHANGED",
          "mix_f's share fell, beyond noise: %s" % f)
    based = [fl for fl in p["flames"] if fl["inBase"]]
    check(based and len(based[0]["fills"]) >= 3, "the base section's flame graph is coloured by change: %s" % based)
    check(any(x == "base-section" for x, _ in p["toc"]), "the contents lead to the change: %s" % p["toc"])
