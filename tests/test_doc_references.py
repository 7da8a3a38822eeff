"""Comments and docstrings cite only what a reader of the repository can open.

- Every `docs/<file>.md` and `docs/<file>.md#<anchor>` written in a module under t9k_provider/, tests/ or
  benchmarks/ names an existing file and an anchor that file defines: the GitHub slug of one of its headings,
  or an explicit `<a id="...">` / `<a name="...">` / `{#...}`. Further anchors of the same file may follow a
  link (`docs/controller.md#r2, #r12`).
- No comment or docstring cites documents that are not in the repository: "spec section 4", "spec 3.6",
  "spec TB1", a bare "(8.4)" or "section 8.7", requirement numbers such as "R4" (link
  `docs/controller.md#r4` instead) or work tickets ("issue 15", "Issue 14.4").
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCANNED = ("t9k_provider", "tests", "benchmarks")
THIS = Path(__file__).resolve()

LINK = re.compile(
    r"(?<![\w/.-])docs/(?P<file>[\w./-]+?\.md)(?:#(?P<anchor>[\w-]+)(?P<more>(?:,\s*#[\w-]+|\s+and\s+#[\w-]+)*))?"
)
MORE_ANCHOR = re.compile(r"#([\w-]+)")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:id|name)\s*=\s*["']([^"']+)["']|\{#([\w-]+)\}""")
MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
HTML_TAG = re.compile(r"<[^>]+>")

# Citations of documents outside the repository, as (what, pattern).
CITATIONS = [
    ("a spec section", re.compile(r"\bspecs?\s+(?:sections?|§)\s*[A-Z]{0,2}\d+(?:\.\d+)*", re.IGNORECASE)),
    ("a spec item number", re.compile(r"\bspecs?\s+[A-Z]{0,2}\d+(?:\.\d+)*\b", re.IGNORECASE)),
    ("a bare section number", re.compile(r"(?<![\w.])\(\d{1,2}\.\d{1,2}[a-z]?\)")),
    ("a requirement number without a docs link", re.compile(r"\bR\d{1,2}[a-z]?\b")),
    ("a work ticket", re.compile(r"\bissues?[\s-]+#?\d+", re.IGNORECASE)),
]
# "section 8.7" cites an outside document unless a public standard or a docs/ file is named just before it.
DOTTED_SECTION = re.compile(r"\bsections?\s+\d+(?:\.\d+)+", re.IGNORECASE)
NAMED_STANDARD = re.compile(r"RFC\s*\d+|draft\s+\d+|\.md\b", re.IGNORECASE)


def github_slug(heading: str) -> str:
    """The id GitHub gives a heading: its text lower-cased, punctuation dropped, spaces made hyphens."""
    text = MD_LINK.sub(r"\1", HTML_TAG.sub("", heading)).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def markdown_anchors(text: str) -> set[str]:
    """Every anchor a Markdown text defines: heading slugs (repeats get -1, -2, ...) and explicit ids."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for found in EXPLICIT_ANCHOR.finditer(line):
            anchors.add(found.group(1) or found.group(2))
        heading = HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


@cache
def repo_anchors(file: str) -> frozenset[str] | None:
    """The anchors of docs/<file>, or None when there is no such file."""
    path = DOCS / file
    if not path.is_file():
        return None
    return frozenset(markdown_anchors(path.read_text(encoding="utf-8")))


def link_problems(text: str, anchors_of: Callable[[str], frozenset[str] | None]) -> list[str]:
    """The `docs/...md[#anchor]` references in `text` whose file or anchor does not exist."""
    problems = []
    for link in LINK.finditer(text):
        file = link.group("file")
        known = anchors_of(file)
        if known is None:
            problems.append(f"docs/{file}: no such file")
            continue
        wanted = [link.group("anchor")] if link.group("anchor") else []
        wanted += MORE_ANCHOR.findall(link.group("more") or "")
        problems += [f"docs/{file}#{anchor}: no such anchor" for anchor in wanted if anchor not in known]
    return problems


def citation_problems(text: str) -> list[str]:
    """Citations of documents outside the repository in a comment or docstring."""
    problems = [f"{what}: {found.group(0)!r}" for what, rx in CITATIONS for found in rx.finditer(text)]
    for found in DOTTED_SECTION.finditer(text):
        if not NAMED_STANDARD.search(text[max(0, found.start() - 30) : found.start()]):
            problems.append(f"a section number of an outside document: {found.group(0)!r}")
    return problems


def prose(source: str) -> Iterator[tuple[int, str, bool]]:
    """(line, text, joined) of every comment and of every line of every docstring-like string statement of
    a module; `joined` marks a whole docstring on one line, for citations split across its lines."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string, False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            text = node.value.value
            if isinstance(text, str):
                for offset, line in enumerate(text.splitlines()):
                    yield node.lineno + offset, line, False
                yield node.lineno, " ".join(text.split()), True


def modules() -> list[Path]:
    found = [p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py")) if p.resolve() != THIS]
    assert found, "no module found to scan"
    return found


def module_problems(source: str, name: str) -> tuple[set[str], set[str]]:
    """(broken links, outside citations) of one module, each `name:line: problem`. A problem found only in a
    joined docstring is reported at the docstring's first line."""
    broken: set[str] = set()
    cited: set[str] = set()
    seen: set[str] = set()  # problems already reported, line by line

    def report(into: set[str], number: int, problems: list[str], joined: bool) -> None:
        for problem in problems:
            if not (joined and problem in seen):
                into.add(f"{name}:{number}: {problem}")
            seen.add(problem)

    for number, line in enumerate(source.splitlines(), 1):
        report(broken, number, link_problems(line, repo_anchors), False)
    for number, text, joined in sorted(prose(source), key=lambda unit: unit[2]):  # joined ones last
        report(cited, number, citation_problems(text), joined)
        report(broken, number, link_problems(text, repo_anchors), True)
    return broken, cited


def scan(paths: list[Path], root: Path = ROOT) -> tuple[list[str], list[str]]:
    """(broken links, outside citations) over the given modules, named relative to `root`."""
    broken: set[str] = set()
    cited: set[str] = set()
    for path in paths:
        more_broken, more_cited = module_problems(
            path.read_text(encoding="utf-8"), str(path.relative_to(root))
        )
        broken |= more_broken
        cited |= more_cited
    return sorted(broken), sorted(cited)


@cache
def repo_scan() -> tuple[list[str], list[str]]:
    return scan(modules())


def test_docs_links_in_modules_resolve() -> None:
    broken, _ = repo_scan()
    assert broken == [], "references to missing docs files or anchors:\n" + "\n".join(broken)


def test_no_citations_of_documents_outside_the_repository() -> None:
    _, cited = repo_scan()
    assert cited == [], "cite docs/<file>.md#<anchor> instead of:\n" + "\n".join(cited)


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        (
            "Success and failure (`decide_outcome`; failure rules win)",
            "success-and-failure-decide_outcome-failure-rules-win",
        ),
        ("11. Pipeline wall time (`make demo`)", "11-pipeline-wall-time-make-demo"),
        ("Workloads (apps/v1)", "workloads-appsv1"),
        ("Name resolution (`/etc/hosts`)", "name-resolution-etchosts"),
        ("See [Exec and attach](local-cluster.md#exec-and-attach)", "see-exec-and-attach"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_markdown_anchors_cover_headings_explicit_ids_and_repeats_but_not_code() -> None:
    text = (
        '# Top\n\n## Notes\n\n<a id="r1"></a>\n- **R1.** x\n\n## Notes\n\n'
        "### Custom {#custom}\n\n```\n# not a heading\n```\n"
    )
    assert markdown_anchors(text) == {"top", "notes", "notes-1", "r1", "custom-custom", "custom"}


def test_the_probe_reports_broken_references_and_outside_citations(tmp_path: Path) -> None:
    """The checker itself, on a made-up module: each broken reference and each citation is reported, the
    good ones are not."""
    module = tmp_path / "made_up.py"
    module.write_text(
        '"""Made up: peers resolve first (docs/controller.md#r4), see docs/controller.md#r2, #r12 and\n'
        "docs/controller.md#no-such-anchor, docs/no-such-file.md#x, docs/controller.md#r1, #r99.\n"
        '"""\n'
        "# The loop of spec section 12.1; failure wins (spec 3.6, spec TB1) as in (8.4) and section 8.7.\n"
        "# Never re-run (R1); measured by issue 7 and Issue 14.4 (the issue-17 target).\n"
        "# Fine: RFC 7386 section 2, SPDY draft 3, section 2.6.10.1, docs/benchmarks.md section 10.\n"
        'x = "(8.4) R1 issue 7"  # a string in code is not prose; (Airflow 3.3) is a version\n',
        encoding="utf-8",
    )
    broken, cited = scan([module], root=tmp_path)
    assert [b.split(": ", 1)[1] for b in broken] == [
        "docs/controller.md#no-such-anchor: no such anchor",
        "docs/controller.md#r99: no such anchor",
        "docs/no-such-file.md: no such file",
    ]
    found = " | ".join(cited)
    for citation in (
        "spec section 12.1",
        "spec 3.6",
        "spec TB1",
        "issue-17",
        "(8.4)",
        "section 8.7",
        "R1",
        "issue 7",
        "Issue 14",
    ):
        assert f"'{citation}" in found, citation
    assert "2.6.10.1" not in found and "section 2'" not in found and "3.3" not in found, found
    assert all(c.startswith(("made_up.py:4:", "made_up.py:5:")) for c in cited), cited
