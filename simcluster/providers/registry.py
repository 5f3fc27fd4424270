"""Providers by name: what `Cluster(provider=...)` accepts."""

from __future__ import annotations

from .base import Provider

PROVIDER_NAMES = ("process", "netns", "docker")


def provider_unavailable(name: str) -> str | None:
    """Why provider `name` cannot run on this machine (no Docker engine answering, no
    network namespaces), or None when it can. A ValueError for an unknown name."""
    if name == "docker":
        from .docker import client_or_reason

        client, why = client_or_reason()
        if client is not None:
            client.close()
        return why
    if name == "netns":
        from .netns import unavailable

        return unavailable()
    if name == "process":
        return None
    raise ValueError(f"provider {name!r}: expected one of {PROVIDER_NAMES}")


def make_provider(provider: str | Provider) -> Provider:
    if isinstance(provider, Provider):
        return provider
    if provider == "process":
        return Provider()
    if provider == "netns":
        from .netns import NetnsProvider

        return NetnsProvider()
    if provider == "docker":
        from .docker import DockerProvider

        return DockerProvider()
    raise ValueError(f"Cluster(provider={provider!r}): expected one of {PROVIDER_NAMES} or a "
                     "simcluster Provider instance")
