"""The exception tree drawn at the top of ``harness/errors.py`` names every class the module defines."""

import inspect

from harness import errors


def test_the_docstring_tree_names_every_error() -> None:
    classes = [name for name, value in vars(errors).items() if inspect.isclass(value) and issubclass(value, errors.HarnessError)]
    assert len(classes) > 10
    tree = errors.__doc__ or ""
    assert [name for name in classes if f" {name} " not in tree and f"── {name}" not in tree] == []
