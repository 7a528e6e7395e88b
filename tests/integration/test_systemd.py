"""env/: the drop-in loads cleanly in a sandboxed sample unit
(`systemd-analyze verify`, which needs no running manager), and the
EnvironmentFile, parsed by systemd's own parser, sets exactly what it
should."""

import os
import re
import shutil
import subprocess

from cli_helpers import REPO, shim_table
from common import Skip, check, indent

SAMPLE = """[Unit]
Description=a service to profile once
[Service]
ExecStart=/bin/sleep 1000
User=nobody
PrivateTmp=yes
ProtectSystem=strict
ProtectHome=yes
"""
GENERATOR = "systemd/user-environment-generators/30-systemd-environment-d-generator"


def _tool(path_or_name, package):
    found = shutil.which(path_or_name) if "/" not in path_or_name else (
        path_or_name if os.access(path_or_name, os.X_OK) else None)
    check(found, "%s not found: install Debian's %s (scripts/install-deps does)" % (path_or_name, package))
    return found


def test_dropin_passes_systemd_analyze_verify(ctx):
    exe = _tool("systemd-analyze", "systemd")
    unit_dir = os.path.join(ctx.mkdtemp("units"), "system")
    os.makedirs(os.path.join(unit_dir, "sample.service.d"))
    with open(os.path.join(unit_dir, "sample.service"), "w") as f:
        f.write(SAMPLE)
    verify = lambda: subprocess.run([exe, "verify", "--man=no", os.path.join(unit_dir, "sample.service")],
                                    capture_output=True, timeout=60, env=dict(os.environ, SYSTEMD_LOG_LEVEL="info"))
    # The unit alone first: where verify cannot run at all (systemd 247 in
    # a chroot with no cgroup of its own: "Failed to initialize manager"),
    # there is nothing to learn about the drop-in.
    p = verify()
    if p.returncode != 0:
        raise Skip("systemd-analyze verify fails here on a unit without the drop-in:\n%s" % indent(
            (p.stdout + p.stderr).decode(errors="replace")))
    dropin = os.path.join(unit_dir, "sample.service.d", "profshim.conf")
    shutil.copy(os.path.join(REPO, "env", "profshim.conf"), dropin)
    p = verify()
    said = (p.stdout + p.stderr).decode(errors="replace")
    check(p.returncode == 0, "systemd-analyze verify failed (%d):\n%s" % (p.returncode, indent(said)))
    # verify loads the drop-in and only warns about what it ignores there
    # (an unknown key, a bad value, an unnormalized path): none may appear.
    check("profshim.conf" not in said, "systemd-analyze warns about the drop-in:\n%s" % indent(said))
    text = open(dropin).read()
    for want in ("StateDirectory=profshim/%N", "PROFILE_DIR=%S/profshim/%N", "LD_PRELOAD="):
        check(want in text, "the drop-in should set %s:\n%s" % (want, indent(text)))
    # The directory systemd makes is the one the shim writes: PROFILE_DIR is
    # %S/ and the StateDirectory= of the same file, whatever it is edited to.
    settings = _settings(text)
    state, env = settings.get("StateDirectory", []), settings.get("Environment", [])
    dirs = [e.split("=", 1)[1] for e in env if e.startswith("PROFILE_DIR=")]
    check(len(state) == 1 and dirs == ["%S/" + state[0]],
          "the drop-in's PROFILE_DIR %s is not its StateDirectory= %s under %%S" % (dirs, state))
    # A setup error exits with the shim's status; under Restart= that would
    # be a loop of starts that each fail the same way.
    status = re.search(r"exit_group\((\d+)\)", open(os.path.join(REPO, "shim", "setup.cc")).read())
    check(status, "cannot find the setup error's exit status in shim/setup.cc")
    check(settings.get("RestartPreventExitStatus") == [status.group(1)],
          "the drop-in should set RestartPreventExitStatus=%s (a setup error's status), has %s" % (
              status.group(1), settings.get("RestartPreventExitStatus")))


def _settings(text):
    """{key: [value, ...]} of a unit file's uncommented lines."""
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def _generated(exe, conf_dir):
    p = subprocess.run([exe], env={"XDG_CONFIG_HOME": conf_dir, "PATH": "/usr/bin:/bin"},
                       capture_output=True, timeout=30)
    check(p.returncode == 0, "%s failed: %s" % (exe, p.stderr.decode(errors="replace")))
    return dict(l.split("=", 1) for l in p.stdout.decode().splitlines() if "=" in l)


def test_environment_file_as_systemd_parses_it(ctx):
    # systemd's environment.d generator reads its files with load_env_file,
    # the parser of EnvironmentFile=; it also expands $VAR, which an
    # EnvironmentFile does not: the file has no '$', so both read the same.
    gen = next((p for p in ("/usr/lib/" + GENERATOR, "/lib/" + GENERATOR) if os.access(p, os.X_OK)), None)
    check(gen, "systemd's environment.d generator (%s) not found: install Debian's systemd" % GENERATOR)
    text = open(os.path.join(REPO, "env", "profshim.env")).read()
    check("$" not in text, "the EnvironmentFile must not use $ (EnvironmentFile= does not expand it)")
    empty, conf = ctx.mkdtemp("xdg0"), ctx.mkdtemp("xdg")
    os.makedirs(os.path.join(conf, "environment.d"))
    shutil.copy(os.path.join(REPO, "env", "profshim.env"), os.path.join(conf, "environment.d", "profshim.conf"))
    before, after = _generated(gen, empty), _generated(gen, conf)
    got = {k: v for k, v in after.items() if before.get(k) != v}
    # Not PROFILE_DIR nor PROFILE_NAME: the drop-in sets them from the unit's
    # name beside its StateDirectory=, which a file without specifiers
    # cannot; a value here would override them with a directory nobody made.
    want = {"LD_PRELOAD": "/usr/local/lib/libprofshim.so"}
    check(got == want, "the EnvironmentFile should set exactly %s, systemd reads %s" % (want, got))
    check("StateDirectory" in text, "profshim.env should say why it sets no PROFILE_DIR:\n%s" % indent(text))
    # Every other variable of the shim's table is there, commented, at its
    # default; one whose default is no value ("(unset: ...)"), with an example.
    for var, default, _, _ in shim_table():
        if var not in want and var not in ("PROFILE_DIR", "PROFILE_NAME"):
            line = "#%s=" % var if default.startswith("(") else "#%s=%s\n" % (var, default)
            check(line in text, "profshim.env lacks the line %s" % line.strip())
