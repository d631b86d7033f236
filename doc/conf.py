"""Sphinx configuration: ``pip install -e .[doc]`` then ``sphinx-build doc doc/_build``."""

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
