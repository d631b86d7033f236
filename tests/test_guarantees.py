"""The guarantees page, the README and the estimators say the same thing.

``sklearn_dpu.guarantees.GUARANTEES`` is the record; ``doc/guarantees.rst``
and the README's estimator table state it in prose, and the estimators'
behaviour (relation recorded in the ledger, methods their reports name) must
match it.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import sklearn_dpu
from sklearn_dpu.guarantees import GUARANTEES

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "doc" / "guarantees.rst").read_text()
README = (ROOT / "README.md").read_text()
KIND_WORDS = {"exact": "exact", "certified": "certified", "delegated": "delegat"}
RELATION_WORDS = {"ADD_OR_REMOVE_ONE": "add or remove one record"}


def _estimators():
    return sorted(
        name
        for name in sklearn_dpu.__all__
        if isinstance(getattr(sklearn_dpu, name), type)
        and hasattr(getattr(sklearn_dpu, name), "delete_samples")
    )


def _page_section(name: str) -> str:
    match = re.search(rf"^{name}\n~+\n(.*?)(?=^\S[^\n]*\n[~-]+\n|\Z)", PAGE, re.M | re.S)
    assert match, f"doc/guarantees.rst has no section for {name}"
    return match.group(1)


def _readme_row(name: str) -> list[str]:
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == f"`{name}`":
            return cells
    raise AssertionError(f"the README's estimator table has no row for {name}")


def test_every_public_estimator_has_a_guarantee():
    assert set(_estimators()) == set(GUARANTEES)


@pytest.mark.parametrize("name", sorted(GUARANTEES))
def test_page_states_the_guarantee(name):
    guarantee = GUARANTEES[name]
    section = _page_section(name)
    assert f"**{guarantee.deletion}**" in section
    assert RELATION_WORDS[guarantee.relation] in section
    for other in set(KIND_WORDS) - {guarantee.deletion}:
        assert f"**{other}**" not in section, f"{name}'s section also claims {other}"


@pytest.mark.parametrize("name", sorted(GUARANTEES))
def test_readme_row_matches(name):
    guarantee = GUARANTEES[name]
    deletion_cell = _readme_row(name)[-1].lower()
    assert KIND_WORDS[guarantee.deletion] in deletion_cell, (name, deletion_cell)
    for kind, word in KIND_WORDS.items():
        if kind != guarantee.deletion and not deletion_cell.startswith(
            KIND_WORDS[guarantee.deletion]
        ):
            assert not deletion_cell.startswith(word), (name, deletion_cell)


def test_readme_links_the_page_and_states_the_cost_of_deleting():
    assert "doc/guarantees.rst" in README
    # A deletion re-releases the model: the README must not let "exact" read as free.
    assert re.search(r"re-releas", README)


def _fitted(name):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 3)) / 2
    if name == "DPLinearRegression":
        return sklearn_dpu.DPLinearRegression(random_state=0).fit(X, X @ [0.5, -0.5, 0.2])
    y = (X @ [1.0, -1.0, 0.5] > 0).astype(int)
    if name == "DPLogisticRegression":
        return sklearn_dpu.DPLogisticRegression(random_state=0).fit(X, y)
    if name == "UnlearnableSGDClassifier":
        return sklearn_dpu.UnlearnableSGDClassifier(random_state=0).fit(X, y)
    if name == "PrivateBoundsScaler":
        return sklearn_dpu.PrivateBoundsScaler(random_state=0).fit(X)
    search = sklearn_dpu.PrivateGridSearch(
        sklearn_dpu.DPLogisticRegression(), {"C": [0.1, 1.0]}, random_state=0
    )
    return search.fit(X, y)


@pytest.mark.parametrize("name", sorted(GUARANTEES))
def test_behaviour_matches_the_record(name):
    guarantee = GUARANTEES[name]
    est = _fitted(name)
    relations = {entry.get("neighboring_relation") for entry in est.privacy_ledger_}
    assert relations == {guarantee.relation}
    search_ids = est.best_estimator_ if name == "PrivateGridSearch" else est
    state = getattr(search_ids, "unlearning_state_", None)
    some_id = 0 if state is None else state.registry.live()[1][0]  # the scaler keeps no ids
    est.delete_samples([some_id])
    report = est.deletion_log_[-1]
    assert report.method in guarantee.deletion_methods
    assert report.remaining_epsilon == pytest.approx(est.privacy_spent_.epsilon)
