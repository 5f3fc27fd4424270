"""Providers by name: what `Cluster(provider=...)` accepts."""

from __future__ import annotations

from .base import Provider

PROVIDER_NAMES = ("process", "netns", "docker")


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
