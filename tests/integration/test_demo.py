"""The bundled demo (`make demo`) profiles as advertised."""

import os
import re

from common import check, indent


def test_demo_profiles(ctx):
    plain = ctx.run_plain(["demo"])
    r, d = ctx.profile(["demo"], name="demo")
    check(r.out == plain.out, "demo output differs under the shim\n%s" % r.describe())
    m = re.search(r"holding (\d+) KiB index \+ (\d+) KiB cache", r.stdout_text)
    check(m, "demo did not print its line of results:\n%s" % r.describe())
    index_bytes, cache_bytes = int(m.group(1)) << 10, int(m.group(2)) << 10

    cpu = ctx.read(os.path.join(d, "demo.cpu.pprof"), r)
    total = cpu.total("samples")
    shares = {f: cpu.cum(f, "samples") / total if total else 0
              for f in ("parse_records", "build_index", "compress_summary")}
    check(all(s >= 0.05 for s in shares.values()),
          "each demo function should have >= 5%% of the CPU samples: %s\n%s" % (
              {k: "%.1f%%" % (100 * v) for k, v in shares.items()}, indent(cpu.cum_table("samples"))))

    heap = ctx.read(os.path.join(d, "demo.heap.pprof"), r)
    got = heap.cum("build_index", "inuse_space")
    check(0.9 * index_bytes <= got <= 1.1 * index_bytes,
          "build_index holds %d bytes (one block); heap profile shows %d\n%s" % (
              index_bytes, got, indent(heap.cum_table("inuse_space"))))
    # fill_cache: 3072 blocks of 4 KiB at the default 512 KiB rate is ~24
    # samples, sd ~20%: allow +-70% (3.5 sd).
    got = heap.cum("fill_cache", "inuse_space")
    check(0.3 * cache_bytes <= got <= 1.7 * cache_bytes,
          "fill_cache holds %d bytes; heap profile shows %d\n%s" % (
              cache_bytes, got, indent(heap.cum_table("inuse_space"))))
