"""Every public function and public method of a public class is fully annotated.

Walks the source of ``sklearn_dpu`` with :mod:`ast` (private modules such as
``_losses.py`` included) and lists each public function, or public method of a
public class, that lacks a parameter or a return annotation.  ``self`` and
``cls`` are exempt; properties need a return annotation.
"""

import ast
from pathlib import Path

import sklearn_dpu

PACKAGE = Path(sklearn_dpu.__file__).parent


def _missing(func: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    args = func.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg is not None:
        params.append(args.vararg)
    if args.kwarg is not None:
        params.append(args.kwarg)
    if method and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    missing = [p.arg for p in params if p.annotation is None]
    if func.returns is None:
        missing.append("return")
    return missing


def _unannotated() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(PACKAGE.parent)
        for node in tree.body:
            functions = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.name, node, False))
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                functions.extend(
                    (f"{node.name}.{item.name}", item, True)
                    for item in node.body
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                )
            for name, func, method in functions:
                if name.rsplit(".", 1)[-1].startswith("_"):
                    continue
                missing = _missing(func, method)
                if missing:
                    problems.append(f"{where}:{func.lineno} {name}: {', '.join(missing)}")
    return problems


def test_walker_sees_a_missing_annotation():
    tree = ast.parse("def f(a, b: int):\n    return a\n")
    assert _missing(tree.body[0], method=False) == ["a", "return"]
    tree = ast.parse("class C:\n    def g(self, x: int) -> int:\n        return x\n")
    assert _missing(tree.body[0].body[0], method=True) == []


def test_public_functions_are_annotated():
    problems = _unannotated()
    assert not problems, "missing annotations:\n" + "\n".join(problems)
