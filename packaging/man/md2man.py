#!/usr/bin/env python3
"""Turns the small markdown-ish man page sources in packaging/man/ into troff.

Usage: md2man.py SOURCE.md OUTPUT.8 VERSION

The source format (a subset of markdown, nothing else is special):

    # intentd-serve(8) -- run the agent          title line: page, section, summary
    ## SECTION                                   .SH (NAME is made from the title)
    ### Subsection                               .SS
    plain lines, blank-line separated            paragraphs (.PP)
    `--flag` *VALUE*                             a definition term (.TP) when the
    :   text                                     next line starts with ":   "; the
        more text                                definition goes on while indented
    - item                                       bullet list item (.IP)
        code                                     4-space indented block outside a
                                                 definition: shown verbatim (.nf)
    inline: `code` and **bold** in bold, *word* in italics.

The output is deterministic (no date) so that the .deb is reproducible.
Errors (an unknown construct, a bad title) stop the build with a message.
"""

import re
import sys

TITLE = re.compile(r"^# ([a-z0-9.-]+)\((\d)\) -- (.+)$")
INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*")


def escape(text):
    """Escapes troff specials in plain text (not in macros)."""
    return text.replace("\\", "\\e")


def code_text(text):
    """Escapes text shown as a literal: option dashes must be \\- in man pages."""
    return escape(text).replace("-", "\\-")


def inline(text):
    out = []
    pos = 0
    for m in INLINE.finditer(text):
        out.append(escape(text[pos:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + code_text(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fB" + code_text(m.group(2)) + "\\fR")
        else:
            out.append("\\fI" + escape(m.group(3)) + "\\fR")
        pos = m.end()
    out.append(escape(text[pos:]))
    line = "".join(out)
    # A line that starts with . or ' would be read as a request.
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def convert(lines, version, source):
    if not lines:
        raise ValueError(f"{source}: empty source")
    m = TITLE.match(lines[0])
    if not m:
        raise ValueError(f"{source}:1: the first line must be '# name(N) -- summary'")
    name, section, summary = m.groups()
    out = [
        f'.TH "{name.upper()}" "{section}" "" "intentd {version}" "intentd manual"',
        # No hyphenation, ragged right: option names and page references stay whole.
        ".nh",
        ".ad l",
        ".SH NAME",
        f"{code_text(name)} \\- {escape(summary)}",
    ]
    i = 1
    in_paragraph = False
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not line.strip():
            in_paragraph = False
            i += 1
        elif line.startswith("### "):
            out.append(".SS " + inline(line[4:].strip()))
            in_paragraph = False
            i += 1
        elif line.startswith("## "):
            heading = line[3:].strip()
            if heading == "NAME":
                raise ValueError(f"{source}:{lineno}: NAME comes from the title line")
            out.append('.SH "' + heading.upper() + '"')
            in_paragraph = False
            i += 1
        elif line.startswith("#"):
            raise ValueError(f"{source}:{lineno}: only ## and ### headings are allowed here")
        elif nxt.startswith(":   "):
            out.append(".TP")
            out.append(inline(line.strip()))
            i += 1
            while i < len(lines):
                cur = lines[i]
                if not cur.strip():
                    # A blank line continues the definition only when it is
                    # followed by more indented text (a second paragraph).
                    if i + 1 < len(lines) and lines[i + 1].startswith("    "):
                        if not lines[i + 1].startswith("        "):
                            out.append(".IP")
                        i += 1
                        continue
                    break
                if not cur.startswith((":   ", "    ")):
                    break
                if cur.startswith("        "):
                    # A verbatim block inside a definition (8 spaces in the source).
                    out.append(".RS 4")
                    out.append(".nf")
                    while i < len(lines) and lines[i].startswith("        "):
                        out.append(code_text(lines[i][8:]))
                        i += 1
                    out.append(".fi")
                    out.append(".RE")
                    continue
                out.append(inline(cur[4:].strip()))
                i += 1
            in_paragraph = False
        elif line.startswith("- "):
            out.append(".IP \\(bu 2")
            out.append(inline(line[2:].strip()))
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                out.append(inline(lines[i].strip()))
                i += 1
            in_paragraph = False
        elif line.startswith("    "):
            out.append(".PP")
            out.append(".RS 4")
            out.append(".nf")
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                if not lines[i].strip():
                    # A blank line ends the block unless more code follows it.
                    if i + 1 < len(lines) and lines[i + 1].startswith("    "):
                        out.append("")
                        i += 1
                        continue
                    break
                out.append(code_text(lines[i][4:]))
                i += 1
            out.append(".fi")
            out.append(".RE")
            in_paragraph = False
        elif line.startswith((":", " ")):
            raise ValueError(f"{source}:{lineno}: a definition or block without a term/paragraph")
        else:
            if not in_paragraph:
                out.append(".PP")
                in_paragraph = True
            out.append(inline(line.strip()))
            i += 1
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: md2man.py SOURCE.md OUTPUT.8 VERSION\n")
        return 2
    source, output, version = argv[1], argv[2], argv[3]
    with open(source, encoding="utf-8") as f:
        lines = f.read().split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    try:
        troff = convert(lines, version, source)
    except ValueError as e:
        sys.stderr.write(f"md2man: {e}\n")
        return 1
    with open(output, "w", encoding="utf-8") as f:
        f.write(troff)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
