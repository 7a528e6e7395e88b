"""make install / uninstall into a prefix and make deb: the layout, the
package's dependencies, and the installed profshim running with the
installed library."""

import glob
import os
import re
import subprocess

from cli_helpers import REPO, ls_rows, subprocess_ok
from common import check, image_files, indent, profile_dir_names, run_program


def _make(ctx, *args):
    return subprocess_ok(["make", "--no-print-directory", "-C", REPO, "BUILD=" + ctx.build] + list(args),
                         timeout=600)


def _run_installed(ctx, exe, lib):
    """exe run -d D -- env: the program sees the installed library in
    LD_PRELOAD and its profiles are written; ls and --help work from there."""
    env = ctx.env(preload=False)
    env.pop("PROFSHIM_LIB", None)
    d = ctx.mkdtemp("prof")
    r = run_program([exe, "run", "-d", d, "-n", "inst", "--", "/usr/bin/env"], env, ctx.mkdtemp("cwd"))
    check(r.rc == 0 and "LD_PRELOAD=%s\n" % lib in r.stdout_text, "the installed profshim should preload %s:\n%s" % (
        lib, r.describe()))
    check(profile_dir_names(d) == image_files("inst"),
          "profiles from the installed run: %s\n%s" % (os.listdir(d), r.describe()))
    r = run_program([exe, "ls", d], env, ctx.mkdtemp("cwd"))
    check(r.rc == 0 and [row[0] for row in ls_rows(r.stdout_text)] == ["inst"], "installed ls:\n%s" % r.describe())
    r = run_program([exe, "run", "--help"], env, ctx.mkdtemp("cwd"))
    check(r.rc == 0 and "PROFILE_STOP_TIMEOUT" in r.stdout_text and "missing" not in r.stdout_text,
          "installed --help should find the installed option table:\n%s" % r.describe())
    r = run_program([exe, "check"], dict(env, PROFILE_CPU_HERTZ="1000"), ctx.mkdtemp("cwd"))
    check(r.rc == 1 and "did you mean PROFILE_CPU_HZ?" in r.stdout_text,
          "installed check should judge with the installed parsers:\n%s" % r.describe())
    r = run_program([exe, "run", "--help"], env, ctx.mkdtemp("cwd"))
    docs = set(re.findall(r"(\S+/CONFIG\.md)", r.stdout_text))
    check(docs and all(os.path.isfile(p) for p in docs),
          "installed --help should point at the installed CONFIG.md: %s\n%s" % (sorted(docs), r.describe()))


LAYOUT = ["lib/libprofshim.so", "lib/profshim/options_dump", "bin/profshim", "share/profshim/cli/main.py", "share/profshim/cli/pprofile.py",
          "share/profshim/options.tsv", "share/profshim/profshim.conf", "share/profshim/profshim.env",
          "share/doc/profshim/README.md", "share/doc/profshim/docs/CONFIG.md", "share/doc/profshim/docs/systemd.md"]


def test_make_install_and_uninstall_into_a_prefix(ctx):
    prefix = os.path.join(ctx.mkdtemp("prefix"), "opt")
    _make(ctx, "install", "PREFIX=" + prefix)
    for f in LAYOUT:
        check(os.path.isfile(os.path.join(prefix, f)), "make install did not put %s in %s" % (f, prefix))
    lib = os.path.join(prefix, "lib", "libprofshim.so")
    for f in ("profshim.conf", "profshim.env"):
        text = open(os.path.join(prefix, "share", "profshim", f)).read()
        check(lib in text and "/usr/local/lib" not in text, "%s should name %s:\n%s" % (f, lib, indent(text)))
    _run_installed(ctx, os.path.join(prefix, "bin", "profshim"), lib)
    # Through a symlink on PATH, as /usr/local/bin links often are.
    link = os.path.join(ctx.mkdtemp("links"), "profshim")
    os.symlink(os.path.join(prefix, "bin", "profshim"), link)
    _run_installed(ctx, link, lib)
    _make(ctx, "uninstall", "PREFIX=" + prefix)
    left = [os.path.join(r, f) for r, _, fs in os.walk(prefix) for f in fs]
    check(not left, "make uninstall left %s" % left)


def _control(deb):
    return subprocess_ok(["dpkg-deb", "-f", deb])


def test_make_deb_layout_dependencies_and_a_run_from_it(ctx):
    out = _make(ctx, "deb")
    debs = glob.glob(os.path.join(ctx.build, "profshim_*.deb"))
    check(len(debs) == 1 and debs[0] in out, "make deb should name the one package it made: %s\n%s" % (debs, out))
    deb = debs[0]
    info = _control(deb)
    fields = dict(re.findall(r"^(\S+): (.*)$", info, flags=re.M))
    arch = subprocess_ok(["dpkg", "--print-architecture"]).strip()
    check(fields.get("Package") == "profshim" and fields.get("Architecture") == arch, "control:\n%s" % indent(info))
    depends = [d.strip() for d in fields.get("Depends", "").split(",")]
    check(fields.get("Suggests") == "golang-go, graphviz", "Suggests golang-go, graphviz:\n%s" % indent(info))
    # Every library the shim dlopen()s by name, and what it links, is a
    # package it depends on, and each is satisfied on this machine.
    sonames = set(re.findall(r'dlopen(?:\(\))?\("(lib[^"]+)"', "".join(
        open(f).read() for f in glob.glob(os.path.join(REPO, "shim", "*.cc")))))
    check({"libdw.so.1", "libz.so.1"} <= sonames, "dlopen()ed libraries found in shim/: %s" % sonames)
    needed = ["libc.so.6"] + sorted(sonames)
    for so in needed:
        owner = subprocess_ok(["sh", "-c", "m=$(gcc -print-multiarch); { dpkg -S /lib/$m/%s || dpkg -S /usr/lib/$m/%s; }"
                                            " 2>/dev/null | cut -d: -f1 | head -n 1" % (so, so)]).strip()
        dep = [d for d in depends if d.split()[0] == owner]
        check(dep, "%s comes from %s, which Depends (%s) lacks" % (so, owner, fields.get("Depends")))
        m = re.match(r"(\S+) \(>= (\S+)\)", dep[0])
        if m:
            have = subprocess_ok(["dpkg-query", "-W", "-f=${Version}", owner])
            check(subprocess.run(["dpkg", "--compare-versions", have, "ge", m.group(2)]).returncode == 0,
                  "Depends %s, but this machine has %s %s" % (dep[0], owner, have))
    check("python3" in [d.split()[0] for d in depends], "ls/top/diff/report need python3: %s" % depends)
    listing = subprocess_ok(["dpkg-deb", "-c", deb])
    for f in LAYOUT:
        check(re.search(r"^\S+ root/root .* \./usr/%s$" % re.escape(f), listing, flags=re.M),
              "the package lacks ./usr/%s (owned by root):\n%s" % (f, indent(listing)))
    # Installed into a scratch root by dpkg itself, then run from there.
    root = ctx.mkdtemp("root")
    for sub in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
        os.makedirs(os.path.join(root, sub))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    subprocess_ok(["dpkg", "--root=" + root, "--force-depends", "--log=/dev/null", "-i", deb])
    status = subprocess_ok(["dpkg", "--root=" + root, "-s", "profshim"])
    check("Status: install ok installed" in status, "dpkg --root did not install it:\n%s" % indent(status))
    env_file = open(os.path.join(root, "usr/share/profshim/profshim.env")).read()
    check("LD_PRELOAD=/usr/lib/libprofshim.so\n" in env_file, "the packaged env file names /usr/lib:\n%s" % env_file)
    _run_installed(ctx, os.path.join(root, "usr/bin/profshim"), os.path.join(root, "usr/lib/libprofshim.so"))
