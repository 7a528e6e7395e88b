"""svg: pprof's call graph made fit to sit inline in a page, and a plain
line chart of a memory-over-time table.

`go tool pprof -svg` (graphviz's dot underneath) writes a document for a
browser window of its own: 100% wide and high, no viewBox, a pan-and-zoom
script and its viewport scaled to one half. Inline, many on one page, the
graph should instead scale to the page's width and run no script: the
script goes, the viewport's scale goes, and the viewBox is graphviz's own
page, read back from its background polygon. The graph is pprof's and
dot's, unchanged."""

import html
import re

_BG = re.compile(r'<polygon fill="white" stroke="[^"]*" points="([^"]+)"')


def inline(text):
    """pprof's SVG as an inline <svg> element, or None when it is not the
    shape this expects (the caller then embeds it untouched)."""
    start = text.find("<svg")
    m = _BG.search(text)
    if start < 0 or not m:
        return None
    try:
        pts = [tuple(float(c) for c in p.split(",")) for p in m.group(1).split()]
    except ValueError:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    w, h = max(xs) - min(xs), max(ys) - min(ys)
    body = re.sub(r"<script[^>]*>.*?</script>", "", text[start:], flags=re.S)
    body = re.sub(r'<g id="viewport" transform="[^"]*">', '<g class="viewport">', body, count=1)
    head_end = body.find(">")
    tag = ('<svg class="graph" viewBox="0 0 %.2f %.2f" width="%.0f" '
           'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">' % (w, h, w))
    return tag + body[head_end + 1:]


def embed(text):
    """The SVG inline, or else whole in an iframe of its own."""
    svg = inline(text)
    if svg is not None:
        return svg
    return '<iframe class="graph" sandbox srcdoc="%s"></iframe>' % html.escape(text, quote=True)


def _number(s):
    try:
        return float(s)
    except ValueError:
        return None


def read_tsv(path, limit=200000):
    """(header, rows of floats-or-None) of a tab-separated table."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.rstrip("\n") for l in f][:limit]
    lines = [l for l in lines if l and not l.startswith("#")] if lines else []
    if not lines:
        return [], []
    first = lines[0].split("\t")
    header = first if any(_number(c) is None for c in first) else ["column %d" % (i + 1) for i in range(len(first))]
    body = lines[1:] if header is first else lines
    return header, [[_number(c) for c in l.split("\t")] for l in body]


def chart(title, xs, ys, width=640, height=120):
    """One series as a polyline, with its minimum, maximum and last value."""
    pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len(pts) < 2:
        return ""
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)
    sx = (width - 20) / ((x1 - x0) or 1)
    sy = (height - 30) / ((y1 - y0) or 1)
    poly = " ".join("%.1f,%.1f" % (10 + (x - x0) * sx, height - 20 - (y - y0) * sy) for x, y in pts)
    return ('<figure class="chart"><figcaption>%s: max %s, last %s</figcaption>'
            '<svg viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">'
            '<line x1="10" y1="%d" x2="%d" y2="%d" stroke="#999"/>'
            '<polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" points="%s"/>'
            '<text x="10" y="%d" font-size="11">%s</text><text x="%d" y="%d" font-size="11" '
            'text-anchor="end">%s</text></svg></figure>') % (
        html.escape(title), _fmt(y1), _fmt(pts[-1][1]), width, height, width, height,
        height - 20, width - 10, height - 20, poly, height - 5, _fmt(x0), width - 10, height - 5, _fmt(x1))


def _fmt(v):
    return ("%d" % v) if float(v).is_integer() else ("%.3g" % v)


# The shim's NAME.mem.tsv (docs/CONFIG.md): time (Unix seconds), seconds
# (since the image began), event (text), then byte columns. Seconds is the
# better x; neither clock is a series to draw.
_X_PREFERRED = ("seconds",)
_NOT_SERIES = ("time", "seconds")


def mem_charts(path):
    """A chart per numeric column of a memory-over-time table against its
    seconds column (else its first, else the row number); text columns
    (the event) are left out."""
    header, rows = read_tsv(path)
    if not rows:
        return ""
    xc = next((header.index(c) for c in _X_PREFERRED if c in header), 0)
    xs = [r[xc] if xc < len(r) else None for r in rows]
    if any(x is None for x in xs):
        xs = list(range(len(rows)))
    out = []
    for c in range(len(header)):
        if c == xc or header[c] in _NOT_SERIES:
            continue
        ys = [r[c] if c < len(r) else None for r in rows]
        out.append(chart("%s (by %s)" % (header[c], header[xc]), xs, ys))
    return "".join(out)
