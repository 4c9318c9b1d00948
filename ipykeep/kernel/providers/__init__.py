"""Where kernels run: local processes, Jupyter gateways, SSH hosts (see ``base.py``).

``make_provider`` picks one from the configuration and the kernel's location; providers are
imported lazily so a local kernel never pays for the websocket or SSH code.
"""

from __future__ import annotations

from typing import Any

from ipykeep.kernel.providers.base import KernelChannels, KernelProvider, LaunchSpec, ProviderKind

__all__ = [
    "KernelChannels",
    "KernelProvider",
    "LaunchSpec",
    "ProviderKind",
    "local_provider",
    "make_provider",
    "is_remote_location",
]


def local_provider(spec: LaunchSpec) -> KernelProvider:
    from ipykeep.kernel.providers.local import LocalProvider

    return LocalProvider(spec)


def is_remote_location(location: str | None) -> bool:
    """True for an ``ssh://`` working directory (the only remote form a ``cwd`` may take)."""
    return bool(location) and str(location).startswith("ssh://")


def make_provider(spec: LaunchSpec, config: Any, *, location: str | None = None) -> KernelProvider:
    """The provider for one kernel.

    ``location`` is the ``cwd`` as the caller gave it: an ``ssh://user@host/path`` URL selects
    the SSH provider whatever the configuration says. Otherwise ``config.kernel_provider``
    decides ("local", "gateway" with ``gateway_url``, or "ssh" with ``ssh_url``).
    """
    from ipykeep.api.errors import UsageError

    kind = "ssh" if is_remote_location(location) else config.kernel_provider
    if kind == "local":
        return local_provider(spec)
    if kind == "gateway":
        from ipykeep.kernel.providers.gateway import GatewayProvider, GatewaySettings

        if not config.gateway_url:
            raise UsageError(
                'kernel_provider = "gateway" needs gateway_url',
                hint="set gateway_url in ipykeep.toml, or pass --gateway URL "
                "(MCP: create_kernel gateway=URL)",
            )
        settings = GatewaySettings.from_env(
            config.gateway_url,
            token_env=config.gateway_token_env,
            kernel_name=config.gateway_kernel_name,
        )
        return GatewayProvider(
            spec,
            settings,
            kernel_cwd=config.kernel_cwd or str(spec.cwd),
            reconnect_for=config.remote_reconnect_s,
        )
    if kind == "ssh":
        from ipykeep.kernel.providers.ssh import SshProvider, SshTarget

        url = location if is_remote_location(location) else config.ssh_url
        if not url:
            raise UsageError(
                'kernel_provider = "ssh" needs ssh_url',
                hint='set ssh_url = "ssh://user@host/path" in ipykeep.toml, or pass cwd="ssh://user@host/path"',
            )
        return SshProvider(
            spec,
            SshTarget.parse(url),
            python=config.remote_python,
            ssh_config=config.ssh_config,
            orphan_timeout=config.ssh_orphan_timeout_s,
            reconnect_for=config.remote_reconnect_s,
        )
    raise UsageError(f"unknown kernel_provider {kind!r}", hint="use 'local', 'gateway' or 'ssh'")
