"""Pure units of the providers: settings, URLs, wire frames, error classification, selection."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ipykeep.api.errors import RemoteAuthError, RemoteUnreachableError, UsageError
from ipykeep.kernel.providers import LaunchSpec, make_provider
from ipykeep.kernel.providers.gateway import GatewayProvider, GatewaySettings
from ipykeep.kernel.providers.local import LocalProvider
from ipykeep.kernel.providers.ssh import SshProvider, SshTarget, classify_ssh_failure
from ipykeep.kernel.providers.wschannels import decode_frame
from ipykeep.mcp_server.catalog import BY_NAME, engine_params
from ipykeep.project.config import Config

SPEC = LaunchSpec(name="k1", python="python3", dataflow="static", cwd=Path("/tmp"))


def test_gateway_settings_follow_jupyter_servers_variables_and_hide_the_token():
    env = {
        "MY_TOKEN": "s3cret",
        "JUPYTER_GATEWAY_HEADERS": '{"X-Hub": "1"}',
        "JUPYTER_GATEWAY_VALIDATE_CERT": "false",
        "JUPYTER_GATEWAY_CA_CERTS": "/etc/ca.pem",
    }
    s = GatewaySettings.from_env(
        "https://hub.example.org/user/me/", token_env="MY_TOKEN", environ=env
    )
    assert (
        s.url == "https://hub.example.org/user/me" and s.ws_url == "wss://hub.example.org/user/me"
    )
    assert s.request_headers() == {"X-Hub": "1", "Authorization": "token s3cret"}
    assert not s.validate_cert and s.ca_certs == "/etc/ca.pem"
    assert "s3cret" not in repr(s)
    assert GatewaySettings.from_env("http://127.0.0.1:8888", environ={}).request_headers() == {}


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("ftp://host", "http"),
        ("http://host:8888/?token=abc", "credentials or a query"),
        ("https://me:pw@host", "credentials or a query"),
    ],
)
def test_bad_gateway_urls_are_refused_without_echoing_secrets(url, match):
    with pytest.raises(UsageError, match=match) as err:
        GatewaySettings.from_env(url, environ={})
    assert "abc" not in str(err.value) and "pw" not in str(err.value)


def test_bad_gateway_headers_are_a_usage_error():
    with pytest.raises(UsageError, match="JSON object"):
        GatewaySettings.from_env("http://h", environ={"JUPYTER_GATEWAY_HEADERS": "[1]"})


def test_text_and_binary_frames_decode_to_messages():
    msg = {
        "header": {"msg_id": "a", "msg_type": "stream", "date": "2026-01-01T00:00:00Z"},
        "parent_header": {},
        "content": {},
        "channel": "iopub",
    }
    text = decode_frame(json.dumps(msg))
    assert text["channel"] == "iopub" and text["header"]["date"] == "2026-01-01T00:00:00Z"
    body = json.dumps(msg).encode()
    nbufs = 2
    offsets = [4 * (nbufs + 1), 4 * (nbufs + 1) + len(body)]
    frame = struct.pack("!" + "I" * (nbufs + 1), nbufs, *offsets) + body + b"BUF"
    binary = decode_frame(frame)
    assert binary["header"]["msg_id"] == "a" and [bytes(b) for b in binary["buffers"]] == [b"BUF"]


def test_ssh_failures_are_classified():
    target = SshTarget("box", "me")
    assert isinstance(
        classify_ssh_failure("me@box: Permission denied (publickey).", target), RemoteAuthError
    )
    assert isinstance(
        classify_ssh_failure("Host key verification failed.", target), RemoteAuthError
    )
    err = classify_ssh_failure(
        "ssh: Could not resolve hostname box: Name or service not known", target
    )
    assert isinstance(err, RemoteUnreachableError) and "Could not resolve hostname" in err.message
    assert str(SshTarget.parse("ssh://me@box:2222/~/p")) == "ssh://me@box:2222/~/p"


def test_the_provider_follows_the_location_and_the_configuration():
    assert isinstance(make_provider(SPEC, Config()), LocalProvider)
    assert isinstance(make_provider(SPEC, Config(), location="ssh://box/data"), SshProvider)
    gw = make_provider(SPEC, Config(kernel_provider="gateway", gateway_url="http://127.0.0.1:1"))
    assert isinstance(gw, GatewayProvider) and gw.kernel_cwd == "/tmp"
    with pytest.raises(UsageError, match="needs gateway_url"):
        make_provider(SPEC, Config(kernel_provider="gateway"))
    with pytest.raises(UsageError, match="needs ssh_url"):
        make_provider(SPEC, Config(kernel_provider="ssh"))
    ssh = make_provider(
        SPEC,
        Config(kernel_provider="ssh", ssh_url="ssh://me@box/x", remote_python="/opt/py/bin/python"),
    )
    assert (
        isinstance(ssh, SshProvider)
        and ssh.python == "/opt/py/bin/python"
        and ssh.target.path == "/x"
    )


def test_mcp_create_kernel_passes_the_gateway_through():
    spec = BY_NAME["create_kernel"]
    args = spec.args.model_validate({"notebook": "n.ipynb", "gateway": "https://hub/user/me"})
    assert engine_params(spec, args).gateway == "https://hub/user/me"
