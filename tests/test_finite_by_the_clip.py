"""The clip is the pass that checks ``X`` is finite.

``UnlearnableSGDClassifier`` and ``DPLogisticRegression`` with a public
``feature_norm`` validate ``X`` with ``ensure_all_finite=False`` and let the
clip, which computes every row's norm anyway, find a NaN or an infinity
(``privacy.clipping.clip_block_into``). The error must still be
scikit-learn's, raised before anything is charged or changed, and an 'auto'
bound, drawn from ``X`` before the clip, must still have scikit-learn check
first.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.utils.validation as validation
from sklearn.utils import check_array

from sklearn_dpu import PrivacyBudget
from sklearn_dpu._validation import NonFiniteInputError
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.privacy.clipping import clip_block_into, clip_rows_l2

rng = np.random.default_rng(0)
X = rng.normal(size=(400, 6))
Y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)


def _sgd(**kwargs):
    return UnlearnableSGDClassifier(feature_norm=3.0, max_iter=20, random_state=0, **kwargs)


def _logistic(**kwargs):
    return DPLogisticRegression(feature_norm=3.0, random_state=0, **kwargs)


def _linear(**kwargs):
    return DPLinearRegression(feature_norm=3.0, target_bound=2.0, random_state=0, **kwargs)


ESTIMATORS = {"sgd": _sgd, "logistic": _logistic}
ALL = {**ESTIMATORS, "linear": _linear}


def _bad(bad, dtype=np.float64, sparse=False, row=317):
    X_bad = X.astype(dtype)
    X_bad[row, 2] = bad
    return sp.csr_matrix(X_bad) if sparse else X_bad


def _expected_message(X_bad, estimator):
    with pytest.raises(ValueError) as expected:
        check_array(X_bad, accept_sparse=True, input_name="X", estimator=estimator)
    return str(expected.value)


def _snapshot(est):
    return {key: value for key, value in est.__dict__.items()}


def _unchanged(est, before):
    return est.__dict__.keys() == before.keys() and all(
        est.__dict__[key] is before[key] for key in before
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("row", [0, 317, 399])
def test_clip_block_raises_before_writing_and_warns_nothing(bad, row):
    X_bad = _bad(bad, row=row)
    out = np.full(X.shape, 7.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NonFiniteInputError):
            clip_block_into(X_bad, 2.0, out)
        with pytest.raises(NonFiniteInputError):
            clip_block_into(X_bad, 2.0, out, divisor=2.0)
    assert np.all(out == 7.0)


def test_finite_rows_whose_norm_overflows_are_clipped_not_refused():
    # A finite row's norm is finite or inf, never NaN: only NaN means a
    # non-finite entry.
    X_huge = X.copy()
    X_huge[5] = np.finfo(np.float64).max / 2
    out = np.empty_like(X_huge)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clip_rows_l2(X_huge, 2.0, out=out)
    assert np.all(np.isfinite(out))
    assert np.linalg.norm(out, axis=1).max() <= 2.0


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize(
    ("dtype", "sparse"), [(np.float64, False), (np.float32, False), (np.float64, True)]
)
def test_refit_with_non_finite_x_raises_scikit_learns_error_and_changes_nothing(
    name, bad, dtype, sparse
):
    budget = PrivacyBudget(100.0, 1e-4)
    est = ESTIMATORS[name](budget=budget).fit(X, Y)
    before, spent = _snapshot(est), budget.spent().epsilon
    X_bad = _bad(bad, dtype, sparse)
    with pytest.raises(ValueError) as raised:
        est.fit(X_bad, Y)
    assert str(raised.value) == _expected_message(X_bad, est)
    assert budget.spent().epsilon == spent
    assert _unchanged(est, before)


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("bad", [np.nan, -np.inf])
@pytest.mark.parametrize("sparse", [False, True])
def test_partial_fit_with_non_finite_x_raises_scikit_learns_error_and_changes_nothing(
    name, bad, sparse
):
    budget = PrivacyBudget(100.0, 1e-4)
    est = ESTIMATORS[name](budget=budget).partial_fit(X[:200], Y[:200], classes=[0, 1])
    before, spent = _snapshot(est), budget.spent().epsilon
    X_bad = _bad(bad, sparse=sparse, row=250)[200:]
    with pytest.raises(ValueError) as raised:
        est.partial_fit(X_bad, Y[200:])
    assert str(raised.value) == _expected_message(X_bad, est)
    assert budget.spent().epsilon == spent
    assert _unchanged(est, before)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_first_partial_fit_with_non_finite_x_is_refused(name):
    est = ESTIMATORS[name]()
    with pytest.raises(ValueError, match="Input X contains NaN"):
        est.partial_fit(_bad(np.nan), Y, classes=[0, 1])
    assert not hasattr(est, "coef_")


def _finiteness_checks(monkeypatch):
    checked = []
    original = validation._assert_all_finite

    def recording(X, *args, input_name="", **kwargs):
        checked.append(input_name)
        return original(X, *args, input_name=input_name, **kwargs)

    monkeypatch.setattr(validation, "_assert_all_finite", recording)
    return checked


@pytest.mark.parametrize("name", ["sgd", "logistic", "linear"])
def test_a_public_bound_fit_reads_x_for_finiteness_once(monkeypatch, name):
    # scikit-learn's separate finiteness pass over X is folded into the clip
    # (the encoding, for DPLinearRegression); y, n values, is still checked.
    checked = _finiteness_checks(monkeypatch)
    est = ALL[name]().fit(X, Y)
    assert "X" not in checked and "y" in checked
    if name != "linear":  # (DPLinearRegression's partial_fit checks X itself)
        checked.clear()
        est.partial_fit(X[:50], Y[:50])
        assert "X" not in checked


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_an_auto_bound_is_drawn_from_x_checked_by_scikit_learn(monkeypatch, name):
    # The negative control of the test above: the 'auto' bound reads X before
    # the clip, so scikit-learn's own pass must run first.
    checked = _finiteness_checks(monkeypatch)
    ESTIMATORS[name]().set_params(feature_norm="auto").fit(X, Y)
    assert "X" in checked


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_refit_with_a_public_bound_after_an_auto_one_clips_to_the_public_bound(name):
    # The rows are clipped during validation, before the earlier fit's
    # released bound (feature_norm_) is forgotten: they must use the new one.
    est = ESTIMATORS[name]().set_params(feature_norm="auto").fit(X, Y)
    assert hasattr(est, "feature_norm_")
    est.set_params(feature_norm=0.5).fit(X, Y)
    fresh = ESTIMATORS[name]().set_params(feature_norm=0.5).fit(X, Y)
    assert not hasattr(est, "feature_norm_")
    np.testing.assert_array_equal(est.coef_, fresh.coef_)


def _y_with_nan():
    y = Y.astype(float)
    y[3] = np.nan
    return y


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize(
    "other_error",
    [_y_with_nan, lambda: np.zeros(len(Y)), lambda: Y[:-1]],
    ids=["nan-y", "one-class", "short-y"],
)
def test_a_non_finite_x_is_the_error_reported_as_scikit_learn_reports_it(name, other_error):
    # validate_data checks X first; with the check moved into the clip, an
    # error in y (or the labels) must not take its place.
    est = ALL[name]()
    X_bad = _bad(np.nan)
    with pytest.raises(ValueError) as raised:
        est.fit(X_bad, other_error())
    assert str(raised.value) == _expected_message(X_bad, est)
    # One traceback: the error replaces the one found first.
    assert raised.value.__suppress_context__


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_partial_fit_reports_a_non_finite_x_before_labels_and_ids(name):
    est = ESTIMATORS[name]().fit(X[:200], Y[:200], sample_id=np.arange(200))
    registry = est.unlearning_state_.registry
    before = dict(registry.__dict__)
    X_bad = _bad(np.nan, row=250)[200:]
    expected = _expected_message(X_bad, est)
    for y, ids in [(Y[200:], np.arange(200)), (np.full(200, 7), None), (Y[200:], None)]:
        with pytest.raises(ValueError) as raised:
            est.partial_fit(X_bad, y, sample_id=ids)
        assert str(raised.value) == expected
    # The ids were not looked up (the registry's lazy index stays unbuilt).
    assert registry.__dict__.keys() == before.keys()
    assert all(registry.__dict__[key] is before[key] for key in before)


def test_errors_other_than_x_are_unchanged():
    est = _sgd()
    with pytest.raises(ValueError, match="Input y contains NaN"):
        est.fit(X, _y_with_nan())
    with pytest.raises(ValueError, match="at least 2 classes"):
        est.fit(X, np.zeros(len(Y)))


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_type_error_in_the_labels_does_not_hide_a_non_finite_x(name):
    y = np.array(["a"] + [1] * 199 + ["b"] * 200, dtype=object)
    X_bad = _bad(np.nan)
    with pytest.raises(ValueError) as raised:
        ESTIMATORS[name]().fit(X_bad, y)
    assert str(raised.value) == _expected_message(X_bad, ESTIMATORS[name]())


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_refused_input_warns_once(name):
    # The validation that runs again on failure is silent: scikit-learn's
    # warnings (a column-vector y) appear once, not twice.
    est = ESTIMATORS[name]().fit(X, Y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="not in classes_"):
            est.partial_fit(X[:50], (Y[:50] + 5)[:, None])
    assert len(caught) == 1, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", list(ALL))
def test_under_assume_finite_a_non_finite_x_is_still_refused(name):
    # scikit-learn skips its check; the clip still refuses, with a plain
    # ValueError (the internal NonFiniteInputError does not reach users).
    import sklearn

    budget = PrivacyBudget(100.0, 1e-4)
    est = ALL[name](budget=budget)
    with sklearn.config_context(assume_finite=True):
        with pytest.raises(ValueError, match="infinity") as raised:
            est.fit(_bad(np.inf), Y)
    assert type(raised.value) is ValueError
    assert budget.spent().epsilon == 0.0


def test_auto_bounds_under_assume_finite_check_x_before_the_charge():
    # The 'auto' bounds are charged before they are drawn from X: their
    # finiteness check runs whatever scikit-learn's assume_finite says.
    import sklearn

    budget = PrivacyBudget(100.0, 1e-4)
    est = DPLinearRegression(feature_norm="auto", target_bound=2.0, budget=budget)
    with sklearn.config_context(assume_finite=True):
        with pytest.raises(ValueError, match="Input X contains NaN"):
            est.fit(_bad(np.nan), Y.astype(float))
    assert budget.spent().epsilon == 0.0
    assert not hasattr(est, "coef_")


def test_linear_partial_fit_under_assume_finite_refuses_nan_before_the_charge():
    import sklearn

    budget = PrivacyBudget(100.0, 1e-4)
    est = _linear(budget=budget).fit(X[:200], Y[:200].astype(float))
    spent = budget.spent().epsilon
    with sklearn.config_context(assume_finite=True):
        with pytest.raises(ValueError, match="Input X contains NaN"):
            est.partial_fit(_bad(np.nan, row=250)[200:], Y[200:].astype(float))
    assert budget.spent().epsilon == spent
