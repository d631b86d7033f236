"""Sphinx configuration: ``pip install -e .[doc]`` then ``sphinx-build -W doc doc/_build``.

The build must stay free of warnings: ``tests/test_docs.py`` runs it with
``-W`` as part of the test suite.
"""

from docutils import nodes

import sklearn_dpu

project = "sklearn-dpu"
release = sklearn_dpu.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
numpydoc_show_class_members = False
html_theme = "pydata_sphinx_theme"
exclude_patterns = ["_build"]
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "doc_module": "sklearn_dpu",
}

# Methods inherited from scikit-learn (``score``) carry docstrings that refer to
# labels of scikit-learn's user guide. The build runs offline, so instead of
# intersphinx these few labels link to scikit-learn's pages directly; any
# other unresolved label still fails the build.
SKLEARN_LABELS = {
    "r2_score": "modules/model_evaluation.html#r2-score",
    "accuracy_score": "modules/model_evaluation.html#accuracy-score",
}


def _link_sklearn_label(app, env, node, contnode):
    target = node.get("reftarget")
    if node.get("reftype") != "ref" or target not in SKLEARN_LABELS:
        return None
    url = "https://scikit-learn.org/stable/" + SKLEARN_LABELS[target]
    return nodes.reference("", "", contnode, refuri=url, internal=False)


def setup(app):
    app.connect("missing-reference", _link_sklearn_label)
