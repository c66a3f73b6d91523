#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Print the host's configured "deb" entries as deb822 stanzas of another type.

A private apt state (mk/apt.sh) needs sources that reach the same archive as
the host: same URIs, suites, components and keyring, so that whatever mirror,
proxy or snapshot the machine is configured with is used, and no archive host
name is written by the project.  The host's entries are read where apt reads
them (Dir::Etc::sourcelist and Dir::Etc::sourceparts as apt-config reports
them, so APT_CONFIG is honoured), in both the one-line and the deb822 format.

    apt-sources.py --type deb-src            # the source-package twins
    apt-sources.py --type deb --arch i386    # binary entries usable for i386

Entries restricted to other architectures (Architectures: amd64) are left out
of a binary result for --arch, and disabled entries (Enabled: no) always.
"""

import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

# One-line options whose deb822 field has another name (sources.list(5)).
ONE_LINE_FIELD = {"arch": "Architectures", "lang": "Languages", "target": "Targets",
                  "signed-by": "Signed-By", "trusted": "Trusted"}
# What makes the entry an entry, written by hand below.
OWN_FIELDS = {"types", "uris", "suites", "components", "enabled"}


def apt_dirs():
    """Return (main list, parts folder) as apt itself resolves them."""
    out = subprocess.run(
        ["apt-config", "shell", "SL", "Dir::Etc::sourcelist/f", "SP", "Dir::Etc::sourceparts/d"],
        check=True, capture_output=True, text=True).stdout
    env = {}
    for word in shlex.split(out, posix=True):
        name, _, value = word.partition("=")
        env[name] = value.rstrip(";")
    return env.get("SL", ""), env.get("SP", "")


def one_line_entries(path):
    """Yield entry dicts of a one-line format file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^(\S+)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
            if not m:
                print(f"apt-sources: {path}: cannot parse: {line}", file=sys.stderr)
                continue
            kind, opts, uri, suite, comps = m.groups()
            entry = {"types": [kind], "uris": [uri], "suites": [suite],
                     "components": comps.split(), "fields": {}}
            for opt in (opts or "").split():
                key, _, value = opt.partition("=")
                value = value.replace(",", " ")
                # "arch-=i386" removes an architecture: keep it for the
                # filter; other "+=" and "-=" forms are not carried.
                if key.lower() == "arch-":
                    entry["fields"]["architectures-remove"] = ("Architectures-Remove", value)
                    continue
                if key.endswith(("+", "-")):
                    continue
                name = ONE_LINE_FIELD.get(key.lower(), key)
                entry["fields"][name.lower()] = (name, value)
            yield entry


def deb822_entries(path):
    """Yield entry dicts of a deb822 file (continuation lines kept verbatim)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields = {}
        last = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and last:
                name, value = fields[last]
                fields[last] = (name, value + "\n" + line)
                continue
            name, sep, value = line.partition(":")
            if not sep:
                continue
            last = name.strip().lower()
            fields[last] = (name.strip(), value.strip())
        if "types" not in fields:
            continue
        get = lambda k: fields.pop(k, ("", ""))[1].split()
        entry = {"types": get("types"), "uris": get("uris"), "suites": get("suites"),
                 "components": get("components"),
                 "enabled": fields.pop("enabled", ("", "yes"))[1].strip().lower(),
                 "fields": fields}
        yield entry


# The words apt reads as false in a boolean field (StringToBool).
FALSE_WORDS = {"no", "false", "without", "off", "disable", "0"}


def host_entries():
    main, parts = apt_dirs()
    files = []
    if main and os.path.isfile(main):
        files.append((main, one_line_entries))
    if parts and os.path.isdir(parts):
        for path in sorted(glob.glob(os.path.join(parts, "*"))):
            if path.endswith(".list"):
                files.append((path, one_line_entries))
            elif path.endswith(".sources"):
                files.append((path, deb822_entries))
    for path, parse in files:
        yield from parse(path)


def derive(entry, kind, arch):
    """Return the deb822 stanza of <entry> as a <kind> entry, or None."""
    if "deb" not in entry["types"] or entry.get("enabled", "yes") in FALSE_WORDS:
        return None
    # A CD-ROM's URI is apt's own notation, not a location another state can use.
    if any(uri.startswith("cdrom:") for uri in entry["uris"]):
        return None
    fields = dict(entry["fields"])
    archs = fields.pop("architectures", None)
    removed = fields.pop("architectures-remove", None)
    if kind == "deb" and archs and arch not in archs[1].split():
        return None
    if kind == "deb" and removed and arch in removed[1].split():
        return None
    lines = [f"Types: {kind}", "URIs: " + " ".join(entry["uris"]),
             "Suites: " + " ".join(entry["suites"])]
    if entry["components"]:
        lines.append("Components: " + " ".join(entry["components"]))
    for key, (name, value) in fields.items():
        if key not in OWN_FIELDS:
            lines.append(f"{name}: {value}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", choices=("deb", "deb-src"), required=True)
    ap.add_argument("--arch", required=True)
    args = ap.parse_args()

    seen = []
    for entry in host_entries():
        stanza = derive(entry, args.type, args.arch)
        if stanza and stanza not in seen:
            seen.append(stanza)
    if not seen:
        sys.exit(f"apt-sources: no usable deb entry in the host's apt sources for {args.type}")
    print("# Derived by mk/apt-sources.py from the host's deb entries.\n")
    print("\n\n".join(seen))


if __name__ == "__main__":
    main()
