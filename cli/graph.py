"""graph: pprof's call graph (`go tool pprof -svg`, graphviz's dot) of
profiles whose function names are first made short (names.py).

dot sizes each box to its label, so a C++ program's graph was a wall of
template arguments, its boxes wider than the page. The names are
shortened in a copy of each file (only the strings that name functions,
in the string table; every other byte is copied as it is), and pprof draws
that. Two instantiations of one template then share a box; the flame
graph and the tables above it keep them apart, with the full names."""

import gzip
import os
import shutil
import tempfile

import gopprof
import names
import pprofile


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def short_names(data):
    """The profile (uncompressed bytes) with its function names shortened."""
    name_ids = set()
    for num, _, v, _ in pprofile._spans(data):
        if num == 5:  # Function: name = 2
            for n2, _, v2 in pprofile._fields(data, *v):
                if n2 == 2:
                    name_ids.add(v2)
    out, k = bytearray(), 0
    for num, _, v, (start, end) in pprofile._spans(data):
        if num == 6:
            if k in name_ids:
                text = names.shorten(data[v[0]:v[1]].decode("utf-8", "replace")).encode("utf-8")
                out += b"\x32" + _varint(len(text)) + text  # field 6, length-delimited
            else:
                out += data[start:end]
            k += 1
        else:
            out += data[start:end]
    return bytes(out)


def call_graph(paths, nodes):
    """(pprof's SVG text, None) or (None, why not)."""
    if not gopprof.has_dot():
        return None, gopprof.NO_DOT
    scratch = tempfile.mkdtemp(prefix="profshim-graph-")
    try:
        short = []
        for n, p in enumerate(paths):
            with open(p, "rb") as f:
                data = f.read()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            dest = os.path.join(scratch, "%d.pb.gz" % n)
            with open(dest, "wb") as f:
                f.write(gzip.compress(short_names(data), 1))
            short.append(dest)
        rc, out, err = gopprof.run(["-svg", "-nodecount=%d" % nodes] + short)
        return (out, None) if rc == 0 else (None, err.strip())
    except (OSError, ValueError, EOFError, IndexError) as e:
        return None, str(e)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
