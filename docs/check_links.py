#!/usr/bin/env python3
"""Every relative link of the project's Markdown resolves: the file or folder exists, and a
`#section` names a heading of the target (GitHub's anchors). Run by CTest docs_links (label unit)
so that a moved file or a renamed section breaks the build's tests, not a reader's click.

    check_links.py ROOT          checks ROOT/*.md and every *.md below ROOT (build trees, .git,
                                 node_modules and python/build skipped)
Thread-safety: a command-line program, single-threaded.
"""
import os
import re
import sys

SKIP_DIRS = {".git", "node_modules", "__pycache__"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text):
    """The text without fenced code blocks and inline code spans (links there are examples)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path, cache={}):
    if path not in cache:
        text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", open(path, encoding="utf-8").read(),
                      flags=re.M | re.S)
        seen, out = {}, set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))
        for h in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
            a = re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).replace(" ", "-")
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else f"{a}-{n}")
        cache[path] = out
    return cache[path]


def markdown_files(root):
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")
                         and not (rel == "python" and x == "build") and not x.startswith(".gpu"))
        for n in sorted(names):
            if n.endswith(".md"):
                yield os.path.join(d, n)


def main(root):
    root = os.path.abspath(root)
    bad, checked = [], 0
    for md in markdown_files(root):
        text = prose(open(md, encoding="utf-8").read())
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:...
                continue
            checked += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            where = os.path.relpath(md, root)
            if not os.path.exists(dest):
                bad.append(f"{where}: ({target}): no such file {os.path.relpath(dest, root)}")
            elif frag and dest.endswith(".md") and frag.lower() not in anchors(dest):
                bad.append(f"{where}: ({target}): no heading #{frag} in "
                           f"{os.path.relpath(dest, root)}")
    for b in bad:
        print(b)
    print(f"check_links: {checked} relative links, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
