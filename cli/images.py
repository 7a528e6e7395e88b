"""images: a directory's pprof files grouped into process images and
sessions, from the files alone (no side file).

A file is STEM.KIND.pprof: KIND is the part before ".pprof" (cpu, heap,
wait, heap-peak, or any kind a later shim writes). Its gzip header says
which image wrote it (pprofile.parse_marker): the session (ROOTPID:START),
the pid, ALT (the stem the image has when it is not the root's:
NAME.PROG.PID[.GEN]) and the executable. The stem is then one of
  ALT              the image's files
  ALT-K            a later image with the same pid in one session
  ALT.SEQ          a numbered snapshot of the image ALT
  NAME, NAME.SEQ   the root's (NAME a dot-prefix of ALT)
so an image is (session, pid, ALT, base stem) and its files of one kind
are its final file (no SEQ) and its snapshots."""

import os
import re

import kinds
import pprofile

COMMENT = "profshim: "
_PID_RE = re.compile(r"^pid (\d+) \(parent (\d+)\) program (.*)$")


class File:
    def __init__(self, path, stem, kind, marker):
        self.path, self.stem, self.kind, self.marker = path, stem, kind, marker
        self.seq = ""  # "" for an image's final file, else the snapshot's number
        self._summary = None
        self.error = None

    @property
    def summary(self):
        if self._summary is None and self.error is None:
            try:
                self._summary = pprofile.read(self.path)
            except (OSError, ValueError, EOFError, IndexError) as e:
                self.error = "%s: cannot read: %s" % (self.path, e)
        return self._summary


class Image:
    def __init__(self, key, base, marker):
        self.key, self.base, self.marker = key, base, marker
        self.files = {}  # kind -> [File], final file first
        self.pid = marker["pid"] if marker else None
        self.exe = marker["exe"] if marker else ""
        self.session = marker["session"] if marker else ""
        self.root = False  # wrote the session's NAME.*
        self.parent = None
        self.stopped = self.argv = self.started = ""
        self.others = []  # files of the image that are not profiles (NAME.mem.tsv)

    def final(self, kind):
        """The file of kind that the image's stop wrote, else its latest
        snapshot, else None."""
        fs = self.files.get(kind) or []
        return fs[0] if fs else None

    def run_files(self, kind):
        """The files that together hold the whole run of kind. A heap
        profile is the state at one moment: its final file (else the
        latest snapshot). A CPU or wait profile counts: each numbered
        snapshot holds what came since the one before and the final file
        the rest, so all of them (those PROFILE_SNAPSHOT_KEEP left)."""
        f = self.final(kind)
        if f is None:
            return []
        s = f.summary
        if s is None or any(t.startswith("inuse_") for t in s.types):
            return [f]
        return list(self.files[kind])

    def total(self, kind, sample_type):
        totals = [f.summary.total(sample_type) if f.summary else None for f in self.run_files(kind)]
        return None if not totals or None in totals else sum(totals)

    @property
    def program(self):
        return os.path.basename(self.exe) if self.exe else "?"

    def cpu_ns(self):
        return self.total("cpu", "cpu")

    def heap_bytes(self):
        return self.total("heap", "inuse_space")

    def wait_ns(self):
        return self.total("wait", "delay")

    def read_comments(self):
        for kind in kinds.NAMES + sorted(self.files):
            f = self.final(kind)
            s = f.summary if f else None
            if s and any(c.startswith(COMMENT) for c in s.comments):
                for c in s.comments:
                    self._comment(c[len(COMMENT):] if c.startswith(COMMENT) else "")
                return

    def _comment(self, c):
        m = _PID_RE.match(c)
        if m:
            self.pid, self.parent, self.exe = int(m.group(1)), int(m.group(2)), m.group(3)
        elif c.startswith("stopped by "):
            self.stopped = c[len("stopped by "):]
        elif c.startswith("argv "):
            self.argv = c[len("argv "):]
        elif c.startswith("started "):
            self.started = c[len("started "):]


def split_name(filename):
    """("STEM", "KIND") of STEM.KIND.pprof, or None."""
    if not filename.endswith(".pprof"):
        return None
    stem, dot, kind = filename[:-len(".pprof")].rpartition(".")
    return (stem, kind) if dot and stem and kind else None


def _base(stem, alt):
    """(base stem, snapshot seq, root-named) of a file stem, given ALT."""
    if stem == alt:
        return alt, "", False
    if stem.startswith(alt + "-") and stem[len(alt) + 1:].isdigit():
        return stem, "", False
    if stem.startswith(alt + "."):
        return alt, stem[len(alt) + 1:], False
    # NAME (or NAME.SEQ) where ALT is NAME.PROG.PID[.GEN].
    parts = stem.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if alt.startswith(name + "."):
            return name, ".".join(parts[n:]), True
    return stem, "", False


def scan(d, prefix=None):
    """The images whose files are in directory d (only those whose stems
    are prefix or begin with prefix + "." when prefix is given), and the
    other files there (.tsv and the like) as {stem: [path]}."""
    images, others = {}, {}
    for fn in sorted(os.listdir(d)):
        path = os.path.join(d, fn)
        if prefix and not (fn.startswith(prefix + ".") or fn.startswith(prefix + "-")):
            continue
        sk = split_name(fn)
        if sk is None:
            # STEM.KIND.EXT that is not a profile (NAME.mem.tsv): its image's.
            stem, _, rest = fn.rpartition(".")
            stem = stem.rpartition(".")[0]
            if stem and rest not in ("html", "tmp") and os.path.isfile(path):
                others.setdefault(stem, []).append(path)
            continue
        stem, kind = sk
        try:
            marker = pprofile.parse_marker(pprofile.gzip_comment(path))
        except OSError:
            continue
        if marker:
            base, seq, rooted = _base(stem, marker["alt"])
            key = (marker["session"], marker["pid"], marker["alt"], base)
        else:
            base, seq, rooted, key = stem, "", False, ("", 0, "", stem)
        img = images.get(key)
        if img is None:
            img = images[key] = Image(key, base, marker)
        img.root = img.root or rooted
        f = File(path, stem, kind, marker)
        f.seq = seq
        img.files.setdefault(kind, []).append(f)
    for img in images.values():
        for fs in img.files.values():
            # The stop's file first, then snapshots, latest first.
            fs.sort(key=lambda f: (f.seq != "", -_seq_number(f.seq), -os.path.getmtime(f.path)))
        img.read_comments()
        img.others = others.pop(img.base, [])
    return list(images.values()), others


def _seq_number(seq):
    try:
        return int(seq.split("-")[0])
    except ValueError:
        return 0


class Session:
    def __init__(self, key):
        self.key = key
        self.images = []

    @property
    def root(self):
        return self.images[0] if self.images and self.images[0].root else None

    @property
    def name(self):
        r = self.root
        if r:
            return r.base
        alt = self.images[0].base if self.images else "?"
        return alt.split(".")[0]

    def cpu_ns(self):
        return sum(i.cpu_ns() or 0 for i in self.images)


def sessions(images):
    """Images grouped by session, each session root first, then the
    largest by CPU, then heap; the latest session first."""
    by = {}
    for img in images:
        by.setdefault(img.session or ("?", img.base), Session(img.session)).images.append(img)
    out = list(by.values())
    for s in out:
        s.images.sort(key=lambda i: (not i.root, -(i.cpu_ns() or 0), -(i.heap_bytes() or 0), i.base))
    out.sort(key=lambda s: (-_start(s.key), s.name))
    return out


def _start(session_key):
    try:
        return int(str(session_key).split(":")[1])
    except (IndexError, ValueError):
        return 0
