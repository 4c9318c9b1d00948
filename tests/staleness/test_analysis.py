import pytest

from ipykeep.staleness.analysis import analyze_source

# source, defs, uses, mutates
CASES = [
    ("import pandas as pd\nimport os.path\nfrom a import b as c", {"pd", "os", "c"}, set(), set()),
    ("x = 1\nprint(x)", {"x"}, {"print"}, set()),
    ("x = x + 1", {"x"}, {"x"}, set()),
    ("x += 1", {"x"}, {"x"}, {"x"}),
    ("df['a'] = 1", set(), {"df"}, {"df"}),
    ("obj.attr.b = 1", set(), {"obj"}, {"obj"}),
    ("df.drop(columns=['a'], inplace=True)", set(), {"df"}, {"df"}),
    ("lst.append(1)", set(), {"lst"}, {"lst"}),
    ("model.fit(X, y)", set(), {"model", "X", "y"}, {"model"}),
    ("h = df.head()", {"h"}, {"df"}, set()),
    ("del d['k']", set(), {"d"}, {"d"}),
    ("del x", {"x"}, {"x"}, set()),
    ("lst = []\nlst.append(1)", {"lst"}, set(), set()),
    ("y = [i * k for i in range(n) if i > t]", {"y"}, {"k", "range", "n", "t"}, set()),
    ("s = {k: v for k, v in d.items()}", {"s"}, {"d"}, set()),
    ("g = (w for w in ws)", {"g"}, {"ws"}, set()),
    ("for i in items:\n    total = i", {"i", "total"}, {"items"}, set()),
    ("with open(p) as fh:\n    data = fh.read()", {"fh", "data"}, {"open", "p"}, set()),
    (
        "try:\n    import foo\nexcept ImportError as e:\n    foo = None",
        {"foo"},
        {"ImportError"},
        set(),
    ),
    ("def f(a, b=default):\n    return a + b + G", {"f"}, {"default"}, set()),
    (
        "@deco\nclass C(Base):\n    z = Z\n    def m(self):\n        return W",
        {"C"},
        {"deco", "Base", "Z"},
        set(),
    ),
    ("f = lambda q: q + r", {"f"}, {"r"}, set()),
    ("%time zz = yy", {"zz"}, {"yy"}, set()),
    ("res = !pwd", {"res"}, set(), set()),
    ("_ + Out[3] + _i2 + __ + _7", set(), set(), set()),
    ("try:\n    x = 1\nexcept E as e:\n    x = e", {"x"}, {"E"}, set()),
    ("%%capture cap\nv = u", {"cap", "v"}, {"u"}, set()),
    ("if (n := len(a)) > 3:\n    pass", {"n"}, {"len", "a"}, set()),
    ("match cmd:\n    case [x, *rest]:\n        y = x", {"x", "rest", "y"}, {"cmd"}, set()),
]


@pytest.mark.parametrize("source,defs,uses,mutates", CASES)
def test_defs_uses_mutates(source: str, defs: set, uses: set, mutates: set) -> None:
    an = analyze_source(source)
    assert an.parseable
    assert set(an.defs) == defs
    assert set(an.uses) == uses
    assert set(an.mutates) == mutates


def test_function_free_globals_and_global_writes() -> None:
    an = analyze_source(
        "def g(v):\n    global counter\n    counter += 1\n    lst.append(v)\n"
        "    return helper(v) + K\n"
        "class C:\n    def m(self):\n        return W + self.z\n"
    )
    g = an.functions["g"]
    assert set(g.free_globals) == {"counter", "lst", "helper", "K"}
    assert set(g.mutated_globals) == {"counter", "lst"}
    assert set(an.functions["C"].free_globals) == {"W"}
    assert an.uses == frozenset()


def test_nested_function_locals_are_not_free() -> None:
    an = analyze_source(
        "def outer():\n    a = 1\n    def inner():\n        return a + B\n    return inner"
    )
    assert set(an.functions["outer"].free_globals) == {"B"}


def test_path_literals_reads_only() -> None:
    an = analyze_source(
        'import pandas as pd\ndf = pd.read_csv("data/in.csv")\ntext = open("notes.txt").read()\n'
        'df.to_csv("out.csv")\nopen("log.txt", "w").write("x")\nlabel = "hello world"\n'
        'p = Path("conf/settings.yaml")'
    )
    assert an.paths == ("data/in.csv", "notes.txt", "conf/settings.yaml")


def test_unparseable() -> None:
    an = analyze_source("x = = 1")
    assert not an.parseable and an.defs == frozenset() and an.uses == frozenset()


def test_star_import_is_flagged() -> None:
    assert analyze_source("from math import *").star_import


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('echo c3 >> run.log')",
        "import os\nos.system('cat data/in.csv')",
        "get_ipython().system('wc -l data/in.csv')",  # what ``!wc -l data/in.csv`` becomes
        "get_ipython().run_cell_magic('bash', '', 'sort data/in.csv')",
        "import subprocess\nsubprocess.run('head notes.txt', shell=True)",
        "import subprocess\nout = subprocess.check_output('cat notes.txt')",
        "import os\nos.popen('ls conf/settings.yaml')",
        "f = open('echo c3 >> run.log')",  # shell syntax is no file name, whatever the call
    ],
)
def test_shell_command_text_is_no_path(source: str) -> None:
    an = analyze_source(source)
    assert an.paths == ()
    assert an.written_paths == ()


def test_shell_cells_stay_opaque_and_other_paths_count() -> None:
    an = analyze_source(
        "import os\nos.system('echo c3 >> run.log')\ntext = open('notes.txt').read()"
    )
    assert an.shell
    assert an.paths == ("notes.txt",)
