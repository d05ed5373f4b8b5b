"""The public API is exactly ``harness.__all__``, sorted, and every name in it exists."""

import harness


def test_all_is_sorted_and_complete() -> None:
    assert harness.__all__ == sorted(harness.__all__)
    for name in harness.__all__:
        assert hasattr(harness, name), name
    public = {name for name in vars(harness) if not name.startswith("_")}
    # Sub-packages are importable attributes too; everything else public must be listed.
    modules = {name for name in public if type(getattr(harness, name)).__name__ == "module"}
    assert public - modules == set(harness.__all__)
