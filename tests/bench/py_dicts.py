"""The allocation-heavy python3 workload of tests/bench/bench.py.

Run with Debian's /usr/bin/python3 and PYTHONMALLOC=malloc, so that every
object is a malloc() (not pymalloc's arenas): builds N small records (dicts
holding lists and strings), an index of them by key, groups them, and drops
the list. About 8 million calls to the malloc family for N = 600000.
usage: python3 py_dicts.py [N]
"""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 600000
rows = []
index = {}
for i in range(n):
    key = "k%08d" % i
    rec = {"id": i, "name": key, "tags": [i % 7, i % 11, str(i % 13)], "w": i * 0.5}
    rows.append(rec)
    index[key] = rec
total = 0
for r in rows:
    total += r["tags"][0] + len(r["name"])
groups = {}
for r in rows:
    groups.setdefault(r["tags"][1], []).append(r["id"])
del rows
print(len(index), total, sum(len(v) for v in groups.values()))
