"""The real agent hosts under test: pinned npm packages, each host's model set-up and trust step.

A host is installed once into ``.hosts/`` at the checkout's root (ignored by git) from the npm
registry, at the pinned version. What each host is given is what a user gives it: a model to
talk to (here the stand-in, configured in the user's own files under a temporary HOME), the one
trust step the host itself demands, and nothing else — ipykeep's own configuration comes from
``ipykeep init`` alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Where the hosts are installed (``.gitignore`` lists it): kept between runs, checked by version.
INSTALL_DIR = REPO / ".hosts"


@dataclass(frozen=True)
class Host:
    """One host: its npm package, the command that runs it headless, its user-level set-up."""

    name: str
    package: str
    version: str
    binary: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    def executable(self) -> Path:
        return INSTALL_DIR / "node_modules" / ".bin" / self.binary

    def prepare(self, home: Path, project: Path, model_url: str) -> dict[str, str]:
        """Write the user's model set-up and the host's trust step; the environment to run in."""
        if self.name == "claude_code":
            # Accepting the workspace trust dialog records this in ~/.claude.json.
            state = {"projects": {str(project): {"hasTrustDialogAccepted": True}}}
            (home / ".claude.json").write_text(json.dumps(state))
            return {
                "ANTHROPIC_BASE_URL": model_url,
                "ANTHROPIC_API_KEY": "sk-ant-stand-in",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            }
        if self.name == "codex":
            # A model provider of the user's; trust comes from `codex exec --trust` (command).
            codex_home = home / ".codex"
            codex_home.mkdir()
            (codex_home / "config.toml").write_text(
                'model = "gpt-5.5"\nmodel_provider = "standin"\n\n'
                "[model_providers.standin]\n"
                'name = "Stand-in"\n'
                f'base_url = "{model_url}/v1"\n'
                'env_key = "STANDIN_API_KEY"\n'
                'wire_api = "responses"\n'
            )
            return {"CODEX_HOME": str(codex_home), "STANDIN_API_KEY": "stand-in"}
        if self.name == "gemini":
            gemini_home = home / ".gemini"
            gemini_home.mkdir()
            auth = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
            (gemini_home / "settings.json").write_text(json.dumps(auth))
            # Trusting the folder (the dialog's choice) records it here.
            trusted = {str(project): "TRUST_FOLDER"}
            (gemini_home / "trustedFolders.json").write_text(json.dumps(trusted))
            return {"GEMINI_API_KEY": "stand-in", "GOOGLE_GEMINI_BASE_URL": model_url}
        # opencode: the user's provider in the user config; the project needs nothing more.
        config_dir = home / ".config" / "opencode"
        config_dir.mkdir(parents=True)
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Stand-in",
            "options": {"baseURL": f"{model_url}/v1", "apiKey": "stand-in"},
            "models": {
                "stand-in": {
                    "name": "Stand-in",
                    "tool_call": True,
                    "attachment": True,
                    "modalities": {"input": ["text", "image"], "output": ["text"]},
                }
            },
        }
        config = {"model": "standin/stand-in", "provider": {"standin": provider}}
        (config_dir / "opencode.json").write_text(json.dumps(config))
        return {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}

    def command(self, prompt: str) -> list[str]:
        exe = str(self.executable())
        if self.name == "claude_code":
            return [exe, "-p", prompt, "--output-format", "json"]
        if self.name == "codex":
            return [exe, "exec", "--trust", "--json", prompt]
        if self.name == "gemini":
            return [exe, "-p", prompt, "--output-format", "json"]
        return [exe, "run", prompt]


HOSTS = (
    Host("claude_code", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    Host("codex", "@openai/codex", "0.171.0", "codex"),
    Host("gemini", "@google/gemini-cli", "0.61.0", "gemini"),
    Host("opencode", "opencode-ai", "1.18.33", "opencode"),
)


def install_hosts() -> str | None:
    """Install the pinned hosts into INSTALL_DIR once; the reason they cannot be, or None."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node and npm are not installed"
    stamp = INSTALL_DIR / "installed.json"
    wanted = sorted(host.spec for host in HOSTS)
    if stamp.exists() and json.loads(stamp.read_text()) == wanted:
        if all(host.executable().exists() for host in HOSTS):
            return None
    ping = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=120)
    if ping.returncode != 0:
        return f"the npm registry is unreachable: {(ping.stderr or ping.stdout).strip()[-300:]}"
    INSTALL_DIR.mkdir(exist_ok=True)
    (INSTALL_DIR / "package.json").write_text('{"private": true}\n')
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(INSTALL_DIR), *wanted],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, npm_config_update_notifier="false"),
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm install of the hosts failed:\n{done.stderr[-2000:]}")
    stamp.write_text(json.dumps(wanted))
    return None
