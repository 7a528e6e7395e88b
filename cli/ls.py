"""ls: one line per process image in a directory of profiles, root
first, then the largest; one header per session (one run of a root
program with everything it started). The report uses the same rows."""

import os
import struct
import time

import images
import kinds


def fmt_value(v, unit):
    """A total in its unit's natural form: 1.42 s, 31.5 MiB, 1234."""
    if v is None:
        return "-"
    if unit == "nanoseconds":
        return "%.2f s" % (v / 1e9)
    if unit == "bytes":
        return "%.1f MiB" % (v / 1048576.0)
    return "%d" % v


def extras(img):
    """What else the image wrote: other kinds with their default total,
    snapshot counts, files that are not profiles."""
    out, sets = [], {}
    forks = (img.marker or {}).get("forks")
    if forks:
        out.append("%d forked process%s merged (%s cpu, pid labels)" % (
            forks[0], "" if forks[0] == 1 else "es", fmt_value(forks[1], "nanoseconds")))
    for kind in sorted(img.files):
        fs = img.files[kind]
        f = fs[0]
        if kind not in kinds.NAMES:
            s = f.summary
            if s and s.types:
                t = s.default_type
                out.append("%s %s" % (kind, fmt_value(s.total(t), s.unit(t))))
            else:
                out.append(kind)
        for x in fs:
            if x.seq:
                sets.setdefault(x.seq, set()).add(kind)
    if sets:
        out.append(snapshots(img, sets))
    for p in img.others:
        out.append(os.path.basename(p)[len(img.base) + 1:])
    return ", ".join(out)


def snapshots(img, sets):
    """The snapshot sets on disk as the files to look for: a snapshot is
    written without a word, and this is where the operator finds it."""
    seqs = sorted(sets, key=images._seq_number)
    kinds = sorted(set().union(*sets.values()))
    span = "%s.%s.*" % (img.base, seqs[0]) if len(seqs) == 1 else "%s.%s.* to %s.%s.*" % (
        img.base, seqs[0], img.base, seqs[-1])
    return "%d snapshot%s (%s): %s" % (len(seqs), "" if len(seqs) == 1 else "s", " ".join(kinds), span)


def row(img):
    final = {k: img.final(k) for k in kinds.NAMES}
    stopped = img.stopped or "?"
    if all(f is None or f.seq for f in final.values()) and any(final.values()):
        stopped = "not stopped (snapshot %s)" % next(f.seq for f in final.values() if f)
    r = {
        "name": img.base,
        "program": img.program,
        "pid": str(img.pid) if img.pid is not None else "?",
        "parent": str(img.parent) if img.parent is not None else "?",
        "stopped": stopped,
        "more": extras(img),
        "command": clip(img.argv),
    }
    for k in kinds.KINDS:
        r[k.name] = fmt_value(img.total(k.name, k.total), k.unit) if final[k.name] else "-"
    return r


def clip(text, width=60):
    """A command line short enough for a terminal's row (the whole one is
    in the report and in `go tool pprof -comments`)."""
    return text if len(text) <= width else text[:width - 3] + "..."


COLUMNS = ([("name", "NAME"), ("program", "PROGRAM"), ("pid", "PID"), ("parent", "PARENT"),
            ("stopped", "STOPPED BY")] + [(k.name, k.heading) for k in kinds.KINDS] +
           [("more", "MORE"), ("command", "COMMAND")])
RIGHT = {"pid", "parent"} | set(kinds.NAMES)


def header(sess):
    root = sess.root
    start = images._start(sess.key)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start)) if start else "?"
    who = ("root %s pid %s" % (root.program, root.pid)) if root else "root's files not here"
    return "%s: %s, started %s, %d image%s, cpu %s in all" % (
        sess.name, who, when, len(sess.images), "" if len(sess.images) == 1 else "s",
        fmt_value(sess.cpu_ns(), "nanoseconds"))


def columns(rows):
    """The columns some row has a value in (and the first four always)."""
    return [(k, h) for k, h in COLUMNS if k in ("name", "program", "pid", "stopped")
            or any(r[k] not in ("-", "") for r in rows)]


def table(rows):
    cols = columns(rows)
    width = {k: max([len(h)] + [len(r[k]) for r in rows]) for k, h in cols}
    def line(vals):
        cells = [(vals[k].rjust(width[k]) if k in RIGHT else vals[k].ljust(width[k])) for k, _ in cols]
        return "  " + "  ".join(cells).rstrip()
    return [line(dict(cols))] + [line(r) for r in rows]


# The hand-over area's header (shim/forks_area.h): magic, version, owner
# pid, state, writers, used, capacity, merged, merged cpu, fell back, start.
SPOOL_HEAD = struct.Struct("<QIiIIQQQQQQ")
SPOOL_MAGIC = 0x4c4f4f5053485350


def spools(d, prefix):
    """Lines for the hand-over files a killed image left behind
    (.STEM.PID.spool): what its forked children handed over, not turned
    into a profile."""
    out = []
    for n in sorted(os.listdir(d)):
        if not (n.startswith(".") and n.endswith(".spool")) or (prefix and not n.startswith("." + prefix + ".")):
            continue
        try:
            with open(os.path.join(d, n), "rb") as f:
                head = f.read(SPOOL_HEAD.size)
            magic, _, pid, _, _, _, _, merged, cpu, fell, _ = SPOOL_HEAD.unpack(head)
        except (OSError, struct.error):
            continue
        if magic != SPOOL_MAGIC:
            continue
        out.append("%s: kept from pid %d, which never wrote its files (killed?): %d forked process%s handed "
                   "over %s cpu, %d wrote their own" % (n, pid, merged, "" if merged == 1 else "es",
                                                       fmt_value(cpu, "nanoseconds"), fell))
    return out


def targets(arg):
    """(directory, name prefix or None) of DIR or DIR/NAME."""
    if os.path.isdir(arg):
        return arg, None
    d, name = os.path.split(arg)
    return d or ".", name


def main(args, out, err):
    if not args:
        args = ["."]
    status = 0
    for arg in args:
        d, prefix = targets(arg)
        if not os.path.isdir(d):
            err("%s: the directory does not exist" % (arg if prefix else d))
            status = 66
            continue
        imgs, _ = images.scan(d, prefix)
        kept = spools(d, prefix)
        for line in kept:
            out(line)
        if not imgs and kept:
            continue
        if not imgs and prefix and not os.path.exists(arg):
            # Neither a directory nor NAME.* beside it: the operator meant a
            # directory (DIR/NAME only reads as such when NAME's files exist).
            err("%s: the directory does not exist (nor are there profiles named %s.* in %s)" % (arg, prefix, d))
            status = 66
            continue
        if not imgs:
            err("%s: no profiles%s" % (d, (" named %s.*" % prefix) if prefix else ""))
            status = 66
            continue
        if len(args) > 1:
            out("%s:" % arg)
        for sess in images.sessions(imgs):
            out(header(sess))
            for line in table([row(i) for i in sess.images]):
                out(line)
        for img in imgs:
            for f in (f for fs in img.files.values() for f in fs):
                if f.error:
                    err(f.error)
                    status = 65
    return status
