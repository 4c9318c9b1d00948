"""The CI workflow is valid, covers every platform and Python, and its test selections are real."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
PYPROJECT = ROOT / "pyproject.toml"

#: A test file that needs one of these carries the marker, so a platform's selection skips it.
NEEDS = {
    "browser": re.compile(r"\bplaywright\b"),
    "ssh": re.compile(r"from tests\.kernel\.providers\.sshd import"),
}


def workflow() -> dict[str, object]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def test_the_workflow_matches_the_github_actions_schema() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            str(WORKFLOW),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_matrix_covers_three_platforms_and_python_3_10_to_3_13() -> None:
    matrix = workflow()["jobs"]["test"]["strategy"]["matrix"]  # type: ignore[index]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest", "windows-latest"}
    assert matrix["python"] == ["3.10", "3.11", "3.12", "3.13"]
    selects = {entry["os"]: entry["select"] for entry in matrix["include"]}
    assert selects["ubuntu-latest"] == "", "Linux runs the whole suite"
    assert "browser" in selects["macos-latest"] and "ssh" in selects["macos-latest"]
    assert "posix" in selects["windows-latest"]


def test_every_marker_a_selection_names_is_declared() -> None:
    declared = set(re.findall(r'^\s+"(\w+):', PYPROJECT.read_text(), flags=re.M))
    matrix = workflow()["jobs"]["test"]["strategy"]["matrix"]  # type: ignore[index]
    for entry in matrix["include"]:
        named = set(re.findall(r"\b(\w+)\b", entry["select"])) - {"not", "and", "or"}
        assert named <= declared, f"{entry['os']} selects undeclared markers {named - declared}"


def test_the_workflow_installs_and_tests_as_the_readme_says() -> None:
    steps = workflow()["jobs"]["test"]["steps"]  # type: ignore[index]
    runs = " ; ".join(str(step.get("run", "")) for step in steps)
    assert 'pip install -e ".[dev]"' in runs and "python -m pytest" in runs


@pytest.mark.parametrize("marker", sorted(NEEDS))
def test_test_files_that_need_a_platform_part_carry_its_marker(marker: str) -> None:
    unmarked = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if NEEDS[marker].search(path.read_text())
        and f"pytest.mark.{marker}" not in path.read_text()
    ]
    assert not unmarked, f"these need `pytest.mark.{marker}` in their pytestmark: {unmarked}"
