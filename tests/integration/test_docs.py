"""Every relative link in the project's Markdown (README.md, docs/, tests/README.md, bench/README.md
and the folder READMEs) resolves: the file or folder exists, and an #anchor names a heading of the
page it points to, by GitHub's rule for heading slugs. Links to other sites are not followed."""
import pathlib
import re
import urllib.parse

import pytest

from conftest import SOURCE

# Folders that hold no project pages: build trees, caches, what scripts/gpu/pack.sh makes.
SKIPPED = re.compile(r"^(\..*|build.*|gpu-carry|sol-trace|__pycache__)$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
INDENTED_CODE = re.compile(r"^(    |\t)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) or [text](<target> "title"); images alike. The text may hold code and brackets.
INLINE_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def pages():
    """Every Markdown file of the source tree, outside build and cache folders."""
    found = []

    def walk(folder):
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                if not SKIPPED.match(entry.name):
                    walk(entry)
            elif entry.suffix == ".md":
                found.append(entry)

    walk(SOURCE)
    return found


def prose_lines(text):
    """The lines of a page outside fenced and indented code blocks, as (line number, text)."""
    fenced = False
    previous_blank = True
    in_indented = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        blank = not line.strip()
        # An indented block starts after a blank line (inside a list item the indentation is the
        # item's text, but no page here indents list text by four spaces before a blank line).
        if INDENTED_CODE.match(line) and (previous_blank or in_indented):
            in_indented = True
            previous_blank = blank
            continue
        if not blank:
            in_indented = False
        previous_blank = blank
        yield number, line


def slug(heading):
    """GitHub's anchor for a heading: its text as rendered (code, emphasis and link markup gone),
    lower case, every character but letters, digits, spaces, hyphens and underscores dropped,
    spaces turned into hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("*", "").replace("~", "")
    text = re.sub(r"(^|\s)_+|_+(\s|$)", r"\1\2", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page):
    """The anchors a page defines: each heading's slug (a repeated one gets -1, -2, ...) and HTML
    anchors."""
    found, seen = set(), {}
    text = page.read_text()
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            found.add(base if n == 0 else "%s-%d" % (base, n))
            seen[base] = n + 1
    found.update(HTML_ANCHOR.findall(text))
    return found


def paragraphs(text):
    """Runs of consecutive prose lines, as (first line number, lines): a link's text may wrap."""
    run, first, previous = [], 0, -1
    for number, line in prose_lines(text):
        if run and (number != previous + 1 or not line.strip()):
            yield first, run
            run = []
        if line.strip():
            if not run:
                first = number
            run.append(line)
        previous = number
    if run:
        yield first, run


def links(page):
    """(line number, target) of every link on a page, outside code."""
    for first, lines in paragraphs(page.read_text()):
        prose = []
        for offset, line in enumerate(lines):
            m = REFERENCE_DEF.match(line)
            if m:
                yield first + offset, m.group(1)
                line = ""
            prose.append(CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line))
        text = "\n".join(prose)
        for m in INLINE_LINK.finditer(text):
            yield first + text.count("\n", 0, m.start()), m.group(1).strip("<>")


def broken(page, target, anchor_cache):
    """Why a link's target does not resolve, or None."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:: another site
        return None
    path, _, fragment = target.partition("#")
    path = urllib.parse.unquote(path)
    if path.startswith("/"):
        return "an absolute path: links must be relative to the page"
    resolved = (page.parent / path).resolve() if path else page.resolve()
    if not resolved.exists():
        return "no such file or folder"
    if SOURCE.resolve() not in resolved.parents and resolved != SOURCE.resolve():
        return "outside the repository"
    if fragment:
        if resolved.suffix != ".md":
            return "an #anchor into a file that is not Markdown"
        if resolved not in anchor_cache:
            anchor_cache[resolved] = anchors(resolved)
        if urllib.parse.unquote(fragment) not in anchor_cache[resolved]:
            return "no heading with the anchor #%s" % fragment
    return None


def problems(files):
    cache, found = {}, []
    for page in files:
        for number, target in links(page):
            why = broken(page, target, cache)
            if why:
                found.append("%s:%d: %s: %s" % (page.relative_to(SOURCE), number, target, why))
    return found


def test_the_pages_checked_include_the_front_page_docs_and_folder_readmes():
    names = {str(p.relative_to(SOURCE)) for p in pages()}
    for name in ("README.md", "docs/trace-format.md", "docs/configuration.md", "backends/README.md",
                 "ir/README.md", "tests/README.md", "bench/README.md", "docs/guide.md",
                 "docs/design.md", "docs/commands/README.md"):
        assert name in names, sorted(names)


def test_every_relative_link_resolves():
    found = problems(pages())
    assert not found, "broken links:\n" + "\n".join(found)


def test_a_broken_link_or_anchor_is_found(tmp_path, monkeypatch):
    """The check itself: a page with one good and three bad links reports exactly the bad ones."""
    import test_docs
    monkeypatch.setattr(test_docs, "SOURCE", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Its `second` part: here\n")
    page = tmp_path / "README.md"
    page.write_text("# Front\n\n[good](docs/a.md#its-second-part-here), [gone](docs/b.md),\n"
                    "[anchor](docs/a.md#third), [self](#front) [self, wrong](#back), [a wrapped\n"
                    "text](docs/c.md)\n\n    [in code](nowhere.md)\n\n`[in a span](nowhere.md)`\n")
    found = problems([page])
    assert found == ["README.md:3: docs/b.md: no such file or folder",
                     "README.md:4: docs/a.md#third: no heading with the anchor #third",
                     "README.md:4: #back: no heading with the anchor #back",
                     "README.md:4: docs/c.md: no such file or folder"], found


@pytest.mark.parametrize("heading, expected", [
    ("Backends: where the work runs", "backends-where-the-work-runs"),
    ("Device time (CUDA libraries)", "device-time-cuda-libraries"),
    ("The `sol` command", "the-sol-command"),
    ("Tests and benchmarks", "tests-and-benchmarks"),
    ("SOL_TEST_SLOW: a slow backend", "sol_test_slow-a-slow-backend"),
    ("A [linked](x.md) word", "a-linked-word"),
])
def test_slugs_follow_github(heading, expected):
    assert slug(heading) == expected
