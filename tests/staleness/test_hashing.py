import pytest

from ipykeep.staleness.hashing import source_hash

SAME = [
    ("x = 1", "x = 1  # set x\n\n"),
    ("x = f(a, b)", "x = f(\n    a,\n    b,\n)"),
    ("def f():\n    return 1", "def f():\n\n    # one\n    return 1\n"),
    ("%time y = 2", "%time y  =  2"),
    ("!ls -la\nx = 1", "!ls -la\n# comment\nx = 1"),
    ("%%bash\necho hi\n", "%%bash\necho hi"),
    ("def f(:\n  pass", "def f(:   \n\n  pass\n# trailing"),
]
DIFFERENT = [
    ("x = 1", "x = 2"),
    ("x = 1", "y = 1"),
    ("if a:\n    b = 1\nc = 2", "if a:\n    b = 1\n    c = 2"),
    ("!ls", "!ls -la"),
    ("def f(:", "def g(:"),
]


@pytest.mark.parametrize("a,b", SAME)
def test_same_hash(a: str, b: str) -> None:
    assert source_hash(a) == source_hash(b)


@pytest.mark.parametrize("a,b", DIFFERENT)
def test_different_hash(a: str, b: str) -> None:
    assert source_hash(a) != source_hash(b)


def test_magics_do_not_crash() -> None:
    for src in ["%matplotlib inline", "%%writefile x.txt\nhello", "x?", "!!", "%", "%%"]:
        assert source_hash(src).startswith("v1:")


def test_effect_hash_ignores_statements_that_only_show_values():
    from ipykeep.staleness.hashing import effect_hash

    base = effect_hash("total = sum(x)\nprint('total', total)")
    assert base == effect_hash("total = sum(x)\nprint(f'the total is {total}', len(x))")
    assert base == effect_hash("total = sum(x)\ntotal")
    # what the cell computes changed, or the shown expression may change state
    assert base != effect_hash("total = sum(x) + 1\nprint('total', total)")
    assert base != effect_hash("total = sum(x)\nprint(next(it))")
    assert base != effect_hash("total = sum(x)\nprint(sorted(gen))")
    assert base != effect_hash("total = sum(x)\ndf.head()")
    assert effect_hash("def f(:") is None
