"""``ipykeep add`` at a shell, against a real daemon whose kernel runs in the project's .venv."""

from __future__ import annotations

import json
import stat

import nbformat
import pytest

from tests.conftest import make_project, run_cli, stop_daemon
from tests.environments.envs import make_venv

# environments are laid out as on POSIX (bin/python), as discovery expects them
pytestmark = [pytest.mark.kernel, pytest.mark.posix]


def test_add_installs_into_the_kernel_and_says_it_recorded_nowhere(tmp_path) -> None:
    root = make_project(tmp_path / "p", example=False)
    make_venv(root / ".venv", "ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a = 1")]
    nbformat.write(nb, root / "nb.ipynb")
    try:
        started = run_cli("start", "nb.ipynb", cwd=root)
        assert started.returncode == 0, started.stderr
        status = run_cli("status", cwd=root)
        assert f"environment: project .venv at {root / '.venv'}" in status.stdout, status.stdout
        added = run_cli("add", "tabulate", "--record", "--json", cwd=root, timeout=300)
        assert added.returncode == 0, added.stderr
        res = json.loads(added.stdout)
        assert [c["name"] for c in res["changed"]] == ["tabulate"]
        assert "recorded nowhere" in res["message"] and "recorded" not in res
        ran = run_cli("exec", "import tabulate, sys; print(sys.prefix)", cwd=root)
        assert ran.returncode == 0 and str(root / ".venv") in ran.stdout, ran.stdout + ran.stderr
        bad = run_cli("add", "ipykeep-no-such-package-4b1c", cwd=root, timeout=300)
        assert bad.returncode == 1
        assert "ipykeep-no-such-package-4b1c" in bad.stderr and "hint:" in bad.stderr
        # the install logs are the owner's, like the rest of .ipykeep/
        (installs,) = (root / ".ipykeep" / "kernels").glob("*/installs")
        assert stat.S_IMODE(installs.stat().st_mode) == 0o700
        logs = list(installs.iterdir())
        assert logs and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in logs), logs
    finally:
        stop_daemon(root)
