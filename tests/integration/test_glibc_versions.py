"""One library for glibc 2.31 (Debian 11) to 2.41: it binds no glibc symbol
version newer than 2.31, or every program it is preloaded into on an older
host would fail to start (docs/DESIGN.md "Which glibc"). The library is
read as built; the build's own check (scripts/check-glibc-versions) is
shown to refuse a library that binds a newer version."""

import os
import re
import subprocess

from cli_helpers import REPO
from common import Skip, check, indent

MAX = (2, 31)
CHECK = os.path.join(REPO, "scripts", "check-glibc-versions")


def _versions(path):
    """{(major, minor): [symbol@version, ...]} of the GLIBC_ versions the
    library's dynamic symbols bind, and those its version-needs section lists
    (what the dynamic linker checks at load)."""
    out = {}
    syms = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, timeout=60)
    check(syms.returncode == 0, "objdump -T %s failed:\n%s" % (path, indent(syms.stderr)))
    for line in syms.stdout.splitlines():
        m = re.search(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", line)
        if m:
            out.setdefault((int(m.group(1)), int(m.group(2))), []).append(line.split()[-1] + "@" + m.group(0))
    needs = subprocess.run(["readelf", "-V", "--wide", path], capture_output=True, text=True, timeout=60)
    check(needs.returncode == 0, "readelf -V %s failed:\n%s" % (path, indent(needs.stderr)))
    for m in re.finditer(r"Name: GLIBC_(\d+)\.(\d+)(?:\.\d+)?", needs.stdout):
        out.setdefault((int(m.group(1)), int(m.group(2))), []).append("(needed) " + m.group(0)[6:])
    return out


def test_library_binds_no_glibc_version_newer_than_2_31(ctx):
    check(os.path.isfile(ctx.lib), "%s not found: the shim is not built (`make`)" % ctx.lib)
    versions = _versions(ctx.lib)
    check(versions, "no GLIBC_ version found in %s: is it linked against glibc?" % ctx.lib)
    too_new = {v: s for v, s in versions.items() if v > MAX}
    check(not too_new, "%s binds glibc versions newer than 2.%d (a Debian 11 host would not start "
          "any program under it):\n%s" % (ctx.lib, MAX[1], indent("\n".join(
              "GLIBC_%d.%d: %s" % (v[0], v[1], " ".join(sorted(set(s))[:12])) for v, s in sorted(too_new.items())))))


def test_build_check_refuses_a_library_binding_a_newer_version(ctx):
    """The check the Makefile runs after the link: a library calling
    pthread_key_create as built today (GLIBC_2.34 where glibc is 2.34 or
    newer) is refused by name; the shim itself passes."""
    r = subprocess.run([CHECK, ctx.lib], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "check-glibc-versions refused the built library:\n%s" % indent(r.stderr))
    d = ctx.mkdtemp("newer")
    src = os.path.join(d, "uses_new.c")
    with open(src, "w") as f:
        f.write("#include <pthread.h>\nint f(pthread_key_t* k) { return pthread_key_create(k, 0); }\n")
    so = os.path.join(d, "uses_new.so")
    b = subprocess.run(["gcc", "-shared", "-fPIC", "-o", so, src], capture_output=True, text=True, timeout=120)
    check(b.returncode == 0, "gcc failed:\n%s" % indent(b.stderr))
    if not any(v > MAX for v in _versions(so)):
        raise Skip("this glibc binds pthread_key_create at 2.%d or older: nothing newer to refuse" % MAX[1])
    r = subprocess.run([CHECK, so], capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "pthread_key_create@GLIBC_2." in r.stderr and r.stderr.startswith("# profshim: error:"),
          "check-glibc-versions should refuse %s, naming pthread_key_create (exit %d):\n%s" % (
              so, r.returncode, indent(r.stderr)))
