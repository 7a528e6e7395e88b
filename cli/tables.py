"""tables: the report's HTML tables from the samples themselves: a
profile's top functions, the threads' CPU and waits, and a before/after
comparison (compare.py's rows). Names are short (names.py) with the full
name in the cell's title; the function column wraps instead of running off
the page."""

import html

import compare
import names

CSS = """
table.t { border-collapse: collapse; width: 100%; table-layout: fixed; margin: .3em 0 1em; }
table.t th, table.t td { padding: 2px 6px; text-align: right; vertical-align: top; }
table.t th { background: #eee; font-weight: 600; }
table.t td.fn, table.t th.fn { text-align: left; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: 12px; }
table.t tr:nth-child(even) td { background: #f6f6f6; }
table.t col.num { width: 6.5em; } table.t col.pct { width: 4.5em; } table.t col.verdict { width: 6em; }
table.t tr.changed td { background: #fff0d0; } table.t td.up { color: #a33; } table.t td.down { color: #236; }
"""


def fn_cell(name, tag="td"):
    short = names.shorten(name)
    title = ' title="%s"' % html.escape(name, quote=True) if short != name else ""
    return '<%s class=fn%s>%s</%s>' % (tag, title, html.escape(short), tag)


def _table(cls, cols, head, rows):
    colgroup = "".join('<col class="%s">' % c for c in cols)
    return '<table class="t %s"><colgroup>%s</colgroup><tr>%s</tr>%s</table>' % (
        cls, colgroup, head, "".join(rows))


def top(side, n):
    """The n functions with the most flat value, with their cum."""
    if side.total <= 0:
        return ""
    fmt = lambda v: compare.fmt_signed(v, side.unit, False)  # noqa: E731
    keys = sorted(side.cum, key=lambda k: (-side.flat.get(k, 0), -side.cum[k], k))[:n]
    rows = []
    for k in keys:
        f, c = side.flat.get(k, 0), side.cum[k]
        rows.append("<tr><td>%s</td><td>%.1f%%</td><td>%s</td><td>%.1f%%</td>%s</tr>" % (
            fmt(f), 100.0 * f / side.total, fmt(c), 100.0 * c / side.total, fn_cell(k)))
    head = "<th>flat</th><th>flat%</th><th>cum</th><th>cum%</th><th class=fn>function</th>"
    return _table("top", ["num", "pct", "num", "pct", "fn"], head, rows)


def by_thread(cpu, wait):
    """Per thread name: its CPU and its waits (values and shares of the
    image's), and where its CPU went most. cpu and wait are
    (profiles, sample index) or None."""
    sums = {}
    for col, src in ((0, cpu), (1, wait)):
        if not src:
            continue
        profiles, i = src
        for p in profiles:
            for s in p.samples:
                v = s.values[i] if i < len(s.values) else 0
                if v <= 0:
                    continue
                t = s.labels.get("thread_name") or "(no name)"
                row = sums.setdefault(t, [0, 0, {}])
                row[col] += v
                if col == 0 and s.frames:
                    row[2][s.frames[0][0]] = row[2].get(s.frames[0][0], 0) + v
    if not sums:
        return ""
    tot = [sum(r[0] for r in sums.values()) or 1, sum(r[1] for r in sums.values()) or 1]
    rows = []
    for t, (c, w, fns) in sorted(sums.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0])):
        hot = max(fns, key=lambda k: (fns[k], k)) if fns else ""
        rows.append("<tr><td class=fn>%s</td><td>%s</td><td>%.1f%%</td><td>%s</td><td>%.1f%%</td>%s</tr>" % (
            html.escape(t), compare.fmt_signed(c, "nanoseconds", False), 100.0 * c / tot[0],
            compare.fmt_signed(w, "nanoseconds", False), 100.0 * w / tot[1],
            fn_cell(hot) if hot else "<td class=fn></td>"))
    head = ("<th class=fn>thread</th><th>cpu</th><th>cpu%</th><th>waits</th><th>waits%</th>"
            "<th class=fn>most CPU in</th>")
    return _table("threads", ["fn", "num", "pct", "num", "pct", "fn"], head, rows)


def change(a, b, n):
    """compare.py's rows (shares, base and new, ±3σ) as a table, the
    changes beyond noise highlighted."""
    rows = []
    for k, fl, cu, changed in compare.rows(a, b, False)[:n]:
        cells = "".join("<td>%.1f%%</td>" % (100 * v) for v in (cu[0], cu[1]))
        cls = "up" if cu[2] > 0 else "down" if cu[2] < 0 else ""
        rows.append('<tr%s>%s<td class="%s">%+.1f%%</td><td>±%.1f%%</td><td>%.1f%%</td><td>%.1f%%</td>'
                    '<td class="%s">%+.1f%%</td><td>%s</td>%s</tr>' % (
                        " class=changed" if changed else "", cells, cls, 100 * cu[2],
                        100 * compare.SIGMAS * cu[3], 100 * fl[0], 100 * fl[1],
                        "up" if fl[2] > 0 else "down" if fl[2] < 0 else "", 100 * fl[2],
                        "CHANGED" if changed else "noise", fn_cell(k)))
    head = ("<th>cum% base</th><th>cum% new</th><th>change</th><th>±3σ</th><th>flat% base</th>"
            "<th>flat% new</th><th>change</th><th>verdict</th><th class=fn>function</th>")
    return _table("change", ["pct", "pct", "pct", "pct", "pct", "pct", "pct", "verdict", "fn"], head, rows)
