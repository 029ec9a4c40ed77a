"""The product stands alone: nothing a reader meets points outside the repository.

README.md, docs/, the notebooks' sources, every text file of the package and a fresh offline
demo's records (executed notebooks, HTML, JSON, logs) are scanned for what a reader cannot
follow: an absolute path of this machine, a tracker's issue number, a numbered "reading" or a
section sign after "spec", of a document the repository does not hold, the team's own specification files, and
a relative Markdown link to a file that does not exist. Protocol decisions are stated in words
in docs/protocols/ and cited by section name, which these patterns never match.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import DemoOutputs

ROOT = Path(__file__).resolve().parent.parent

# Kept specific so that genuine product text passes: "clock readings of an earlier boot" or a
# paper's "Miller 2024, §4" are not citations of a document the reader lacks.
CITATIONS = {
    "issue number": re.compile(r"\b[Ii]ssues? #?\d+\b|#[\w-]*\bissue-\d+\b"),   # prose, or a heading's anchor
    "numbered reading": re.compile(r"\b[Rr]eadings? \d+\b|\bnumbered readings\b|#[\w-]*\breading-\d+\b"),
    "the team's specification": re.compile(r"\b[Ss]pec(?:ification)? (?:§|README\b)|\bspec README\b"
                                           r"|\.\./shared\b|\b\d{3}_[0-9a-f]{16}\.txt\b"),
}
DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".json", ".jsonl", ".yaml", ".yml", ".ipynb", ".html", ".tex",
                 ".csv", ".log", ".cfg", ".toml", ".sh", ""}


def machine_paths() -> list[str]:
    """Absolute paths of this machine a product text must never hold."""
    return sorted({str(ROOT) + "/", "/" + "work/", "/tmp/", "/home/", str(Path.home()) + "/"})


def findings(text: str, paths: bool = True) -> list[str]:
    text = DATA_URI.sub("", text)   # base64 may spell anything
    found = [f"{what}: {m.group(0)!r}" for what, rx in CITATIONS.items() for m in rx.finditer(text)]
    return found + [f"absolute path: {p!r}" for p in machine_paths() if paths and p in text]


def text_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                  and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts)


def product_files() -> list[Path]:
    return [ROOT / "README.md", *text_files(ROOT / "docs"), *text_files(ROOT / "notebooks"),
            *text_files(ROOT / "evalnb")]


def report(files: list[Path], paths: bool = True, root: Path = ROOT) -> list[str]:
    out = []
    for path in files:
        for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), start=1):
            out += [f"{path.relative_to(root)}:{number}: {f}" for f in findings(line, paths)]
    return out


def test_the_patterns_catch_what_they_are_for_and_nothing_else() -> None:
    # Spelt in pieces, so that this file itself holds none of what it looks for.
    issue, reading, spec, shared = "issue", "reading", "spec", "shared"
    for bad in [f"see {issue} 34", f"(operations.md#endpoint-failures-{reading}-30)", f"(README.md#bench-{issue}-14)",
                f"({reading} 5 of the {spec} README)", f"{spec} §1", f"{issue.title()}s #12 and 13",
                f"../{shared}/{spec}/README.md", f"the numbered {reading}s", "002_a947e79d93052ed2" + ".txt",
                "/" + f"work/{shared}/{spec}", str(ROOT / "docs")]:
        assert findings(bad), bad
    for good in ["see *Out of context* in docs/protocols/wildtrace.md", "clock readings of an earlier boot",
                 "Miller 2024, §4", "the WildTrace protocol's §3", "an issue with the key",
                 "data:image/png;base64,iVBO/tmp/x/y==", "test_reading_the_umask_leaves_it_as_it_was"]:
        assert not findings(good), good


def test_readme_docs_notebooks_and_package_cite_nothing_outside_the_repository() -> None:
    found = report(product_files())
    assert not found, "\n".join(found)


def test_markdown_links_name_files_in_the_repository() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in MARKDOWN_LINK.findall(page.read_text("utf-8")):
            if re.match(r"[a-z]+:", target):   # https:, mailto:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


@pytest.mark.slow
def test_a_fresh_demos_records_cite_nothing_outside_the_repository(demo_outputs: DemoOutputs) -> None:
    """Every record of the demo: no issue, reading or specification of the team. Absolute paths
    are not scanned here: a run's parameters and config.json record where its data was read
    from on the machine that ran it (its provenance); the paper pages, which travel, are kept
    free of them by tests/test_publication.py."""
    demo = demo_outputs.dir
    assert demo_outputs.code == 0, demo_outputs.printed[-2000:]
    files = text_files(demo)
    assert any(p.suffix == ".ipynb" for p in files) and any(p.suffix == ".html" for p in files)
    found = report(files, paths=False, root=demo)
    assert not found, "\n".join(found[:40])
