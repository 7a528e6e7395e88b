"""Rust programs' functions named as Rust's own tools name them.

tests/workloads/rust/rs_prog.rs, built here with rustc twice: once with
rustc's legacy mangling (C++'s _ZN...E with a hash segment and $LT$-style
escapes) and once with v0 (_R..., rustc's default now). A generic function,
a non-generic one, and a trait's method for a generic type's instance and
for a plain type each take CPU. Without a v0 demangler every frame of the v0
build, the standard library's included, was its raw _R... symbol.
"""

import os
import re
import shutil
import subprocess

from common import Skip, check, clip, indent
from st_helpers import workload_source

ROUNDS = "100"  # about 0.6 s of CPU, 150 samples per hot function at 1000 Hz

# The hot functions' names in each build. A v0 symbol records the type
# arguments of a generic function's or impl's instance, legacy does not:
# rustc-demangle prints them so, and so does the profile.
HOT = {
    "legacy": ["rs_prog::churn", "<rs_prog::Plain as rs_prog::Spin>::spin", "rs_prog::burn",
               "<rs_prog::Mixer<T> as rs_prog::Spin>::spin"],
    "v0": ["rs_prog::churn", "<rs_prog::Plain as rs_prog::Spin>::spin", "rs_prog::burn::<u32>",
           "<rs_prog::Mixer<u32> as rs_prog::Spin>::spin"],
}
MANGLED_PREFIX = {"legacy": "_ZN", "v0": "_R"}

# What a name still mangled, or demangled with its hash, looks like.
RAW = re.compile(r"^_R|^_ZN|\$(LT|GT|u20|C|RF|BP|SP)\$|::h[0-9a-f]{16}$|\[[0-9a-f]{8,16}\]")


def _rustc():
    """rustc on PATH, else rustup's default place; Skip if it does not run."""
    home = os.environ.get("CARGO_HOME") or os.path.join(os.path.expanduser("~"), ".cargo")
    rustc = shutil.which("rustc") or shutil.which("rustc", path=os.path.join(home, "bin"))
    if not rustc:
        raise Skip("rustc not found (PATH, %s/bin): rustup or Debian's rustc installs it" % home)
    p = subprocess.run([rustc, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    if p.returncode != 0:
        raise Skip("%s does not run: %s" % (rustc, clip(p.stdout, 300)))
    # -C symbol-mangling-version is stable from 1.59 on, edition 2021 from
    # 1.56: Debian 11's rustc is 1.48.
    m = re.match(rb"rustc (\d+)\.(\d+)", p.stdout)
    if m and (int(m.group(1)), int(m.group(2))) < (1, 59):
        raise Skip("%s is older than 1.59, which builds with either mangling: %s" % (
            rustc, p.stdout.decode(errors="replace").strip()))
    return rustc


def _build(ctx, rustc, mangling):
    d = ctx.mkdtemp("rs-" + mangling)
    src = os.path.join(d, "rs_prog.rs")
    shutil.copy(workload_source(os.path.join("rust", "rs_prog.rs")), src)
    exe = os.path.join(d, "rs_prog")
    env = ctx.env(preload=False)
    argv = [rustc, "--edition", "2021", "-O", "-g", "-C", "symbol-mangling-version=" + mangling]
    if mangling == "legacy":
        # Newer rustc (1.95 here) takes legacy only as an unstable option.
        argv += ["-Z", "unstable-options"]
        env["RUSTC_BOOTSTRAP"] = "1"
    p = subprocess.run(argv + ["-o", exe, src], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300)
    check(p.returncode == 0, "rustc (%s) failed:\n%s\n%s" % (mangling, " ".join(argv), indent(clip(p.stdout))))
    return exe


def test_rust_names_read_as_rust_writes_them(ctx):
    """Both builds of rs_prog at 1000 Hz: each hot function is in the CPU
    profile under its Rust name (rs_prog::churn, <rs_prog::Plain as
    rs_prog::Spin>::spin), the same in both builds where the manglings
    record the same thing, from a symbol of that build's mangling; no frame
    of either profile, the standard library's included, is left mangled or
    keeps a hash or a crate disambiguator."""
    rustc = _rustc()
    names = {}
    for mangling in ("legacy", "v0"):
        exe = _build(ctx, rustc, mangling)
        r, d = ctx.profile([exe, ROUNDS], PROFILE_CPU_HZ=1000)
        check(r.stdout_text.startswith("rs_prog: "), "%s: rs_prog printed no checksum\n%s" % (mangling, r.describe()))
        prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
        frames = [f for loc in prof.locations.values() for f in loc.frames]
        names[mangling] = {f.name for f in frames}
        table = indent(prof.cum_table("samples", 25))
        for want in HOT[mangling]:
            check(prof.cum(want, "samples") > 0, "%s build: no CPU in %r; the profile's functions:\n%s" % (
                mangling, want, table))
            systems = {f.system_name or f.name for f in frames if f.name == want}
            check(all(s.startswith(MANGLED_PREFIX[mangling]) for s in systems),
                  "%s build: %r is named from %s, not from %s... symbols (did rustc mangle as asked?)" % (
                      mangling, want, sorted(systems), MANGLED_PREFIX[mangling]))
        raw = sorted(n for n in names[mangling] if RAW.search(n))
        check(not raw, "%s build: names left mangled or with a hash:\n%s\nthe profile's functions:\n%s" % (
            mangling, indent("\n".join(raw[:20])), table))
    for n in ("rs_prog::main", "rs_prog::churn", "<rs_prog::Plain as rs_prog::Spin>::spin"):
        check(n in names["legacy"] and n in names["v0"], "%r is not named the same in both builds:\n"
              "legacy: %s\nv0: %s" % (n, sorted(x for x in names["legacy"] if "rs_prog" in x),
                                      sorted(x for x in names["v0"] if "rs_prog" in x)))
