"""Loaded by Inspect through the ``inspect_ai`` entry point: registers the ``cairn`` sandbox type."""

from .inspect_sandbox import CairnSandboxEnvironment, CairnSandboxConfig  # noqa: F401
