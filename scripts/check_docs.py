#!/usr/bin/env python3
"""check_docs.py — the project's docs stand alone: every link in README.md and docs/*.md
resolves to a file inside the repository, and no document names a Markdown file that is not
in it (e.g. a spec kept somewhere else). Run from anywhere; exit status 1 lists each problem
as FILE:LINE: what. ctest runs it (docs_link_check), so CI fails on a broken or outside link.

Checked, per document:
  - Markdown links and images [text](target): a target with a scheme (http:, https:,
    mailto:, file:) is outside the repository and refused; a relative target (anchor
    stripped) must exist, resolved from the document's folder, and stay inside the repository;
    a bare #anchor must name a heading of the same document.
  - Any other mention of a name ending in .md (in prose or code spans) must be a file of the
    repository, found from the document's folder or from the repository root.
Fenced code blocks are skipped for the second rule only (they show commands, not references).
Also: every status code of include/clef.h's clef_status enum is listed in docs/errors.md.
"""
from __future__ import annotations

import os
import re
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MD_NAME = re.compile(r"(?<![\w./-])([\w./-]+\.md)\b")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def anchors(text: str) -> set[str]:
    """GitHub-style heading anchors of a document."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def inside(path: str) -> bool:
    real = os.path.realpath(path)
    return real == ROOT or real.startswith(ROOT + os.sep)


def check(doc: str) -> list[str]:
    problems = []
    rel_doc = os.path.relpath(doc, ROOT)
    base = os.path.dirname(doc)
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    heads = anchors(text)
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        for target in LINK.findall(line):
            where = f"{rel_doc}:{n}"
            if SCHEME.match(target):
                problems.append(f"{where}: link to '{target}' leaves the repository")
                continue
            path, _, anchor = target.partition("#")
            if not path:
                if anchor and anchor not in heads:
                    problems.append(f"{where}: anchor '#{anchor}' names no heading of this document")
                continue
            full = os.path.normpath(os.path.join(base, path))
            if not inside(full):
                problems.append(f"{where}: link '{target}' resolves outside the repository")
            elif not os.path.exists(full):
                problems.append(f"{where}: link '{target}' names a file that does not exist")
        if fenced:
            continue
        for name in MD_NAME.findall(LINK.sub("", line)):
            if SCHEME.match(name):
                continue
            found = any(os.path.exists(os.path.join(b, name)) and inside(os.path.join(b, name))
                        for b in (base, ROOT))
            if not found:
                problems.append(f"{rel_doc}:{n}: names '{name}', which is not a file of the repository")
    return problems


def check_status_codes() -> list[str]:
    """Every CLEF_OK / CLEF_ERR_* of the public enum has its row in docs/errors.md."""
    with open(os.path.join(ROOT, "include", "clef.h"), encoding="utf-8") as f:
        header = f.read()
    enum = header[header.index("typedef enum clef_status"):header.index("} clef_status;")]
    with open(os.path.join(ROOT, "docs", "errors.md"), encoding="utf-8") as f:
        errors = f.read()
    return [f"docs/errors.md: status {name} of include/clef.h is not documented"
            for name in re.findall(r"^\s*(CLEF_\w+)\s*=", enum, re.M) if f"`{name}`" not in errors]


def main() -> int:
    docs = [os.path.join(ROOT, "README.md")]
    docs += sorted(os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                   if f.endswith(".md"))
    problems = [p for d in docs for p in check(d)] + check_status_codes()
    for p in problems:
        print(p)
    print(f"check_docs: {len(docs)} documents, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
