"""Citations stay inside the repository.

Code and docs cite papers by authors, title and theorem/algorithm number, with
the full reference in doc/algorithms.rst's Bibliography; never a file outside
the repository (research notes, numbered seed files, their line numbers).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "sklearn_dpu").rglob("*.py"), *(ROOT / "doc").rglob("*.rst")])

# Each pattern names a reference to something outside the repository.
OUT_OF_REPO = {
    "numbered seed file": r"\bseed 0\d\d\b",
    "research digest": r"\bdigest\s+(``|§|[A-Z]\d|erratum|errata|section)|\bits digest\b",
    "notes file": r"\b(diss_\w+|descent_to_delete|forget_unlearning|linreg_and_whentoforget"
    r"|anchors|sklearn_conventions|CONTRACT)\.md\b",
    "line of a text file": r"\blines? \d{3,}|\bL\.?\s?\d{3,}\b",
    "path outside the repository": r"/work/|shared/(notes|seeds)|\.\./(notes|seeds)",
}
PATTERN = re.compile("|".join(f"(?:{p})" for p in OUT_OF_REPO.values()))


def _hits(text: str) -> list[str]:
    return [m.group(0) for m in PATTERN.finditer(text)]


def test_the_patterns_catch_out_of_repo_citations_and_spare_proper_ones():
    bad = [
        "as printed in the dissertation (seed 000, line 551)",
        "reconstructed in digest ``diss_dp.md`` section 2.0 P7",
        "Alg. 1 / Thm 8 with the errata of its digest",
        "see lines 883-898",
        "the coupling text prints m/n [L4140]",
        "read /work/shared/notes/diss_unlearn.md",
    ]
    assert all(_hits(text) for text in bad), [t for t in bad if not _hits(t)]
    good = [
        "Ullah 2024 [U24]_ Alg. 10, step 15 (erratum: Alg. 13 prints it inverted)",
        "each charge stores a digest chaining it to the previous one",
        "the last digest of the ledger",
        "Dwork & Roth, Thm 3.10",
    ]
    assert not any(_hits(text) for text in good), [t for t in good if _hits(t)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_out_of_repo_citation(path):
    hits = _hits(path.read_text(encoding="utf-8"))
    assert not hits, f"{path.relative_to(ROOT)} cites outside the repository: {hits}"


def test_every_named_reference_is_in_the_bibliography():
    """Each ``.. [KEY]`` of a docstring (named keys; [1]-style keys are local
    numbers) has its full reference in doc/algorithms.rst's Bibliography."""
    algorithms = (ROOT / "doc" / "algorithms.rst").read_text(encoding="utf-8")
    assert "\nBibliography\n------------\n" in algorithms
    bibliography = algorithms.split("\nBibliography\n", 1)[1]
    listed = set(re.findall(r"^\.\. \[(\w+)\]", bibliography, flags=re.M))
    cited = {
        key
        for path in SOURCES
        for key in re.findall(r"^\s*\.\. \[([A-Za-z]\w*)\]", path.read_text(encoding="utf-8"), re.M)
    }
    assert cited <= listed, sorted(cited - listed)
