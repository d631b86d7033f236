"""float32 in, float32 out (as scikit-learn's analogous estimators), private
computation in float64; ``verbose=`` prints only public values."""

import contextlib
import io

import numpy as np
import pytest

from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.model_selection import PrivateGridSearch


def _data(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] - X[:, 1] > 0).astype(int), X @ np.linspace(-1, 1, d)


@pytest.mark.parametrize(
    "estimator",
    [
        DPLogisticRegression(solver="output", feature_norm=3.0, random_state=0),
        DPLogisticRegression(solver="noisy_gd", feature_norm=3.0, random_state=0),
        DPLogisticRegression(solver="objective", feature_norm=3.0, random_state=0),
    ],
    ids=lambda e: e.solver,
)
def test_logistic_float32_as_logistic_regression(estimator):
    """LogisticRegression: float32 X gives float32 coef_, intercept_,
    decision_function and predict_proba; the model is the float64 fit on the
    same (float32-representable) values, rounded once: every private
    computation ran in float64. Deletions keep the dtype."""
    X, y, _ = _data()
    X32 = X.astype(np.float32)
    est32 = estimator.fit(X32, y)
    assert est32.coef_.dtype == np.float32 and est32.intercept_.dtype == np.float32
    assert est32.decision_function(X32).dtype == np.float32
    assert est32.predict_proba(X32).dtype == np.float32
    est64 = DPLogisticRegression(**estimator.get_params()).fit(X32.astype(np.float64), y)
    assert est64.coef_.dtype == np.float64
    np.testing.assert_array_equal(est32.coef_, est64.coef_.astype(np.float32))
    np.testing.assert_array_equal(est32.intercept_, est64.intercept_.astype(np.float32))
    assert est32.privacy_ledger_ == est64.privacy_ledger_
    est32.delete_samples([0, 1])
    assert est32.coef_.dtype == np.float32 and est32.intercept_.dtype == np.float32


def test_logistic_partial_fit_float32():
    X, y, _ = _data()
    est = DPLogisticRegression(feature_norm=3.0, random_state=0)
    est.partial_fit(X[:200].astype(np.float32), y[:200], classes=[0, 1])
    est.partial_fit(X[200:].astype(np.float32), y[200:])
    assert est.coef_.dtype == np.float32


def test_sgd_float32_as_sgd_classifier():
    """SGDClassifier: float32 X gives a float32 coef_ and a float64 intercept_."""
    X, y, _ = _data()
    X32 = X.astype(np.float32)
    params = dict(feature_norm=3.0, random_state=0, max_iter=3)
    est32 = UnlearnableSGDClassifier(**params).fit(X32, y)
    assert est32.coef_.dtype == np.float32 and est32.intercept_.dtype == np.float64
    est64 = UnlearnableSGDClassifier(**params).fit(X32.astype(np.float64), y)
    np.testing.assert_array_equal(est32.coef_, est64.coef_.astype(np.float32))
    np.testing.assert_array_equal(est32.intercept_, est64.intercept_)
    est32.delete_samples([3])
    assert est32.coef_.dtype == np.float32
    est32.partial_fit(X32[:5], y[:5], sample_id=np.arange(1000, 1005))
    assert est32.coef_.dtype == np.float32


@pytest.mark.parametrize("solver", ["ssp", "noisy_gd", "ambssgd"])
def test_linear_float32_as_linear_regression(solver):
    """LinearRegression: float32 X gives float32 coef_, a numpy.float32
    intercept_ and float32 predictions; the model is the float64 one rounded."""
    X, _, t = _data()
    X32, t32 = X.astype(np.float32), t.astype(np.float32)
    params = dict(solver=solver, feature_norm=3.0, target_bound=3.0, random_state=0)
    est32 = DPLinearRegression(**params).fit(X32, t32)
    assert est32.coef_.dtype == np.float32 and isinstance(est32.intercept_, np.float32)
    assert est32.predict(X32).dtype == np.float32
    est64 = DPLinearRegression(**params).fit(X32.astype(np.float64), t32.astype(np.float64))
    np.testing.assert_array_equal(est32.coef_, est64.coef_.astype(np.float32))
    assert est32.intercept_ == np.float32(est64.intercept_)
    est32.delete_samples([0])
    assert est32.coef_.dtype == np.float32 and isinstance(est32.intercept_, np.float32)


def test_float64_unchanged():
    X, y, t = _data()
    assert DPLogisticRegression(random_state=0).fit(X, y).coef_.dtype == np.float64
    assert isinstance(DPLinearRegression(random_state=0).fit(X, t).intercept_, float)


# ------------------------------------------------------------------ verbose


def _stdout(fn) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        fn()
    return buffer.getvalue()


def _runs(make, X, y, deleting=True):
    def run():
        est = make().fit(X, y)
        if deleting:
            est.delete_samples([0])

    return run


VERBOSE_CASES = {
    "logistic-noisy_gd": lambda s, v: DPLogisticRegression(
        solver="noisy_gd", feature_norm=3.0, random_state=s, verbose=v
    ),
    "logistic-output": lambda s, v: DPLogisticRegression(
        solver="output", feature_norm="auto", random_state=s, verbose=v
    ),
    "sgd": lambda s, v: UnlearnableSGDClassifier(
        feature_norm=3.0, max_iter=2, random_state=s, verbose=v
    ),
    "linear-noisy_gd": lambda s, v: DPLinearRegression(
        solver="noisy_gd", max_iter=30, random_state=s, verbose=v
    ),
    "linear-ambssgd": lambda s, v: DPLinearRegression(
        solver="ambssgd", feature_norm=3.0, target_bound=3.0, random_state=s, verbose=v
    ),
    "logistic-langevin": lambda s, v: DPLogisticRegression(
        solver="langevin", feature_norm=3.0, random_state=s, verbose=v
    ),
    "logistic-objective": lambda s, v: DPLogisticRegression(
        solver="objective", feature_norm=3.0, random_state=s, verbose=v
    ),
}


@pytest.mark.parametrize("case", sorted(VERBOSE_CASES))
def test_verbose_prints_progress_only_when_asked(case):
    X, y, t = _data()
    target = t if case.startswith("linear") else y
    make = VERBOSE_CASES[case]
    assert _stdout(_runs(lambda: make(0, 0), X, target)) == ""
    out = _stdout(_runs(lambda: make(0, 2), X, target))
    lines = out.splitlines()
    assert any("fit:" in line and "privacy spent so far: epsilon=" in line for line in lines)
    assert any(line.startswith("[") and "delete_samples" in line for line in lines)
    assert any("release 1/" in line for line in lines)  # verbose=2: the ledger records
    quiet = _stdout(_runs(lambda: make(0, 1), X, target))
    assert "release 1/" not in quiet and "privacy spent so far" in quiet


def _leaking_lines(outputs: dict) -> list:
    """Line numbers whose text is the same for every seed on each data set
    and differs between the two data sets."""
    leaks = []
    n_lines = max(len(o.splitlines()) for outs in outputs.values() for o in outs)
    for k in range(n_lines):
        per_set = [
            {(o.splitlines() + [None] * n_lines)[k] for o in outs} for outs in outputs.values()
        ]
        if all(len(v) == 1 for v in per_set) and per_set[0] != per_set[1]:
            leaks.append(k)
    return leaks


NEIGHBOURS = (("D", slice(0, 400)), ("D'", slice(0, 401)))


@pytest.mark.parametrize("case", sorted(VERBOSE_CASES))
def test_verbose_output_is_not_a_function_of_the_data(case):
    """Neighbouring data sets (n and n + 1 rows), several seeds: a printed
    line that is the same for every seed on one data set and differs between
    the two would be a function of private data (the leak check's test)."""
    X, y, t = _data(n=401)
    target = t if case.startswith("linear") else y
    make = VERBOSE_CASES[case]
    outputs = {
        name: [
            _stdout(_runs(lambda s=seed: make(s, 2), X[rows], target[rows])) for seed in range(3)
        ]
        for name, rows in NEIGHBOURS
    }
    assert _leaking_lines(outputs) == []


def test_verbose_leak_negative_control():
    """The check above flags a line that prints the exact n."""
    X, y, _ = _data(n=401)

    def leaky(rows, seed):
        est = DPLogisticRegression(feature_norm=3.0, random_state=seed, verbose=1)
        return _stdout(lambda: (est.fit(X[rows], y[rows]), print(f"n={len(X[rows])}")))

    outputs = {name: [leaky(rows, s) for s in range(3)] for name, rows in NEIGHBOURS}
    assert _leaking_lines(outputs) == [1]


def test_private_grid_search_verbose():
    X, y, _ = _data()
    search = PrivateGridSearch(
        DPLogisticRegression(feature_norm=3.0), {"C": [0.1, 1.0]}, random_state=0, verbose=1
    )
    out = _stdout(lambda: search.fit(X, y))
    assert "[PrivateGridSearch] fit: 2 candidate(s), then a private selection" in out
    assert "privacy spent so far" in out
    assert _stdout(lambda: search.set_params(verbose=0).fit(X, y)) == ""


# ------------------------------------------------------- per-step progress

STEPPED = {  # case -> label of its solver's step lines
    "logistic-noisy_gd": "noisy GD step",
    "logistic-langevin": "Langevin step",
    "sgd": "SGD step",
    "linear-noisy_gd": "noisy GD step",
    "linear-ambssgd": "AMBSSGD block step",
}


@pytest.mark.parametrize("case", sorted(STEPPED))
def test_verbose_2_prints_steps_and_epsilon_so_far(case):
    """verbose=2: about ten step lines per run, the last one the whole run,
    each with an epsilon from the plan; verbose=1: none; verbose=3: every step."""
    X, y, t = _data()
    target = t if case.startswith("linear") else y
    make = VERBOSE_CASES[case]
    label = STEPPED[case]
    steps = [line for line in _stdout(_runs(lambda: make(0, 2), X, target, False)).splitlines()]
    steps = [line for line in steps if label in line]
    assert 1 <= len(steps) <= 11
    done, total = steps[-1].split(f"{label} ")[1].split(";")[0].split("/")
    assert done == total
    epsilons = [float(line.rsplit(": ", 1)[1]) for line in steps]
    assert epsilons == sorted(epsilons)  # composed so far: never decreases
    assert not any(label in line for line in _stdout(_runs(lambda: make(0, 1), X, target, False)))
    every = _stdout(_runs(lambda: make(0, 3), X, target, False)).splitlines()
    assert sum(label in line for line in every) == int(total)


def test_step_epsilon_reaches_the_ledger_when_the_plan_is_exact():
    """Linear noisy GD plans its releases exactly: the last step's epsilon is
    the fit's privacy_spent_, the first is below it."""
    X, _, t = _data()
    est = DPLinearRegression(solver="noisy_gd", max_iter=30, random_state=0, verbose=2)
    lines = [line for line in _stdout(lambda: est.fit(X, t)).splitlines() if "step" in line]
    assert "composed so far" in lines[-1]
    first, last = (float(line.rsplit(": ", 1)[1]) for line in (lines[0], lines[-1]))
    assert last == pytest.approx(est.privacy_spent_.epsilon, rel=1e-6)
    assert first < last


def test_minimizers_print_no_iterations():
    """Output and objective perturbation stop when a data-dependent criterion
    holds: one phase line, no iteration numbers."""
    X, y, _ = _data()
    for case in ("logistic-output", "logistic-objective"):
        out = _stdout(_runs(lambda c=case: VERBOSE_CASES[c](0, 3), X, y, False))
        assert "iterations not printed" in out
        assert " step " not in out


def test_step_ticker_is_off_unless_verbose_2():
    """No reporter (hence no formatting) below verbose=2, and a quiet
    estimator inside a verbose call (a search's candidate) masks it."""
    from sklearn_dpu._progress import iteration_progress, step_ticker

    loud, quiet = DPLinearRegression(verbose=2), DPLinearRegression(verbose=1)
    assert step_ticker(10, "x") is None
    with iteration_progress(quiet, "fit", [], []):
        assert step_ticker(10, "x") is None
    with iteration_progress(loud, "fit", [], []):
        assert step_ticker(10, "x") is not None
        with iteration_progress(quiet, "fit", [], []):
            assert step_ticker(10, "x") is None


def test_step_leak_negative_control():
    """The leak check flags step lines whose count depends on the data (a
    run stopped at a data-dependent iteration)."""
    from sklearn_dpu._progress import iteration_progress, step_ticker

    X, _, _ = _data(n=401)

    def leaky(rows, seed):
        est = DPLinearRegression(random_state=seed, verbose=2)

        def run():
            with iteration_progress(est, "fit", [], []):
                tick = step_ticker(len(X[rows]), "stopped")  # data-dependent length
                for k in range(len(X[rows])):
                    tick(k)

        return _stdout(run)

    outputs = {name: [leaky(rows, s) for s in range(3)] for name, rows in NEIGHBOURS}
    assert _leaking_lines(outputs) != []


def test_private_grid_search_verbose_2_per_candidate():
    X, y, _ = _data()
    search = PrivateGridSearch(
        DPLogisticRegression(feature_norm=3.0), {"C": [0.1, 1.0]}, random_state=0, verbose=2
    )
    out = _stdout(lambda: search.fit(X, y)).splitlines()
    lines = [line for line in out if "candidate 1/2" in line or "candidate 2/2" in line]
    assert len(lines) == 2 and "{'C': 0.1}" in lines[0]
    epsilons = [float(line.rsplit(": ", 1)[1]) for line in lines]
    assert epsilons[0] < epsilons[1]
    assert not any("noisy GD step" in line for line in out)  # candidates stay silent
    assert not any(
        "candidate 1/2" in line
        for line in _stdout(lambda: search.set_params(verbose=1).fit(X, y)).splitlines()
    )


def test_private_grid_search_verbose_not_a_function_of_the_data():
    X, y, _ = _data(n=401)

    def run(rows, seed):
        search = PrivateGridSearch(
            DPLogisticRegression(feature_norm=3.0), {"C": [0.1, 1.0]}, random_state=seed, verbose=2
        )
        return _stdout(lambda: search.fit(X[rows], y[rows]))

    outputs = {name: [run(rows, s) for s in range(3)] for name, rows in NEIGHBOURS}
    assert _leaking_lines(outputs) == []


def test_verbose_3_composes_the_ledger_about_ten_times_per_run(monkeypatch):
    """verbose=3 prints every step, but composes the ledger (a PLD with 'auto'
    bounds, ~0.1 s) only at about ten of them: 200 steps printed 200 epsilons
    and took 20x the fit before."""
    import sklearn_dpu.privacy.ledger as ledger

    calls = []
    real = ledger.privacy_spent
    monkeypatch.setattr(ledger, "privacy_spent", lambda *a, **k: calls.append(1) or real(*a, **k))
    X, _, t = _data()
    est = DPLinearRegression(solver="noisy_gd", max_iter=200, random_state=0, verbose=3)
    lines = [line for line in _stdout(lambda: est.fit(X, t)).splitlines() if "step" in line]
    assert len(lines) == 200
    with_epsilon = [line for line in lines if "epsilon" in line]
    assert len(with_epsilon) == 10 and "200/200" in with_epsilon[-1]
    assert len(calls) <= 15


def test_dp_sgd_pass_steps_never_print_more_than_the_ledger():
    """The DP-SGD pass of a logistic partial_fit runs on disjoint batches
    (parallel composition): its step lines printed 3.09 when the ledger said 1."""
    X, y, _ = _data(n=4000)
    est = DPLogisticRegression(solver="noisy_gd", random_state=0, verbose=2)

    def stream():
        est.partial_fit(X[:2000], y[:2000], classes=np.unique(y))
        est.partial_fit(X[2000:], y[2000:])

    steps = [line for line in _stdout(stream).splitlines() if "DP-SGD batch step" in line]
    assert steps
    epsilons = [float(line.rsplit(": ", 1)[1]) for line in steps]
    assert max(epsilons) <= est.privacy_spent_.epsilon + 1e-9
