"""report: one self-contained HTML page for a directory of profiles: the
images as `profshim ls` lists them, then for the root and the largest
others each profile's summary, top table and call graph (pprof's SVG,
inline), and memory over time where a table of it exists. Nothing in the
page is fetched: no server, no network, no script."""

import html
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import gopprof
import images
import kinds
import ls
import svg

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; border-top: 1px solid #ccc; padding-top: .6em; }
h3 { font-size: 1.05em; margin-bottom: .3em; }
table.images { border-collapse: collapse; } table.images td, table.images th { padding: 2px 8px; text-align: left; }
table.images tr:nth-child(even) { background: #f4f4f4; } td.num { text-align: right; }
pre { background: #f8f8f8; padding: .5em; overflow-x: auto; font-size: 12px; }
svg.graph { max-width: 100%; height: auto; border: 1px solid #ddd; display: block; }
iframe.graph { width: 100%; height: 80vh; border: 1px solid #ddd; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: 0 1em; }
dl.summary dt { font-weight: bold; } dl.summary dd { margin: 0; }
.note { color: #666; }
"""


def parse(args):
    opts = {"o": None, "images": 8, "nodes": 80, "target": None}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--images", "--nodes"):
            if i + 1 >= len(args):
                raise ValueError("%s needs a value" % a)
            key = a.lstrip("-")
            opts[key] = args[i + 1]
            if key != "o":
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


def pprof_text(args):
    rc, out, err = gopprof.run(args)
    return out if rc == 0 else None, err.strip()


def trim_top(text):
    """pprof's -top without the header the image's summary already gives
    (file, build ID, comments, type, time)."""
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if l.startswith(("Duration:", "Showing nodes")):
            return "\n".join(lines[i:])
    return text


def kind_section(kind, paths, total_text, nodes):
    """(html, [errors]) for one profile (its files: the final one and the
    snapshots that hold the rest of the run, merged by pprof): its top
    table and its graph."""
    path = paths[0]
    sums = [images.File(p, "", kind, None).summary for p in paths]
    names = os.path.basename(path) + ("" if len(paths) == 1 else " and %d snapshot%s" % (
        len(paths) - 1, "" if len(paths) == 2 else "s"))
    head = "<h3>%s <span class=note>%s, %s</span></h3>" % (
        html.escape(kind), html.escape(names), html.escape(total_text))
    if None in sums:
        return head + "<p class=note>cannot be read</p>", ["%s: cannot be read" % path]
    if not any(s.samples and any(s.totals) for s in sums):
        return head + "<p class=note>no samples: nothing to show.</p>", []
    top, e1 = pprof_text(["-top", "-nodecount=25"] + paths)
    graph, e2 = (pprof_text(["-svg", "-nodecount=%d" % nodes] + paths) if gopprof.has_dot()
                 else (None, gopprof.NO_DOT))
    errs = [("%s: %s" % (path, e)) for ok, e in ((top, e1), (graph, e2)) if ok is None and e]
    parts = [head]
    parts.append("<pre>%s</pre>" % html.escape(trim_top(top)) if top else "<p class=note>no table: %s</p>" % html.escape(e1))
    parts.append(svg.embed(graph) if graph else "<p class=note>no graph: %s</p>" % html.escape(e2))
    return "".join(parts), errs


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
        futures = [[pool.submit(kind_section, k, p, t, opts["nodes"]) for k, p, t in jobs]
                   for _, _, jobs in plans]
        done = [[f.result() for f in fs] for fs in futures]
    errors = [e for fs in done for _, es in fs for e in es]
    title = "profshim report: %s" % (os.path.join(d, prefix) if prefix else d)
    out = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>%s</title><style>%s</style></head><body>"
           % (html.escape(title), CSS), "<h1>%s</h1>" % html.escape(title),
           "<p class=note>written %s by <code>profshim report</code>; every figure is read from the files.</p>"
           % time.strftime("%Y-%m-%d %H:%M:%S")]
    for s in sess:
        out.append(images_table(s, chosen))
    for (img, summary, _), parts in zip(plans, done):
        out.append('<h2 id="%s">%s</h2><dl class=summary>%s</dl>' % (
            anchor(img), html.escape(img.base), summary))
        out += [h for h, _ in parts]
        for p in img.others:
            if p.endswith(".tsv"):
                out.append("<h3>memory over time <span class=note>%s</span></h3>%s" % (
                    html.escape(os.path.basename(p)), svg.mem_charts(p) or "<p class=note>no rows</p>"))
    if loose:
        out.append("<h2>Other files</h2><ul>%s</ul>" % "".join(
            "<li>%s</li>" % html.escape(os.path.basename(p)) for ps in loose.values() for p in ps))
    out.append("</body></html>\n")
    return "\n".join(out), errors


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
