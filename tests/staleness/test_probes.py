"""In-kernel probe sources run in-process, and the host-side decoding of their replies."""

import json
import sys
from pathlib import Path

import pytest

from ipykeep.kernel.inkernel import FILETRACK, source_install_expression
from ipykeep.staleness import probes


@pytest.fixture(scope="module")
def filetrack():
    name = "_ipykeep_filetrack_test"
    eval(source_install_expression(name, FILETRACK.source), {})
    yield sys.modules[name]
    sys.modules.pop(name, None)


def _end(mod) -> list:
    payload = json.loads(mod.end())
    return [Path(f.path).name for f in probes.parse_filetrack_end(payload)]


def test_filetrack_records_reads_under_root_only(filetrack, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("x")
    filetrack.install(str(tmp_path))
    filetrack.begin()
    Path("in.txt").read_text()  # relative path: resolved against the cwd
    with open("out.txt", "w") as fh:
        fh.write("y")
    with open(tmp_path / "both.txt", "a+"):
        pass
    open(__file__).close()  # outside the root
    assert _end(filetrack) == ["in.txt"]
    filetrack.begin()
    assert _end(filetrack) == []


def test_filetrack_leaves_out_the_kernels_own_environment_inside_the_root(
    filetrack, tmp_path: Path, monkeypatch
) -> None:
    venv = tmp_path / ".venv" / "lib"
    venv.mkdir(parents=True)
    (venv / "pkg.py").write_text("x")
    (tmp_path / "data.txt").write_text("x")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    filetrack.install(str(tmp_path))
    filetrack.begin()
    (venv / "pkg.py").read_text()  # what an import or an installer opens in the environment
    (tmp_path / "data.txt").read_text()
    assert _end(filetrack) == ["data.txt"]


def test_filetrack_not_active_records_nothing(filetrack, tmp_path: Path) -> None:
    filetrack.install(str(tmp_path))
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "a.txt").read_text()
    filetrack.begin()
    assert _end(filetrack) == []


def test_filetrack_reports_pandas_reads(filetrack, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    (tmp_path / "d.csv").write_text("a\n1\n")
    filetrack.install(str(tmp_path))
    filetrack.begin()
    pd.read_csv(tmp_path / "d.csv")
    payload = json.loads(filetrack.end())
    (stamp,) = probes.parse_filetrack_end(payload)
    assert stamp.path == str(tmp_path / "d.csv") and stamp.size == 4


def test_reinstall_keeps_one_hook(tmp_path: Path) -> None:
    for _ in range(2):
        eval(source_install_expression("_ipykeep_filetrack_again", FILETRACK.source), {})
    mod = sys.modules.pop("_ipykeep_filetrack_again")
    mod.install(str(tmp_path))
    assert sys.__dict__["_ipykeep_filetrack_state"]["hooked"] is True


def test_decode_expression_value() -> None:
    entry = {"status": "ok", "data": {"text/plain": repr(json.dumps({"protocol": 1}))}}
    assert probes.decode_expression_value(entry) == {"protocol": 1}
    with pytest.raises(probes.ProbeError, match="NameError"):
        probes.decode_expression_value({"status": "error", "ename": "NameError", "evalue": "x"})
    with pytest.raises(probes.ProbeError, match="not JSON"):
        probes.decode_expression_value({"status": "ok", "data": {"text/plain": "<object>"}})


def test_expressions() -> None:
    assert probes.filetrack_end_expr() == "__import__(\"sys\").modules['_ipykeep_filetrack'].end()"
    assert "install('/p')" in probes.filetrack_install_expr("/p")
