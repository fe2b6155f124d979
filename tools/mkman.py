#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Manual pages (section 3) of libcoll's API, made from coll.h's comments.

Usage: tools/mkman.py libcoll/include/coll.h OUTDIR VERSION

Every function the header exports (COLL_API) gets a page: a function with
its own kernel-doc comment ("/** name() - what it does ...") has a page
of its own; the others belong to the section comment above them
("/* Collectives ---- ...") and share one page, named after the section's
first function, which the rest point to with a ".so" link. The header is
the one place the API is described; these pages only typeset it.
"""
import os
import re
import sys

COLL_API = re.compile(r"^COLL_API\b")
FUNC = re.compile(r"\b(coll_\w+)\s*\(")
SECTION = re.compile(r"^/\*\s*([A-Z][\w ,/-]*?)\s*-{3,}")


def esc(text):
    """Text for roff: backslashes doubled, no line starting with . or '."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"@(\w+)", r"\\fI\1\\fR", text)
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def comment_lines(block):
    """The text of a C comment, without its frame."""
    out = []
    for i, line in enumerate(block):
        line = line.rstrip()
        if i == 0:
            line = re.sub(r"^/\*\*?", "", line)
        line = re.sub(r"\*/\s*$", "", line)
        line = re.sub(r"^\s*\* ?", "", line)
        out.append(line)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def parse(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    pages = {}      # page name -> {"doc": [...], "protos": [...], "title"}
    links = {}      # function -> page name
    order = []
    pending = None  # a /** comment not yet claimed
    section = None  # {"name": ..., "doc": [...], "page": None}
    i = 0
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if s.startswith("/*"):
            block = [line]
            while "*/" not in lines[i]:
                i += 1
                block.append(lines[i])
            if s.startswith("/**"):
                pending = comment_lines(block)
            else:
                m = SECTION.match(s)
                if m:
                    section = {"name": m.group(1), "doc": comment_lines(block),
                               "page": None}
                pending = None if m else pending
            i += 1
            continue
        if COLL_API.match(s):
            decl = [line]
            while ";" not in lines[i]:
                i += 1
                decl.append(lines[i])
            proto = " ".join(x.strip() for x in decl)
            proto = re.sub(r"^COLL_API\s+", "", proto)
            proto = re.sub(r"\s+", " ", proto).replace("( ", "(")
            name = FUNC.search(proto).group(1)
            if pending is not None:
                pages[name] = {"doc": pending, "protos": [proto],
                               "title": None}
                order.append(name)
                pending = None
            elif section is not None:
                if section["page"] is None:
                    section["page"] = name
                    doc = section["doc"]
                    doc = [re.sub(r"^[A-Z][\w ,/-]*?\s*-{3,}\s*$", "", doc[0])] + doc[1:]
                    while doc and not doc[0].strip():
                        doc.pop(0)
                    pages[name] = {"doc": doc, "protos": [],
                                   "title": section["name"]}
                    order.append(name)
                pages[section["page"]]["protos"].append(proto)
                if name != section["page"]:
                    links[name] = section["page"]
            else:
                raise SystemExit("mkman: %s has no comment" % name)
            i += 1
            continue
        if s and not s.startswith("#") and not s.startswith("*"):
            pending = None if not s.startswith("}") else pending
        i += 1
    return pages, links, order


def summary(name, page):
    doc = page["doc"]
    if page["title"]:
        return "libcoll: %s" % page["title"].lower()
    head = []
    for line in doc:
        if not line.strip() or line.lstrip().startswith("@"):
            break
        head.append(line.strip())
    first = " ".join(head)
    m = re.match(r"\s*%s\(\)\s*-\s*(.*)" % re.escape(name), first)
    text = m.group(1) if m else first
    text = re.split(r"(?<=[.:])\s", text)[0].rstrip(".:")
    return text[:1].lower() + text[1:] if text else name


def body(name, page):
    doc = list(page["doc"])
    if not page["title"] and doc and re.match(r"\s*%s\(\)" % re.escape(name), doc[0]):
        # The first sentence is the NAME line; the rest (from the first
        # blank line or the parameters) is the description.
        while doc and doc[0].strip():
            if doc[0].lstrip().startswith("@"):
                break
            doc.pop(0)
    out, pre = [], False
    for line in doc:
        if not line.strip():
            if pre:
                out.append(".fi")
                pre = False
            out.append(".PP")
            continue
        param = re.match(r"^@(\w+):\s*(.*)$", line)
        if param and not pre:
            out.append(".TP")
            out.append("\\fI%s\\fR" % param.group(1))
            out.append(esc(param.group(2)))
            continue
        indented = line.startswith(" ") or line.startswith("\t")
        if indented and not pre and not (out and out[-1].startswith("\\fI")):
            out.append(".nf")
            pre = True
        elif not indented and pre:
            out.append(".fi")
            pre = False
        out.append(esc(line.strip() if not pre else line.rstrip()))
    if pre:
        out.append(".fi")
    while out and out[0] == ".PP":
        out.pop(0)
    while out and out[-1] == ".PP":
        out.pop()
    cleaned = []
    for x in out:
        if x == ".PP" and cleaned and cleaned[-1] == ".PP":
            continue
        cleaned.append(x)
    return cleaned


def write_page(outdir, version, name, page, see):
    lines = [
        '.\\" Made by tools/mkman.py from coll.h: do not edit.',
        '.TH %s 3 "2026" "libcoll %s" "libcoll manual"' % (name.upper(), version),
        ".SH NAME",
    ]
    names = [name] + [FUNC.search(p).group(1) for p in page["protos"]
                      if FUNC.search(p).group(1) != name]
    lines.append("%s \\- %s" % (", ".join(n.replace("_", "_") for n in names),
                                esc(summary(name, page))))
    lines += [".SH SYNOPSIS", ".nf", ".B #include <coll.h>", ".PP"]
    for p in page["protos"]:
        lines.append(esc(p))
    lines += [".fi", ".PP", "Link with \\fI\\-lcoll\\fR.", ".SH DESCRIPTION"]
    lines += body(name, page)
    lines += [".SH SEE ALSO", ",\n".join(".BR %s (3)" % s for s in see)]
    with open(os.path.join(outdir, name + ".3"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) != 4:
        raise SystemExit("usage: mkman.py coll.h OUTDIR VERSION")
    header, outdir, version = sys.argv[1:]
    pages, links, order = parse(header)
    os.makedirs(outdir, exist_ok=True)
    for name in order:
        write_page(outdir, version, name, pages[name], ["libcoll"])
    for name, target in links.items():
        with open(os.path.join(outdir, name + ".3"), "w", encoding="utf-8") as f:
            f.write(".so man3/%s.3\n" % target)
    print("mkman: %d pages, %d links in %s" % (len(order), len(links), outdir))


if __name__ == "__main__":
    main()
