#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Assemble, refresh and export the patch series.

The repository holds the series in two forms that belong together:

  patches/series        the entries, in order (quilt format, one file a line)
  patches/NNNN-*.patch  one entry: a format-patch style header (From, Subject,
                        changelog, Signed-off-by), then after the "---" line a
                        "Files:" block naming the new files of this entry, then
                        the diff against existing upstream files (may be empty)
  <kernel path>/...     the new files themselves (arch/, include/, kernel/,
                        Documentation/, tools/ ...), each named by exactly one
                        entry's Files: block

"tree" turns that into $BUILD/src, a git repository with the base commit and
one commit per entry (its diff plus its new files).  Commits are made with git
plumbing in a private index and are deterministic, so an unchanged repository
gives the same commits; the work tree is then moved with "git reset --keep",
which rewrites only the files that differ, so kbuild rebuilds only those.

"refresh" does the reverse for edits made in $BUILD/src: new files and edits of
new files go back to their kernel paths in the repository, edits of upstream
files into the patch of the entry that already touches the file (or ENTRY=).

"check" fails when $BUILD/src holds edits that are not in the repository.
"export" writes the upstream series with git format-patch.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD") or os.path.join(TOP, "build")
SRC = os.path.join(BUILD, "src")
PATCHES = os.path.join(TOP, "patches")
SERIES = os.path.join(PATCHES, "series")
TREE_HEAD = os.path.join(BUILD, "tree-head")
DEFAULT_DATE = "Sun, 29 Nov 2026 00:00:00 +0000"


class SeriesError(Exception):
    pass


def git(*args, cwd=SRC, env=None, check=True, input=None):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    res = subprocess.run(["git", *args], cwd=cwd, env=full_env, input=input,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if check and res.returncode:
        raise SeriesError("git %s failed:\n%s%s" %
                          (" ".join(args), res.stdout, res.stderr))
    return res


class Entry:
    """One series entry, parsed from its patch file."""

    def __init__(self, name):
        self.name = name
        self.path = os.path.join(PATCHES, name)
        if not os.path.isfile(self.path):
            raise SeriesError("%s: listed in patches/series but missing" % name)
        with open(self.path) as f:
            text = f.read()
        sep = re.search(r"^---$", text, re.M)
        if not sep:
            raise SeriesError("%s: no '---' line after the changelog" % name)
        self.preamble = text[:sep.end()] + "\n"
        rest = text[sep.end():]
        diff_at = re.search(r"^diff --git ", rest, re.M)
        self.diff = rest[diff_at.start():] if diff_at else ""
        notes = rest[:diff_at.start()] if diff_at else rest
        self.files = self._parse_files(notes)
        self._parse_header(self.preamble[:sep.start()])

    def _parse_files(self, notes):
        files = []
        block = re.search(r"^Files:[ \t]*\n((?:[ \t]+\S.*\n?)*)", notes, re.M)
        if block:
            files = [line.strip() for line in block.group(1).splitlines()]
        if len(set(files)) != len(files):
            raise SeriesError("%s: a file is listed twice under Files:" %
                              self.name)
        return files

    def _parse_header(self, head):
        lines = head.split("\n")
        if lines and lines[0].startswith("From ") and ":" not in lines[0][:5]:
            lines = lines[1:]
        headers = {}
        i = 0
        while i < len(lines) and lines[i]:
            m = re.match(r"([A-Za-z-]+):\s*(.*)", lines[i])
            if not m:
                raise SeriesError("%s: bad header line %r" %
                                  (self.name, lines[i]))
            key, val = m.group(1).lower(), m.group(2)
            while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") \
                    and lines[i + 1].strip():
                i += 1
                val += " " + lines[i].strip()
            headers[key] = val
            i += 1
        for key in ("from", "subject"):
            if key not in headers:
                raise SeriesError("%s: no %s: header" % (self.name, key))
        m = re.match(r"(.*?)\s*<([^>]+)>", headers["from"])
        if not m:
            raise SeriesError("%s: From: is not 'Name <mail>'" % self.name)
        self.author, self.email = m.group(1).strip('" '), m.group(2)
        self.date = headers.get("date", DEFAULT_DATE)
        self.subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers["subject"])
        body = "\n".join(lines[i:]).strip("\n")
        if "Signed-off-by:" not in body:
            raise SeriesError("%s: no Signed-off-by" % self.name)
        self.message = self.subject + "\n\n" + body + "\n"

    def touched_upstream_files(self):
        return set(re.findall(r"^diff --git a/(\S+) b/", self.diff, re.M))

    def write(self, files, diff, stat):
        out = self.preamble
        if files:
            out += "Files:\n" + "".join("\t%s\n" % f for f in files)
        if diff:
            out += "\n" + stat + "\n" + diff
        with open(self.path, "w") as f:
            f.write(out)


def read_series():
    if not os.path.isfile(SERIES):
        return []
    names = []
    with open(SERIES) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line.split()[0])
    return [Entry(n) for n in names]


def kernel_topdirs():
    res = git("ls-tree", "--name-only", "-d", "base")
    return set(res.stdout.split())


def overlay_files():
    """Files of the repository that live at kernel paths."""
    res = git("ls-files", "-co", "--exclude-standard", cwd=TOP)
    top = kernel_topdirs()
    return sorted(p for p in res.stdout.splitlines()
                  if "/" in p and p.split("/", 1)[0] in top
                  and os.path.isfile(os.path.join(TOP, p)))


def validate(entries):
    owner = {}
    for e in entries:
        for f in e.files:
            if f in owner:
                raise SeriesError("%s is listed by both %s and %s" %
                                  (f, owner[f], e.name))
            owner[f] = e.name
            if not os.path.isfile(os.path.join(TOP, f)):
                raise SeriesError("%s: lists %s, which does not exist" %
                                  (e.name, f))
    orphans = [f for f in overlay_files() if f not in owner]
    if orphans:
        raise SeriesError("overlay files that belong to no series entry "
                          "(add them to a Files: block):\n  " +
                          "\n  ".join(orphans))
    if owner:
        res = git("ls-tree", "-r", "--name-only", "base", "--", *owner)
        upstream = res.stdout.split()
        if upstream:
            raise SeriesError("these exist upstream; change them with a "
                              "patch, not an overlay file:\n  " +
                              "\n  ".join(upstream))
    return owner


def entry_env(e):
    return {"GIT_AUTHOR_NAME": e.author, "GIT_AUTHOR_EMAIL": e.email,
            "GIT_AUTHOR_DATE": e.date, "GIT_COMMITTER_NAME": e.author,
            "GIT_COMMITTER_EMAIL": e.email, "GIT_COMMITTER_DATE": e.date}


def add_file(env, relpath, srcpath):
    blob = git("hash-object", "-w", "--no-filters", srcpath).stdout.strip()
    mode = "100755" if os.access(srcpath, os.X_OK) else "100644"
    git("update-index", "--add", "--cacheinfo", "%s,%s,%s" %
        (mode, blob, relpath), env=env)


def apply_entry(env, e):
    if not e.diff:
        return
    res = git("apply", "--cached", "--verbose", "-", env=env, check=False,
              input=e.diff)
    if res.returncode:
        rejected = re.findall(r"error: patch failed: (\S+)", res.stderr)
        msg = "%s does not apply to the base" % e.name
        if rejected:
            msg += "; rejected hunks at:\n  " + "\n  ".join(rejected)
        raise SeriesError(msg + "\n" + res.stderr.strip())


def build_commits(entries):
    """Commit base + entries in a private index; return the list of commits."""
    commits = []
    parent = git("rev-parse", "base^{commit}").stdout.strip()
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git("read-tree", parent, env=env)
        for e in entries:
            apply_entry(env, e)
            for f in e.files:
                add_file(env, f, os.path.join(TOP, f))
            tree = git("write-tree", env=env).stdout.strip()
            env_c = dict(env, **entry_env(e))
            parent = git("commit-tree", tree, "-p", parent, env=env_c,
                         input=e.message).stdout.strip()
            commits.append(parent)
    return commits


def worktree_edits():
    res = git("status", "--porcelain", "--untracked-files=all")
    return [line for line in res.stdout.splitlines() if line]


def recorded_head():
    try:
        with open(TREE_HEAD) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def record_head(commit):
    # Rewritten only on change: the kernel .config depends on this file.
    if recorded_head() != commit:
        with open(TREE_HEAD, "w") as f:
            f.write(commit + "\n")


def cmd_tree(args):
    entries = read_series()
    validate(entries)
    commits = build_commits(entries)
    new = commits[-1] if commits else git("rev-parse", "base").stdout.strip()
    head = git("rev-parse", "HEAD").stdout.strip()
    if head == new and not worktree_edits():
        record_head(new)
        print("tree: up to date (%d entries)" % len(entries))
        return 0
    edits = worktree_edits()
    moved = recorded_head() not in (None, head)
    if (edits or moved) and not args.force:
        raise SeriesError("build/src holds edits that are not in the "
                          "repository:\n  " + "\n  ".join(edits or
                                                          ["commits on HEAD"])
                          + "\nrun 'make refresh' to keep them, or "
                          "'make tree FORCE=1' to drop them")
    if args.force:
        git("reset", "-q", "--hard", new)
        git("clean", "-fdq")
    else:
        git("reset", "-q", "--keep", new)
    record_head(new)
    print("tree: %s (%d entries)" % (new[:12], len(entries)))
    return 0


def owner_of(path, entries, wanted):
    if wanted:
        return wanted
    for e in reversed(entries):
        if path in e.touched_upstream_files():
            return e
    raise SeriesError("%s: no entry touches it yet; say which: "
                      "make refresh ENTRY=<patch file name>" % path)


def changed_paths(since):
    res = git("diff", "--name-status", "--no-renames", since)
    changes = {}
    for line in res.stdout.splitlines():
        status, path = line.split("\t", 1)
        changes[path] = status[0]
    res = git("ls-files", "-o", "--exclude-standard")
    for path in res.stdout.splitlines():
        changes[path] = "A"
    return changes


def regenerate_patch(e, parent, commit, paths):
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git("read-tree", commit, env=env)
        for p in paths:
            full = os.path.join(SRC, p)
            if os.path.exists(full):
                add_file(env, p, full)
            else:
                git("update-index", "--force-remove", p, env=env)
        tree = git("write-tree", env=env).stdout.strip()
    excludes = [":(exclude)%s" % f for f in e.files]
    diff = git("diff", "--no-color", "--no-ext-diff", parent, tree, "--",
               ".", *excludes).stdout
    stat = git("diff", "--stat=72", "--summary", parent, tree, "--", ".",
               *excludes).stdout
    e.write(e.files, diff, stat)


def cmd_refresh(args):
    entries = read_series()
    owners = validate(entries)
    since = recorded_head()
    if not since:
        raise SeriesError("no assembled tree: run 'make tree' first")
    chain = git("rev-list", "--reverse", "base.." + since).stdout.split()
    if len(chain) != len(entries):
        raise SeriesError("build/src does not match patches/series; "
                          "run 'make tree' first")
    wanted = None
    if args.entry:
        matches = [e for e in entries if e.name == args.entry]
        if not matches:
            raise SeriesError("ENTRY=%s is not in patches/series" % args.entry)
        wanted = matches[0]
    upstream = {}
    for path, status in sorted(changed_paths(since).items()):
        if path in owners:
            if status == "D":
                raise SeriesError("%s was deleted in build/src; remove it from "
                                  "the repository and its Files: block" % path)
            shutil.copy2(os.path.join(SRC, path), os.path.join(TOP, path))
            print("refresh: %s (new file of %s)" % (path, owners[path]))
            continue
        in_base = git("cat-file", "-e", "base:" + path, check=False)
        if in_base.returncode and status == "A":
            if not wanted:
                raise SeriesError("%s is a new file; say which entry it "
                                  "belongs to: make refresh ENTRY=<patch>" %
                                  path)
            dst = os.path.join(TOP, path)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(SRC, path), dst)
            wanted.files.append(path)
            wanted.write(wanted.files, wanted.diff, "")
            print("refresh: %s (new file, added to %s)" % (path, wanted.name))
            continue
        e = owner_of(path, entries, wanted)
        upstream.setdefault(e.name, []).append(path)
    entries = read_series()
    for i, e in enumerate(entries):
        if e.name not in upstream:
            continue
        later = [x.name for x in entries[i + 1:]
                 if set(upstream[e.name]) & x.touched_upstream_files()]
        if later:
            raise SeriesError("%s: a later entry (%s) touches the same "
                              "files" % (e.name, ", ".join(later)))
        parent = chain[i - 1] if i else "base"
        regenerate_patch(e, parent, chain[i], upstream[e.name])
        print("refresh: %s (%s)" % (e.name, ", ".join(upstream[e.name])))
    entries = read_series()
    validate(entries)
    commits = build_commits(entries)
    new = commits[-1] if commits else git("rev-parse", "base").stdout.strip()
    git("reset", "-q", new)
    record_head(new)
    left = worktree_edits()
    if left:
        raise SeriesError("after refresh build/src still differs:\n  " +
                          "\n  ".join(left))
    print("refresh: build/src is %s, the repository reproduces it" % new[:12])
    return 0


def cmd_check(args):
    if not os.path.isdir(os.path.join(SRC, ".git")):
        return 0
    edits = worktree_edits()
    head = git("rev-parse", "HEAD").stdout.strip()
    if recorded_head() not in (None, head):
        edits.append("HEAD moved: commits made in build/src")
    if edits:
        print("patches-check: build/src holds edits not in the repository "
              "(run 'make refresh'):")
        for line in edits:
            print("  " + line)
        return 1
    entries = read_series()
    validate(entries)
    commits = build_commits(entries)
    new = commits[-1] if commits else git("rev-parse", "base").stdout.strip()
    if new != head:
        print("patches-check: build/src is stale; 'make tree' updates it")
    return 0


def cmd_export(args):
    head = recorded_head()
    if not head:
        raise SeriesError("no assembled tree: run 'make tree' first")
    out = os.path.abspath(args.output)
    shutil.rmtree(out, ignore_errors=True)
    git("format-patch", "-q", "--cover-letter", "--base=base", "-o", out,
        "base.." + head)
    cover = os.path.join(out, "0000-cover-letter.patch")
    with open(os.path.join(PATCHES, "cover-letter")) as f:
        subject, _, blurb = f.read().partition("\n")
    with open(os.path.join(BUILD, "base-version")) as f:
        blurb = blurb.strip() + "\n\nBase: Debian %s %s\n" % (
            "linux-source-6.12", f.read().strip())
    with open(cover) as f:
        text = f.read()
    text = text.replace("*** SUBJECT HERE ***", subject.strip())
    text = text.replace("*** BLURB HERE ***", blurb.strip())
    with open(cover, "w") as f:
        f.write(text)
    print("series: %s" % out)
    return 0


def cmd_new(args):
    names = [e.name for e in read_series()]
    slug = re.sub(r"[^a-z0-9]+", "-", args.subject.lower()).strip("-")[:52]
    name = "%04d-%s.patch" % (len(names) + 1, slug)
    who = git("config", "user.name", cwd=TOP, check=False).stdout.strip()
    mail = git("config", "user.email", cwd=TOP, check=False).stdout.strip()
    who, mail = who or "Debug Store Team", mail or "ds@invalid"
    with open(os.path.join(PATCHES, name), "w") as f:
        f.write("From: %s <%s>\nDate: %s\nSubject: [PATCH] %s\n\n"
                "Say why.\n\nSigned-off-by: %s <%s>\n---\n" %
                (who, mail, DEFAULT_DATE, args.subject, who, mail))
    with open(SERIES, "a") as f:
        f.write(name + "\n")
    print(name)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("tree")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_tree)
    p = sub.add_parser("refresh")
    p.add_argument("--entry")
    p.set_defaults(fn=cmd_refresh)
    sub.add_parser("check").set_defaults(fn=cmd_check)
    p = sub.add_parser("export")
    p.add_argument("output")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("new")
    p.add_argument("subject")
    p.set_defaults(fn=cmd_new)
    args = ap.parse_args()
    try:
        return args.fn(args)
    except SeriesError as err:
        print("series: error: %s" % err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
