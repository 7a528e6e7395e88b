"""flame: a flame graph of a profile's samples as inline SVG, drawn here
and not by a library (docs/TOOLS.md, "The report", says why).

Callers above callees (an icicle: the root is the top row, as pprof's own
web view draws it); a frame's width is its share of the total, its
colour a hash of its name in the kind's palette, its label the short name
(names.py) cut to fit, and its <title> (the hover) the full name with its
value and share. Frames under 0.1% of the width are left out (the
report says so). The SVG is complete without script;
ZOOM_JS adds click-to-zoom (a frame fills the width, its callers span
it, Escape or a click on the top row goes back)."""

import hashlib
import html

import names

WIDTH = 1000.0     # viewBox units; the SVG scales to the page's width
ROW = 17.0
CHAR = 6.6         # the width of one character of the 11-unit monospace label
MIN_FRACTION = 0.001
# Each kind its own hues; none is pprof's graph red (#b20000), which the
# report's test looks for to find the call graph.
PALETTES = {"cpu": ((225, 255), (95, 200), (40, 70)),
            "heap": ((60, 120), (150, 210), (110, 190)),
            "wait": ((120, 170), (120, 160), (200, 245))}


class Node:
    __slots__ = ("name", "value", "children")

    def __init__(self, name):
        self.name, self.value, self.children = name, 0, {}


def tree(samples, index):
    """The samples' stacks merged by function from the root down."""
    root = Node("all")
    for s in samples:
        v = s.values[index] if index < len(s.values) else 0
        if v <= 0:
            continue
        root.value += v
        node = root
        for frame in reversed(s.frames):
            child = node.children.get(frame[0])
            if child is None:
                child = node.children[frame[0]] = Node(frame[0])
            child.value += v
            node = child
    return root


def _colour(name, kind):
    h = hashlib.md5(name.encode("utf-8", "replace")).digest()
    pal = PALETTES.get(kind, PALETTES["cpu"])
    return "rgb(%d,%d,%d)" % tuple(lo + h[i] * (hi - lo) // 255 for i, (lo, hi) in enumerate(pal))


def label(short, width):
    fit = int((width - 6) / CHAR)
    if fit < 3:
        return ""
    return short if len(short) <= fit else short[:fit - 1] + names.ELLIPSIS


def svg(root, kind, fmt, title, colour=None):
    """The <svg> element ("" without samples). colour(name), when given,
    picks each frame's fill (a before/after page colours by change)."""
    if root.value <= 0:
        return ""
    rows = []

    def walk(node, x, depth):
        frac = node.value / root.value
        if frac < MIN_FRACTION:
            return
        rows.append((node, x, frac, depth))
        cx = x
        for child in sorted(node.children.values(), key=lambda c: (-c.value, c.name)):
            walk(child, cx, depth + 1)
            cx += child.value / root.value
    walk(root, 0.0, 0)
    depth = max(r[3] for r in rows) + 1
    height = depth * ROW + 2
    out = ['<svg class="flame" data-kind="%s" viewBox="0 0 %d %d" width="100%%" '
           'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="%s">' % (
               kind, WIDTH, height, html.escape(title, quote=True))]
    for node, x, frac, d in rows:
        full = node.name if d else "all: " + title
        short = names.shorten(node.name) if d else "all (%s)" % fmt(root.value)
        w = frac * WIDTH
        tip = "%s\n%s, %.1f%%" % (full, fmt(node.value), 100 * frac)
        out.append('<g class="f" data-x="%.6f" data-w="%.6f" data-d="%d" data-n="%s"><title>%s</title>'
                   '<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>'
                   '<text x="%.2f" y="%.1f">%s</text></g>' % (
                       x, frac, d, html.escape(short, quote=True), html.escape(tip),
                       x * WIDTH, d * ROW, max(w - 0.5, 0.1), ROW - 1,
                       "#ddd" if not d else (colour or (lambda nm: _colour(nm, kind)))(node.name),
                       x * WIDTH + 3, d * ROW + ROW - 5, html.escape(label(short, w))))
    out.append("</svg>")
    return "".join(out)


CSS = """
svg.flame { display: block; border: 1px solid #ddd; background: #fff; cursor: pointer; }
svg.flame text { font: 11px ui-monospace, "DejaVu Sans Mono", monospace; fill: #111; pointer-events: none; }
svg.flame g.f:hover rect { stroke: #000; stroke-width: .8; }
svg.flame g.f.hide { display: none; }
"""

# Zoom: a click on a frame makes it the width of the graph; frames beside
# it hide, its callers span the width, and labels are cut again for the
# new widths. Escape, or a click on the top row, shows all again.
ZOOM_JS = r"""
(function () {
  var W = %(width)s, CHAR = %(char)s, ELL = "\u2026";
  function cut(s, w) { var n = Math.floor((w - 6) / CHAR); return n < 3 ? "" : s.length <= n ? s : s.slice(0, n - 1) + ELL; }
  function zoom(svg, g) {
    var x0 = +g.dataset.x, w0 = +g.dataset.w, d0 = +g.dataset.d;
    svg.querySelectorAll("g.f").forEach(function (f) {
      var x = (+f.dataset.x - x0) / w0, w = +f.dataset.w / w0, d = +f.dataset.d;
      var inside = x > -1e-9 && x + w < 1 + 1e-9, above = d < d0 && x <= 1e-9 && x + w >= 1 - 1e-9;
      if (!inside && !above) { f.classList.add("hide"); return; }
      f.classList.remove("hide");
      if (above) { x = 0; w = 1; }
      var r = f.querySelector("rect"), t = f.querySelector("text");
      r.setAttribute("x", x * W); r.setAttribute("width", Math.max(w * W - 0.5, 0.1));
      t.setAttribute("x", x * W + 3); t.textContent = cut(f.dataset.n, w * W);
    });
  }
  document.querySelectorAll("svg.flame").forEach(function (svg) {
    var top = svg.querySelector("g.f");
    svg.addEventListener("click", function (e) {
      var g = e.target.closest("g.f");
      if (g) zoom(svg, g);
    });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape" && top) zoom(svg, top); });
  });
})();
""" % {"width": int(WIDTH), "char": CHAR}
