#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Assemble, refresh and export the patch series.

The repository holds the series in two forms that belong together:

  patches/series        the entries, in order (quilt format, one file a line)
  patches/NNNN-*.patch  one entry: a format-patch style header (From, Subject,
                        changelog, Signed-off-by), then after the "---" line a
                        "Files:" block naming the overlay files this entry
                        owns, then its diff (may be empty)
  <kernel path>/...     the overlay files (new files of the series: arch/,
                        include/, kernel/, Documentation/, tools/ ...), each
                        named by exactly one entry's Files: block, its owner,
                        and holding the file's content after the owner

The growth model: a new file may be created and changed by the diffs of
entries before its owner (ordinary hunks, "new file mode" included); its
owner is the last entry that changes it, and no entry after the owner may
touch it.  So a new file can grow over several entries.

"tree" turns that into $BUILD/src, a git repository with the base commit and
one commit per entry (its diff applied, then its overlay files written).  Commits are made with git
plumbing in a private index and are deterministic, so an unchanged repository
gives the same commits; the work tree is then moved with "git reset --keep",
which rewrites only the files that differ, so kbuild rebuilds only those.

"refresh" does the reverse: the commits of $BUILD/src are the editing surface.
Work-tree edits are first folded into the commits (an overlay file's edit into
its owner and later, an upstream file's into the last entry touching it or
ENTRY=, a new file into ENTRY=); history rewritten with git (fixup, split,
reorder) is taken as it is.  Then every entry is exported from its commit:
commit N <-> entry N.  Ownership is recomputed (a new file belongs to the
last commit that changes it), the owned files are copied to their kernel
paths, the rest of the commit's diff becomes the patch, and a changed commit
message or author becomes the patch header.  Entries whose commit did not
change are left byte for byte as they are.

"roundtrip" proves that the repository and the commits map onto each other.

"check" fails when $BUILD/src holds edits that are not in the repository.
"export" writes the upstream series with git format-patch: From: and
Signed-off-by: of whoever runs it (git config user.name/user.email), a
diffstat per patch, the cover letter from patches/cover-letter with the
overall diffstat, shortlog and base (Debian tarball and upstream version;
base-commit: is the tarball's commit in $BUILD/src), and To:/Cc: from
get_maintainer.pl per patch (people per patch, every list on every patch),
their union on the cover letter.  Nothing is sent.
"""

import argparse
import datetime
import email.utils
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD") or os.path.join(TOP, "build")
SRC = os.path.join(BUILD, "src")
PATCHES = os.path.join(TOP, "patches")
SERIES = os.path.join(PATCHES, "series")


def set_top(top):
    """Point the tool at another copy of the repository (roundtrip's)."""
    global TOP, PATCHES, SERIES
    TOP = top
    PATCHES = os.path.join(top, "patches")
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
        """Every path the entry's diff touches (upstream or not)."""
        return set(re.findall(r"^diff --git a/(\S+) b/", self.diff, re.M))

    def write(self, files, diff, stat):
        out = self.preamble
        if files:
            out += "Files:\n" + "".join("\t%s\n" % f for f in files)
        if diff:
            out += "\n" + stat + "\n" + diff
        with open(self.path, "w") as f:
            f.write(out)


GROUP_RE = re.compile(r"^#\s*group:\s*(\S.*?)\s*$")


def read_series_names():
    """The entry names and the group ends: [(name, group or None)]; a
    "# group: <name>" line ends the group at the entry before it."""
    if not os.path.isfile(SERIES):
        return []
    out = []
    with open(SERIES) as f:
        for line in f:
            m = GROUP_RE.match(line.strip())
            if m:
                if not out:
                    raise SeriesError("patches/series: '# group: %s' before "
                                      "any entry" % m.group(1))
                out[-1] = (out[-1][0], m.group(1))
                continue
            line = line.split("#", 1)[0].strip()
            if line:
                out.append((line.split()[0], None))
    return out


def read_series():
    return [Entry(n) for n, _ in read_series_names()]


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
    """Check the growth model; return {overlay file: owner entry name}."""
    owner = {}
    index = {}
    for i, e in enumerate(entries):
        for f in e.files:
            if f in owner:
                raise SeriesError("%s is listed by both %s and %s" %
                                  (f, owner[f], e.name))
            owner[f] = e.name
            index[f] = i
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
    for i, e in enumerate(entries):
        for f in sorted(e.touched_upstream_files()):
            if f not in index:
                continue
            if i == index[f]:
                raise SeriesError(
                    "%s: changes %s with a diff hunk and owns it (Files:); "
                    "the owner's changes are in the overlay file" % (e.name, f))
            if i > index[f]:
                raise SeriesError(
                    "%s: changes %s, which %s owns; the owner of a file is "
                    "the last entry that changes it: move %s to %s's Files: "
                    "block (make refresh does that from the commits)" %
                    (e.name, f, owner[f], f, e.name))
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


def linear_chain(tip):
    """The commits base..tip, oldest first; they must be a line on base."""
    base = git("rev-parse", "base^{commit}").stdout.strip()
    if git("merge-base", "--is-ancestor", base, tip, check=False).returncode:
        raise SeriesError("HEAD of build/src does not descend from 'base'")
    rows = git("rev-list", "--reverse", "--parents", base + ".." + tip)
    chain = []
    for row in rows.stdout.splitlines():
        ids = row.split()
        if len(ids) != 2 or ids[1] != (chain[-1] if chain else base):
            raise SeriesError("build/src's history base..HEAD is not a line "
                              "of commits (merge at %s)" % ids[0][:12])
        chain.append(ids[0])
    return chain


def commit_for(e, tree, parent):
    return git("commit-tree", tree, "-p", parent, env=entry_env(e),
               input=e.message).stdout.strip()


def tree_of(commit):
    return git("rev-parse", commit + "^{tree}").stdout.strip()


def match_chain(entries, chain):
    """Commit N <-> entry N.  Entries that 'series.py new' appended (no diff,
    no files) and that have no commit yet get an empty commit."""
    if len(chain) > len(entries):
        raise SeriesError(
            "build/src has %d commits on base, patches/series lists %d "
            "entries; for each new commit add an entry with "
            "'python3 mk/series.py new \"<subject>\"' (its header is taken "
            "from the commit), or squash the commit" %
            (len(chain), len(entries)))
    extra = entries[len(chain):]
    if any(e.diff or e.files for e in extra):
        raise SeriesError(
            "build/src has %d commits on base, patches/series lists %d "
            "entries (%s...): run 'make tree' first, or give each entry "
            "one commit" % (len(chain), len(entries), extra[0].name))
    chain = list(chain)
    for e in extra:
        parent = chain[-1] if chain else "base"
        chain.append(commit_for(e, tree_of(parent), parent))
    return chain


def fold_worktree(entries, chain, owners, wanted):
    """Fold the work-tree edits of build/src into the commits: an overlay
    file's into its owner and every later commit, an upstream file's into the
    last entry touching it (or ENTRY=) and later.  Returns the new chain."""
    index = {e.name: i for i, e in enumerate(entries)}
    target = {}
    for path, status in sorted(changed_paths(chain[-1]).items()):
        if path in owners:
            target[path] = index[owners[path]]
            continue
        touchers = [i for i, e in enumerate(entries)
                    if path in e.touched_upstream_files()
                    or path in e.files]
        if wanted is not None:
            later = [entries[i].name for i in touchers if i > wanted]
            if later:
                raise SeriesError("%s: a later entry (%s) touches it; its "
                                  "edit can only go there (or rewrite the "
                                  "commits in build/src)" %
                                  (path, ", ".join(later)))
            target[path] = wanted
        elif touchers:
            target[path] = touchers[-1]
        elif git("cat-file", "-e", "base:" + path, check=False).returncode:
            raise SeriesError("%s is a new file; say which entry it belongs "
                              "to: make refresh ENTRY=<patch>" % path)
        else:
            raise SeriesError("%s: no entry touches it yet; say which: "
                              "make refresh ENTRY=<patch file name>" % path)
    if not target:
        return chain
    new = []
    parent = "base"
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        for i, (e, c) in enumerate(zip(entries, chain)):
            git("read-tree", c, env=env)
            for p in sorted(p for p, t in target.items() if t <= i):
                full = os.path.join(SRC, p)
                if os.path.lexists(full):
                    add_file(env, p, full)
                else:
                    git("update-index", "--force-remove", p, env=env)
            tree = git("write-tree", env=env).stdout.strip()
            parent = commit_for(e, tree, parent)
            new.append(parent)
    for p, t in sorted(target.items()):
        print("refresh: %s -> %s%s" % (p, entries[t].name,
                                       " and later" if t < len(entries) - 1
                                       else ""))
    return new


def commit_header(commit):
    """(author line, message) of a commit object."""
    raw = git("cat-file", "commit", commit).stdout
    head, _, message = raw.partition("\n\n")
    author = [l for l in head.split("\n") if l.startswith("author ")][0]
    return author, message


def preamble_from_commit(commit):
    author, message = commit_header(commit)
    m = re.match(r"author (.*) <([^>]*)> (\d+) ([+-]\d{4})$", author)
    if not m:
        raise SeriesError("%s: cannot read its author line" % commit[:12])
    name, mail, stamp, tz = m.groups()
    offset = (1 if tz[0] == "+" else -1) * (int(tz[1:3]) * 60 + int(tz[3:]))
    when = datetime.datetime.fromtimestamp(
        int(stamp), datetime.timezone(datetime.timedelta(minutes=offset)))
    paras = message.strip("\n").split("\n\n", 1)
    subject = " ".join(l.strip() for l in paras[0].split("\n"))
    body = paras[1].strip("\n") if len(paras) > 1 else ""
    if "Signed-off-by:" not in body:
        raise SeriesError("commit %s (%s) has no Signed-off-by" %
                          (commit[:12], subject))
    return ("From: %s <%s>\nDate: %s\nSubject: [PATCH] %s\n\n%s\n---\n" %
            (name, mail, email.utils.format_datetime(when), subject, body))


def raw_diff(a, b):
    return git("diff-tree", "-r", "--no-renames", a, b).stdout


def write_blob(commit, path, dst):
    """Copy path of commit to dst (with its mode); only when it differs."""
    mode = git("ls-tree", commit, "--", path).stdout.split()[0]
    data = subprocess.run(["git", "cat-file", "blob", "%s:%s" % (commit, path)],
                          cwd=SRC, stdout=subprocess.PIPE, check=True).stdout
    try:
        with open(dst, "rb") as f:
            same = f.read() == data
    except FileNotFoundError:
        same = False
    if not same:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
    want = 0o755 if mode == "100755" else 0o644
    if os.stat(dst).st_mode & 0o777 != want:
        os.chmod(dst, want)
    return not same


def export_chain(entries, chain, force=False, quiet=False, old=None):
    """Write every entry from its commit (commit N <-> entry N).  An entry
    whose commit, parent and owned files are what the repository already
    assembles is left as it is, unless force.  Returns the changed names."""
    assert len(entries) == len(chain)
    base = git("rev-parse", "base^{commit}").stdout.strip()
    parents = [base] + chain[:-1]
    if old is None:
        try:
            old = build_commits(entries)
        except SeriesError:
            # Reordered or split: the entries as they stand do not
            # assemble in this order. Every entry comes from its commit.
            old = []
    changed = []
    for i, c in enumerate(chain):
        out = git("diff", "--name-only", "--no-renames", "-z", parents[i], c)
        changed.append([p for p in out.stdout.split("\0") if p])
    touched = sorted(set(p for ch in changed for p in ch))
    in_base = set()
    for k in range(0, len(touched), 500):
        in_base.update(git("ls-tree", "-r", "--name-only", base, "--",
                           *touched[k:k + 500]).stdout.split())
    last = {}
    for i, ch in enumerate(changed):
        for p in ch:
            if p not in in_base:
                last[p] = i
    owned = [[] for _ in chain]
    for p, i in sorted(last.items()):
        if not git("cat-file", "-e", "%s:%s" % (chain[i], p),
                   check=False).returncode:
            owned[i].append(p)
    before = set(validate(entries))
    after = set(p for o in owned for p in o)
    done = []
    for i, (e, c) in enumerate(zip(entries, chain)):
        files = sorted(owned[i])
        for p in files:
            if write_blob(c, p, os.path.join(TOP, p)) and not quiet:
                print("refresh: %s (overlay file of %s)" % (p, e.name))
        # the same change (paths, modes, blobs) as the entry makes now
        same_tree = bool(old) and raw_diff(parents[i], c) == raw_diff(
            old[i - 1] if i else base, old[i])
        same_head = bool(old) and commit_header(c) == commit_header(old[i])
        if not force and same_tree and same_head and files == sorted(e.files):
            continue
        if force or not same_head:
            e.preamble = preamble_from_commit(c)
        excludes = [":(exclude,top)%s" % f for f in files]
        diff = git("diff", "--no-color", "--no-ext-diff", "--no-renames",
                   parents[i], c, "--", ":/", *excludes).stdout
        stat = git("diff", "--no-renames", "--stat=72", "--summary",
                   parents[i], c, "--", ":/", *excludes).stdout
        e.write(files, diff, stat)
        done.append(e.name)
        if not quiet:
            print("refresh: %s (from commit %d%s)" %
                  (e.name, i + 1, "" if same_head else ", header too"))
    for p in sorted(before - after):
        os.remove(os.path.join(TOP, p))
        if not quiet:
            print("refresh: %s removed (no commit leaves it); git rm it" % p)
    return done


def reassemble(chain):
    """Rebuild from the repository; fail unless every commit's tree is the
    one exported from.  Returns the new commits."""
    entries = read_series()
    validate(entries)
    commits = build_commits(entries)
    for i, (a, b) in enumerate(zip(chain, commits)):
        if tree_of(a) != tree_of(b):
            diff = git("diff", "--stat", a, b).stdout
            raise SeriesError("entry %s does not reproduce commit %d "
                              "(a bug of mk/series.py):\n%s" %
                              (entries[i].name, i + 1, diff))
    return commits


def cmd_refresh(args):
    entries = read_series()
    owners = validate(entries)
    since = recorded_head()
    if not since:
        raise SeriesError("no assembled tree: run 'make tree' first")
    head = git("rev-parse", "HEAD").stdout.strip()
    wanted = None
    if args.entry:
        matches = [i for i, e in enumerate(entries) if e.name == args.entry]
        if not matches:
            raise SeriesError("ENTRY=%s is not in patches/series" % args.entry)
        wanted = matches[0]
    if head != since:
        if worktree_edits():
            raise SeriesError("build/src's commits were rewritten and it also "
                              "holds uncommitted edits; commit them (git "
                              "commit --fixup=<commit>, then git rebase -i "
                              "--autosquash base) or stash them first")
        if wanted is not None:
            raise SeriesError("ENTRY= is for work-tree edits; the commits "
                              "of build/src say where each change belongs")
        chain = match_chain(entries, linear_chain(head))
        print("refresh: exporting every entry from the %d commits of "
              "build/src" % len(chain))
    else:
        chain = match_chain(entries, linear_chain(since))
        chain = fold_worktree(entries, chain, owners, wanted)
    export_chain(entries, chain)
    new = reassemble(chain)
    new = new[-1] if new else git("rev-parse", "base").stdout.strip()
    git("reset", "-q", new)
    record_head(new)
    left = worktree_edits()
    if left:
        raise SeriesError("after refresh build/src still differs:\n  " +
                          "\n  ".join(left))
    print("refresh: build/src is %s, the repository reproduces it" % new[:12])
    return 0


def scratch_copy(dst):
    """patches/ and the overlay files of the repository, in dst."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(PATCHES, os.path.join(dst, "patches"))
    for p in overlay_files():
        os.makedirs(os.path.dirname(os.path.join(dst, p)), exist_ok=True)
        shutil.copy2(os.path.join(TOP, p), os.path.join(dst, p))
    git("init", "-q", dst, cwd=dst)


def snapshot(top):
    out = {}
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != ".git"]
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, top)] = (fh.read(),
                                                   os.access(full, os.X_OK))
    return out


def cmd_roundtrip(args):
    """The repository <-> commits mapping, proved on scratch copies."""
    real = TOP
    entries = read_series()
    validate(entries)
    chain = build_commits(entries)
    work = os.path.join(BUILD, "roundtrip")
    shutil.rmtree(work, ignore_errors=True)
    try:
        # 1. refresh of an unchanged tree changes nothing.
        a = os.path.join(work, "noop")
        scratch_copy(a)
        before = snapshot(a)
        set_top(a)
        done = export_chain(read_series(), chain, quiet=True, old=chain)
        if done or snapshot(a) != before:
            raise SeriesError("refresh of the unchanged series rewrote: %s" %
                              ", ".join(done or ["overlay files"]))
        print("roundtrip: refresh of the assembled series changes nothing")
        # 2. every entry exported afresh from its commit reassembles the
        # same trees, and exporting those again is byte for byte the same.
        b = os.path.join(work, "full")
        set_top(real)
        scratch_copy(b)
        set_top(b)
        export_chain(read_series(), chain, force=True, quiet=True, old=chain)
        again = reassemble(chain)
        first = snapshot(b)
        export_chain(read_series(), again, force=True, quiet=True, old=again)
        if snapshot(b) != first:
            raise SeriesError("a second full export differs from the first")
        print("roundtrip: %d entries exported from their commits reassemble "
              "the same %d trees; a second export is byte for byte the same"
              % (len(chain), len(chain)))
        # 3. growth: the last overlay file of the series is created by the
        # entry before its owner (half of it) and finished by the owner.
        set_top(real)
        owners = validate(entries)
        index = {e.name: i for i, e in enumerate(entries)}
        # A file that entry k-1's parent does not have yet: one that grew
        # from an older file (tools/bts/demo.c) cannot be "created" there.
        def absent_before(p):
            k = index[owners[p]]
            return k < 2 or git("cat-file", "-e", "%s:%s" % (chain[k - 2], p),
                                check=False).returncode != 0
        grow = max((p for p in owners
                    if index[owners[p]] > 0 and absent_before(p)),
                   key=lambda p: (index[owners[p]], p), default=None)
        if grow:
            k = index[owners[grow]]
            c = os.path.join(work, "grow")
            scratch_copy(c)
            set_top(c)
            es = read_series()
            data = git("cat-file", "blob", "%s:%s" % (chain[k], grow)).stdout
            half = "".join(data.splitlines(True)[:max(1, data.count("\n") // 2)])
            grown = []
            parent = chain[k - 2] if k >= 2 else "base"
            with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
                env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
                blob = git("hash-object", "-w", "--stdin",
                           input=half).stdout.strip()
                git("read-tree", chain[k - 1], env=env)
                git("update-index", "--add", "--cacheinfo",
                    "100644,%s,%s" % (blob, grow), env=env)
                tree = git("write-tree", env=env).stdout.strip()
                parent = commit_for(es[k - 1], tree, parent)
                grown = chain[:k - 1] + [parent]
                for e, old in zip(es[k:], chain[k:]):
                    parent = commit_for(e, tree_of(old), parent)
                    grown.append(parent)
            export_chain(es, grown, quiet=True, old=chain)
            es = read_series()
            if "new file mode" not in es[k - 1].diff or \
                    grow not in es[k - 1].touched_upstream_files() or \
                    grow not in es[k].files:
                raise SeriesError("the grown file %s is not created by %s's "
                                  "diff and owned by %s" %
                                  (grow, es[k - 1].name, es[k].name))
            regrown = reassemble(grown)
            first = snapshot(c)
            if export_chain(read_series(), grown, quiet=True,
                            old=regrown) or \
                    snapshot(c) != first:
                raise SeriesError("refresh after the growth is not stable")
            # an entry after the owner may not touch the file
            with open(es[k - 1].path) as f:
                rest = f.read().split("diff --git a/%s " % grow, 1)[1]
            hunk = "diff --git a/%s " % grow + re.split(
                r"^(?=diff --git )", rest, maxsplit=1, flags=re.M)[0]
            if k + 1 < len(es):
                with open(es[k + 1].path, "a") as f:
                    f.write(hunk)
                try:
                    validate(read_series())
                    raise SeriesError("an entry after the owner touched "
                                      "%s and validate() let it" % grow)
                except SeriesError as err:
                    if "which %s owns" % es[k].name not in str(err):
                        raise
            print("roundtrip: %s grown over %s and %s reassembles; "
                  "a later entry touching it is refused" %
                  (grow, es[k - 1].name, es[k].name))
    finally:
        set_top(real)
    shutil.rmtree(work, ignore_errors=True)
    print("roundtrip: ok")
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


def runner_identity():
    """The git identity of whoever runs 'make series' (the sender)."""
    who = git("config", "user.name", cwd=TOP, check=False).stdout.strip()
    mail = git("config", "user.email", cwd=TOP, check=False).stdout.strip()
    if not who or not mail:
        raise SeriesError("no git identity: the series goes out From: and "
                          "Signed-off-by: you; set it with git config "
                          "user.name \"Your Name\" and git config user.email "
                          "you@example.org")
    return who, mail


def base_description():
    """'Debian linux-source-6.12 <version> (Linux v6.12.N)'."""
    conf = {}
    with open(os.path.join(TOP, "mk", "base.conf")) as f:
        for line in f:
            m = re.match(r"(\w+)=(.*)", line.strip())
            if m:
                conf[m.group(1)] = m.group(2)
    try:
        with open(os.path.join(BUILD, "base-version")) as f:
            used = f.read().strip()
    except FileNotFoundError:
        used = conf.get("BASE_VERSION", "?")
    mk = git("show", "base:Makefile").stdout
    ver = dict(re.findall(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION) = ?(.*)$",
                          mk, re.M))
    upstream = "v%s.%s" % (ver.get("VERSION"), ver.get("PATCHLEVEL"))
    if ver.get("SUBLEVEL", "0") != "0":
        upstream += "." + ver["SUBLEVEL"]
    upstream += ver.get("EXTRAVERSION", "")
    return "Debian %s %s (Linux %s)" % (
        conf.get("BASE_PACKAGE", "linux-source-6.12"), used, upstream)


def outgoing_chain(entries, chain, who, mail):
    """The commits as they go out: author and Signed-off-by the sender's."""
    out = []
    parent = git("rev-parse", "base^{commit}").stdout.strip()
    for e, c in zip(entries, chain):
        _, message = commit_header(c)
        kept = [l for l in message.rstrip("\n").split("\n")
                if not re.match(r"Signed-off-by:\s*%s\s*<%s>\s*$" %
                                (re.escape(e.author), re.escape(e.email)), l)]
        while kept and not kept[-1].strip():
            kept.pop()
        sob = "Signed-off-by: %s <%s>" % (who, mail)
        if sob not in kept:
            if not re.match(r"[A-Za-z-]+: ", kept[-1]):
                kept.append("")
            kept.append(sob)
        # Dated now, as the sender's mail would be, not with the entry's
        # recorded date.
        env = dict(entry_env(e), GIT_AUTHOR_NAME=who, GIT_AUTHOR_EMAIL=mail,
                   GIT_COMMITTER_NAME=who, GIT_COMMITTER_EMAIL=mail)
        env.pop("GIT_AUTHOR_DATE", None)
        env.pop("GIT_COMMITTER_DATE", None)
        parent = git("commit-tree", tree_of(c), "-p", parent, env=env,
                     input="\n".join(kept) + "\n").stdout.strip()
        out.append(parent)
    return out


def recipients(patch):
    """(to, cc) of one patch file by the kernel's get_maintainer.pl:
    maintainers and supporters To:, reviewers and lists Cc:."""
    res = subprocess.run(
        ["perl", "scripts/get_maintainer.pl", "--no-git", "--no-git-fallback",
         "--rolestats", "--no-tree", patch], cwd=SRC, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    if res.returncode:
        raise SeriesError("get_maintainer.pl failed on %s:\n%s" %
                          (os.path.basename(patch), res.stderr))
    to, cc, lists = [], [], []
    for line in res.stdout.splitlines():
        m = re.match(r"(.*?<[^>]+>|\S+@\S+)\s*(?:\((.*)\))?$", line.strip())
        if not m:
            continue
        addr, role = m.group(1).strip(), m.group(2) or ""
        if re.match(r"(maintainer|supporter|chief penguin)", role):
            to.append(addr)
        elif "list" in role:
            lists.append(addr)
        else:
            cc.append(addr)
    return to, cc, lists


def add_headers(path, to, cc):
    with open(path) as f:
        text = f.read()
    head, sep, body = text.partition("\n\n")
    extra = ""
    if to:
        extra += "\nTo: " + ",\n    ".join(to)
    if cc:
        extra += "\nCc: " + ",\n    ".join(cc)
    with open(path, "w") as f:
        f.write(head + extra + sep + body)


def cmd_export(args):
    head = recorded_head()
    if not head:
        raise SeriesError("no assembled tree: run 'make tree' first")
    who, mail = runner_identity()
    entries = read_series()
    chain = linear_chain(head)
    if len(chain) != len(entries):
        raise SeriesError("build/src does not match patches/series; "
                          "run 'make tree' first")
    tip = outgoing_chain(entries, chain, who, mail)[-1]
    out = os.path.abspath(args.output)
    shutil.rmtree(out, ignore_errors=True)
    env = {"GIT_AUTHOR_NAME": who, "GIT_AUTHOR_EMAIL": mail,
           "GIT_COMMITTER_NAME": who, "GIT_COMMITTER_EMAIL": mail}
    # --base: the base is the unpacked Debian tarball's commit, not an
    # upstream one; the cover letter says which tarball and upstream version.
    # An RFC until it has run on hardware and has a debugger user
    # (patches/cover-letter says why); SUBJECT_PREFIX= overrides it.
    prefix = os.environ.get("SUBJECT_PREFIX") or "RFC PATCH v2"
    git("format-patch", "-q", "--cover-letter", "--base=base", "--thread",
        "--subject-prefix=" + prefix,
        "--stat=72", "--summary", "-o", out, "base.." + tip, env=env)
    cover = os.path.join(out, "0000-cover-letter.patch")
    with open(os.path.join(PATCHES, "cover-letter")) as f:
        subject, _, blurb = f.read().partition("\n")
    base = base_description()
    blurb = blurb.strip() + "\n\n" + textwrap.fill(
        "Base: %s. The base-commit below is that source unpacked as one "
        "commit (mk/base.sh), not an upstream commit; the series applies "
        "to %s." % (base, base.rsplit("Linux ", 1)[1].rstrip(")")), 72) + "\n"
    with open(cover) as f:
        text = f.read()
    text = text.replace("*** SUBJECT HERE ***", subject.strip())
    text = text.replace("*** BLURB HERE ***", blurb.strip())
    with open(cover, "w") as f:
        f.write(text)
    files = sorted(f for f in os.listdir(out) if f.endswith(".patch"))
    # People get the patches get_maintainer.pl names them for; every list
    # any patch names gets the whole series, so that no list sees a thread
    # with holes.
    union_to, union_cc, union_lists = [], [], []
    table = []
    per_patch = []
    for name in files:
        if name == "0000-cover-letter.patch":
            continue
        to, cc, lists = recipients(os.path.join(out, name))
        per_patch.append((name, to, cc))
        union_to += [a for a in to if a not in union_to]
        union_cc += [a for a in cc if a not in union_cc]
        union_lists += [a for a in lists if a not in union_lists]
    for name, to, cc in per_patch:
        cc = cc + [a for a in union_lists if a not in to and a not in cc]
        add_headers(os.path.join(out, name), to, cc)
        table.append((name, to, cc))
    union_cc = [a for a in dict.fromkeys(union_cc + union_lists)
                if a not in union_to]
    add_headers(cover, union_to, union_cc)
    table.insert(0, ("0000-cover-letter.patch", union_to, union_cc))
    print("series: %s (From: %s <%s>; a dry run, nothing is sent)" %
          (out, who, mail))
    print("series: base %s, base-commit %s" %
          (base, git("rev-parse", "base^{commit}").stdout.strip()))
    for name, to, cc in table:
        print("  %s" % name)
        print("      To: %s" % (", ".join(to) or "-"))
        print("      Cc: %s" % (", ".join(cc) or "-"))
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
    sub.add_parser("roundtrip").set_defaults(fn=cmd_roundtrip)
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
