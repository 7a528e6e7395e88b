"""report: one self-contained HTML page for a directory of profiles: a
table of contents, the images as `profshim ls` lists them, then for the
root and the largest others: each profile's flame graph (flame.py), top
table and per-thread table (tables.py), pprof's call graph (inline SVG),
and memory over time where a table of it exists. With --base, the root's
change from another run first (compare.py). Nothing in the page is
fetched: no server, no network; its one inline script zooms the flame
graphs, which read the same without it."""

import html
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import compare
import flame
import gopprof
import graph as call_graph
import images
import kinds
import ls
import stacks
import svg
import tables
import topdiff

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; border-top: 1px solid #ccc; padding-top: .6em; }
h3 { font-size: 1.05em; margin-bottom: .3em; }
table.images { border-collapse: collapse; } table.images td, table.images th { padding: 2px 8px; text-align: left; vertical-align: top; white-space: nowrap; }
table.images td:last-child { white-space: normal; overflow-wrap: anywhere; }
table.images tr:nth-child(even) { background: #f4f4f4; } td.num { text-align: right; }
pre { background: #f8f8f8; padding: .5em; overflow-x: auto; font-size: 12px; }
svg.graph { max-width: 100%; height: auto; border: 1px solid #ddd; display: block; }
iframe.graph { width: 100%; height: 80vh; border: 1px solid #ddd; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: 0 1em; }
dl.summary dt { font-weight: bold; } dl.summary dd { margin: 0; }
.note { color: #666; }
nav.toc { background: #f7f7f7; border: 1px solid #ddd; padding: .3em 1em; display: inline-block; }
nav.toc ul { margin: .2em 0; padding-left: 1.2em; } nav.toc li { margin: .1em 0; }
details > summary { cursor: pointer; color: #444; margin: .4em 0; }
""" + flame.CSS + tables.CSS


def parse(args):
    opts = {"o": None, "images": 8, "nodes": 80, "target": None, "base": None}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--images", "--nodes", "--base"):
            if i + 1 >= len(args):
                raise ValueError("%s needs a value" % a)
            key = a.lstrip("-")
            opts[key] = args[i + 1]
            if key not in ("o", "base"):
                if not args[i + 1].isdigit():
                    raise ValueError("%s wants a number, got %r" % (a, args[i + 1]))
                opts[key] = int(args[i + 1])
            i += 2
            continue
        if a.startswith("-"):
            raise ValueError("unknown option %s (see --help)" % a)
        if opts["target"] is not None:
            raise ValueError("one DIR or DIR/NAME, got %s and %s" % (opts["target"], a))
        opts["target"] = a
        i += 1
    if opts["target"] is None:
        raise ValueError("which directory? (profshim report DIR [-o FILE.html])")
    return opts


def kind_id(img, kind):
    return "%s-%s" % (anchor(img), kind)


def kind_section(img, kind, paths, total_text, nodes):
    """(html, [errors], profiles) for one profile (its files: the final one
    and the snapshots that hold the rest of the run, added up): its flame
    graph, top table and call graph."""
    path = paths[0]
    names = os.path.basename(path) + ("" if len(paths) == 1 else " and %d snapshot%s" % (
        len(paths) - 1, "" if len(paths) == 2 else "s"))
    head = '<h3 id="%s">%s <span class=note>%s, %s</span></h3>' % (
        kind_id(img, kind), html.escape(kind), html.escape(names), html.escape(total_text))
    try:
        profiles = [stacks.read(p) for p in paths]
    except (OSError, ValueError, EOFError, IndexError) as e:
        return head + "<p class=note>cannot be read</p>", ["%s: cannot be read: %s" % (path, e)], []
    side = compare.Side(profiles, profiles[0].default_type, False)
    if side.i is None or side.total <= 0:
        return head + "<p class=note>no samples: nothing to show.</p>", [], profiles
    fmt = lambda v: compare.fmt_signed(v, side.unit, False)  # noqa: E731
    graph, e2 = call_graph.call_graph(paths, nodes)
    errs = ["%s: %s" % (path, e2)] if graph is None and e2 else []
    what = profiles[0].default_type
    parts = [head,
             "<p class=note>flame graph of %s: callers above callees, width is the share of %s; "
             "hover for the full name, click to zoom (Escape: back).</p>" % (html.escape(what), fmt(side.total)),
             flame.svg(flame.tree([s for p in profiles for s in p.samples], side.i), kind, fmt,
                       "%s %s" % (kind, what)),
             "<details open><summary>top functions by %s (flat: in the function itself; cum: with "
             "all it called)</summary>%s</details>" % (html.escape(what), tables.top(side, 20)),
             "<details open><summary>call graph (go tool pprof -svg)</summary>%s</details>" % (
                 svg.embed(graph) if graph else "<p class=note>no graph: %s</p>" % html.escape(e2))]
    return "".join(parts), errs, profiles


def threads_section(img, done):
    """CPU and waits by thread name, from the kinds' samples."""
    src = {}
    for kind, _, profiles in done:
        if kind in ("cpu", "wait") and profiles:
            i = profiles[0].index("cpu" if kind == "cpu" else "delay")
            if i is not None:
                src[kind] = (profiles, i)
    table = tables.by_thread(src.get("cpu"), src.get("wait"))
    if not table:
        return ""
    return ('<h3 id="%s">threads <span class=note>CPU and waits by thread name</span></h3>%s'
            % (kind_id(img, "threads"), table))


def image_section(img, nodes):
    r = ls.row(img)
    rows = ([("program", img.exe or img.program), ("command line", img.argv), ("pid", r["pid"]),
             ("parent", r["parent"]), ("started", img.started), ("stopped by", r["stopped"])] +
            [(k.heading.lower(), r[k.name]) for k in kinds.KINDS] + [("also", r["more"])])
    summary = "".join("<dt>%s</dt><dd>%s</dd>" % (html.escape(k), html.escape(v))
                      for k, v in rows if v and v != "-")
    jobs = []
    for kind in gopprof.ordered(img.files):
        f = img.final(kind)
        k = next((k for k in kinds.KINDS if k.name == kind), None)
        total = (r[kind] + (" in use" if k.total.startswith("inuse_") else "")) if k else _total(f)
        paths = [x.path for x in img.run_files(kind)] or [f.path]
        jobs.append((kind, paths, total + (" (snapshot %s)" % f.seq if f.seq and len(paths) == 1 else "")))
    return summary, jobs


def _total(f):
    """Another kind's total in its default sample type (heap-peak: in use)."""
    s = f.summary
    if not s or not s.types:
        return f.kind
    t = s.default_type
    return "%s %s" % (ls.fmt_value(s.total(t), s.unit(t)), t)


def build(d, prefix, opts):
    imgs, loose = images.scan(d, prefix)
    if not imgs:
        return None, ["%s: no profiles%s" % (d, (" named %s.*" % prefix) if prefix else "")]
    sess = images.sessions(imgs)
    chosen = []
    for s in sess:
        chosen += [i for i in s.images if i.root][:1]
    for i in sorted((i for s in sess for i in s.images if not i.root),
                    key=lambda i: (-(i.cpu_ns() or 0), -(i.heap_bytes() or 0))):
        if len(chosen) >= len([c for c in chosen if c.root]) + opts["images"]:
            break
        chosen.append(i)
    plans = [(img,) + image_section(img, opts["nodes"]) for img in chosen]
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        futures = [[(k, pool.submit(kind_section, img, k, p, t, opts["nodes"])) for k, p, t in jobs]
                   for img, _, jobs in plans]
        done = [[(k,) + f.result() for k, f in fs] for fs in futures]
    errors = [e for fs in done for _, _, es, _ in fs for e in es]
    title = "profshim report: %s" % (os.path.join(d, prefix) if prefix else d)
    before = None
    if opts["base"]:
        title += " (base: %s)" % opts["base"]
        before, more = base_section(opts["base"], plans[0][0], done[0])
        errors += more
    out = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>%s</title><style>%s</style></head><body>"
           % (html.escape(title), CSS), "<h1>%s</h1>" % html.escape(title),
           "<p class=note>written %s by <code>profshim report</code>; every figure is read from the files.</p>"
           % time.strftime("%Y-%m-%d %H:%M:%S")]
    out.append(toc(sess, plans, done, before is not None, bool(loose)))
    if before is not None:
        out.append(before)
    out.append('<h2 id="images">Images</h2>')
    for s in sess:
        out.append(images_table(s, chosen))
    for (img, summary, _), parts in zip(plans, done):
        out.append('<h2 id="%s">%s</h2><dl class=summary>%s</dl>' % (
            anchor(img), html.escape(img.base), summary))
        out += [h for _, h, _, _ in parts]
        out.append(threads_section(img, [(k, h, ps) for k, h, _, ps in parts]))
        for p in img.others:
            if p.endswith(".tsv"):
                out.append('<h3 id="%s">memory over time <span class=note>%s</span></h3>%s' % (
                    kind_id(img, "memory"), html.escape(os.path.basename(p)),
                    svg.mem_charts(p) or "<p class=note>no rows</p>"))
    if loose:
        out.append('<h2 id="other">Other files</h2><ul>%s</ul>' % "".join(
            "<li>%s</li>" % html.escape(os.path.basename(p)) for ps in loose.values() for p in ps))
    out.append("<script>%s</script>" % flame.ZOOM_JS)
    out.append("</body></html>\n")
    return "\n".join(out), errors


def toc(sess, plans, done, with_base, with_loose):
    """The table of contents: each image's sections by kind."""
    items = ['<li><a href="#base-section">Change from the base</a></li>'] if with_base else []
    items.append('<li><a href="#images">Images</a> <span class=note>(%d session%s)</span></li>' % (
        len(sess), "" if len(sess) == 1 else "s"))
    for (img, _, _), parts in zip(plans, done):
        subs = [(k, k) for k, _, _, _ in parts]
        if any(k in ("cpu", "wait") and ps for k, _, _, ps in parts):
            subs.append(("threads", "threads"))
        if any(p.endswith(".tsv") for p in img.others):
            subs.append(("memory", "memory over time"))
        items.append('<li><a href="#%s">%s</a> <span class=note>%s</span>: %s</li>' % (
            anchor(img), html.escape(img.base), html.escape(img.program), " · ".join(
                '<a href="#%s">%s</a>' % (kind_id(img, k), html.escape(t)) for k, t in subs)))
    if with_loose:
        items.append('<li><a href="#other">Other files</a></li>')
    return '<nav class=toc><strong>Contents</strong><ul>%s</ul></nav>' % "".join(items)


def base_section(base, img, parts):
    """(html, errors): the image's change from the base run, kind by kind:
    compare.py's shares with ±3σ as a table, and the new run's flame graph
    coloured by each function's change (red: a larger share, blue: a
    smaller one, grey: within noise)."""
    sets = topdiff.resolve(base, lambda e: None, lambda line: None)
    if not sets:
        return ('<section id="base-section"><h2>Change from the base</h2><p class=note>%s: no profiles '
                'to compare with</p></section>' % html.escape(base)), ["%s: no profiles to compare with" % base]
    out, errs = ['<section id="base-section"><h2>Change from the base <span class=note>%s → %s</span></h2>' % (
        html.escape(base), html.escape(img.base)),
        "<p class=note>Each function's share of its own run's total, base and new; a change within "
        "three standard errors of the sampling (±3σ) is noise (docs/TOOLS.md, \"diff\").</p>"], []
    for kind, _, _, new in parts:
        if kind not in sets or not new:
            continue
        try:
            old = [stacks.read(p) for p in sets[kind]]
        except (OSError, ValueError, EOFError, IndexError) as e:
            errs.append("%s: cannot be read: %s" % (sets[kind][0], e))
            continue
        t = new[0].default_type
        if old[0].index(t) is None:
            continue
        a, b = compare.Side(old, t, False), compare.Side(new, t, False)
        if a.total <= 0 and b.total <= 0:
            continue
        verdict = {k: (cu[2], ch) for k, _, cu, ch in compare.rows(a, b, False)}
        fmt = lambda v, u=b.unit: compare.fmt_signed(v, u, False)  # noqa: E731
        out.append('<h3 id="base-%s">%s <span class=note>base %s, new %s (%s)</span></h3>' % (
            kind, html.escape(kind), fmt(a.total), fmt(b.total), html.escape(t)))
        out.append(flame.svg(flame.tree([s for p in new for s in p.samples], b.i), kind, fmt,
                             "%s %s, coloured by change" % (kind, t), colour=lambda n: _change_colour(verdict, n)))
        out.append(tables.change(a, b, 25))
    out.append("</section>")
    return "".join(out), errs


def _change_colour(verdict, name):
    delta, changed = verdict.get(name, (0.0, False))
    if not changed:
        return "#d8d8d8"
    return "#e8836b" if delta > 0 else "#6f9fd8"


def anchor(img):
    return "img-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in img.base)


def images_table(sess, chosen):
    rows = [ls.row(i) for i in sess.images]
    cols = ls.columns(rows)
    head = "".join("<th>%s</th>" % html.escape(h) for _, h in cols)
    body = []
    for img, r in zip(sess.images, rows):
        cells = []
        for k, _ in cols:
            v = html.escape(r[k])
            if k == "name" and img in chosen:
                v = '<a href="#%s">%s</a>' % (anchor(img), v)
            cells.append("<td%s>%s</td>" % (" class=num" if k in ls.RIGHT else "", v))
        body.append("<tr>%s</tr>" % "".join(cells))
    return "<h2>%s</h2><table class=images><tr>%s</tr>%s</table>" % (
        html.escape(ls.header(sess)), head, "".join(body))


def main(args, out, err):
    try:
        opts = parse(args)
    except ValueError as e:
        err("profshim report: %s" % e)
        return 64
    d, prefix = ls.targets(opts["target"])
    if not os.path.isdir(d):
        err("%s: no such directory" % d)
        return 66
    try:
        gopprof.find_go()
    except gopprof.Missing as e:
        err(str(e))
        return 69
    page, errors = build(d, prefix, opts)
    if page is None:
        for e in errors:
            err(e)
        return 66
    dest = opts["o"] or os.path.join(d, "%s.report.html" % prefix if prefix else "report.html")
    tmp = dest + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, dest)
    except OSError as e:
        err("cannot write %s: %s (choose another with -o FILE.html)" % (dest, e))
        return 73
    for e in errors:
        sys.stderr.write("# profshim: warning: %s\n" % e)
    out("wrote %s (%d KiB)" % (dest, (len(page.encode()) + 1023) // 1024))
    return 0
