"""The user documentation holds together: a short front page, every page, live links, no history.

README.md is the front page (at most 15 KB); the guides and references are pages under docs/.
Every relative link in them must name a file of the repository (and, with a ``#fragment``, a
heading of that file), every setting of ``Config`` must be documented with its default, and the
pages describe the software as it is, never its history.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from ipykeep.project.config import Config

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

PAGES = (
    "README.md",
    "getting-started.md",
    "staleness.md",
    "inspection.md",
    "checkpoints.md",
    "mcp-and-hosts.md",
    "serve-and-publish.md",
    "remote-kernels.md",
    "configuration.md",
    "reliability-and-security.md",
    "known-issues.md",
    "cli.md",
    "architecture.md",
)

#: Phrases that narrate how the software changed; those belong in CHANGELOG.md.
HISTORY_PHRASES = (
    "used to",
    "no longer",
    "before the change",
    "before two changes",
    "earlier version",
    "earlier build",
    "older ipykeep",
    "as before",
    "went from",
)

README_MAX_BYTES = 15 * 1024

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans (messages quoted from the software)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _FENCE.sub("", path.read_text()), re.M)
    return {_slug(h) for h in headings}


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _linking_documents() -> list[Path]:
    """Every page whose links must resolve: the docs and the pages beside them."""
    extra = ("CONTRIBUTING.md", "CHANGELOG.md", "benchmarks/README.md")
    return [*_documents(), *(ROOT / name for name in extra)]


def test_the_front_page_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (at most {README_MAX_BYTES})"


def test_the_front_page_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "## The two commands" in readme
    assert 'pip install -e ".[examples]" && .venv/bin/ipykeep start examples/01_eda.ipynb' in readme
    assert '.venv/bin/uv pip install -p .venv -e ".[dev]" && .venv/bin/python -m pytest' in readme


@pytest.mark.parametrize("page", PAGES)
def test_every_docs_page_exists_and_is_linked_from_the_index(page: str) -> None:
    assert (DOCS / page).is_file(), f"docs/{page} is missing"
    if page != "README.md":
        index = (DOCS / "README.md").read_text()
        readme = (ROOT / "README.md").read_text()
        assert f"]({page})" in index, f"docs/README.md does not link {page}"
        assert f"](docs/{page})" in readme, f"README.md does not link docs/{page}"


@pytest.mark.parametrize("document", _linking_documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in _LINK.findall(_FENCE.sub("", document.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
            continue
        file_part, _, fragment = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_describe_the_software_not_its_history(document: Path) -> None:
    prose = _prose(document.read_text()).lower()
    found = [p for p in HISTORY_PHRASES if re.search(rf"\b{re.escape(p)}\b", prose)]
    assert not found, f"{document.relative_to(ROOT)} narrates history: {found}"


def test_every_setting_is_documented() -> None:
    reference = (DOCS / "configuration.md").read_text()
    missing = [f.name for f in dataclasses.fields(Config) if f"`{f.name}`" not in reference]
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    command = next(
        line
        for line in readme.splitlines()
        if line.startswith("python3 -m venv") and "pytest" in line
    )
    assert command in (ROOT / ".ci" / "run").read_text()
