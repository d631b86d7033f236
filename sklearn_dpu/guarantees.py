"""What each estimator promises, as data: the source of ``doc/guarantees.rst``.

One :class:`Guarantee` per public estimator. The guarantees page of the
documentation states the same promises in prose, and the test suite checks
that the page, the README's table and the estimators' behaviour (the
neighbouring relation recorded in their ledgers, the methods their deletion
reports name) agree with these records.

Examples
--------
>>> from sklearn_dpu.guarantees import GUARANTEES
>>> GUARANTEES["UnlearnableSGDClassifier"].deletion
'exact'
>>> sorted(GUARANTEES["DPLogisticRegression"].deletion_methods)
['certified', 'retrain']
"""

from dataclasses import dataclass

__all__ = ["GUARANTEES", "Guarantee"]


@dataclass(frozen=True)
class Guarantee:
    """The promises one estimator makes.

    Attributes
    ----------
    estimator : str
        The class name.
    relation : str
        The neighbouring relation of its differential privacy, as named by
        ``dp_accounting`` (``"ADD_OR_REMOVE_ONE"``: data sets that differ by
        one person's record being present or absent).
    deletion : {"exact", "certified", "delegated"}
        What ``delete_samples`` certifies: ``exact`` — afterwards the whole
        stored state has the distribution of a fresh fit on the remaining
        data; ``certified`` — (epsilon, delta)-indistinguishable from it, with
        the epsilon in the report (or an exact retrain); ``delegated`` — the
        inner model's guarantee, plus what the selection keeps.
    deletion_methods : frozenset of str
        The values a :class:`~sklearn_dpu.unlearning.DeletionReport`'s
        ``method`` may take for this estimator.
    not_covered : tuple of str
        What the guarantees do not cover, in words.
    """

    estimator: str
    relation: str
    deletion: str
    deletion_methods: frozenset
    not_covered: tuple[str, ...] = ()


_COMMON = (
    "the saved or pickled estimator: it stores the clipped training rows that deletion "
    "needs and must be protected like the data; only the published attributes are private",
    "an observer who compares the models published before and after a deletion: each "
    "deletion re-releases the model, and that re-release is charged to the remaining "
    "samples in privacy_spent_",
    "floating-point side channels of the noise samplers",
    "an int random_state: whoever knows it can remove the noise (for tests only)",
)

GUARANTEES: dict[str, Guarantee] = {
    g.estimator: g
    for g in (
        Guarantee(
            "DPLinearRegression",
            "ADD_OR_REMOVE_ONE",
            # with its default bounds estimated from the data ("auto"), which are
            # kept: certified; with public bounds: exact
            "certified",
            frozenset({"exact", "certified"}),
            _COMMON,
        ),
        Guarantee(
            "DPLogisticRegression",
            "ADD_OR_REMOVE_ONE",
            "certified",
            frozenset({"certified", "retrain"}),
            (
                *_COMMON,
                "deletion requests chosen after looking at the model (adaptive requests): "
                "the certified deletion epsilon assumes requests independent of the model",
            ),
        ),
        Guarantee(
            "UnlearnableSGDClassifier",
            "ADD_OR_REMOVE_ONE",
            "exact",
            frozenset({"exact", "certified"}),  # certified: feature_norm="auto"
            (
                *_COMMON,
                "deletion requests chosen after looking at the model (exactness of the "
                "coupling assumes requests independent of its randomness)",
            ),
        ),
        Guarantee(
            "PrivateGridSearch",
            "ADD_OR_REMOVE_ONE",
            "delegated",
            # the selected model's method, ", certified selection" for the selection it keeps;
            # "certified" alone when only validation rows were deleted
            frozenset(
                {
                    "certified",
                    "exact model, certified selection",
                    "certified model, certified selection",
                    "retrain model, certified selection",
                }
            ),
            (
                *_COMMON,
                "the choice of hyper-parameters is not recomputed after a deletion: it is "
                "protected only by the selection's own privacy, which weakens with the "
                "number of samples deleted so far (group privacy)",
            ),
        ),
        Guarantee(
            "PrivateBoundsScaler",
            "ADD_OR_REMOVE_ONE",
            "certified",
            frozenset({"certified"}),
            (
                "the ids of a deletion: the scaler stores no rows and no ids, so it "
                "cannot tell a known id from an unknown one (through "
                "sklearn_dpu.unlearning.delete_samples, the steps that keep ids check them)",
                "many deletions: the certified epsilon grows with the number of rows "
                "deleted since the fit (group privacy), and the scales are not recomputed",
                "floating-point side channels of the noise samplers",
                "an int random_state: whoever knows it can remove the noise (for tests only)",
            ),
        ),
    )
}
