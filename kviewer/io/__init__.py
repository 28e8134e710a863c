"""Loaders: one module per format, a registry that detects formats by content (no Qt)."""

from __future__ import annotations

from kviewer.io.registry import CancelToken, LoaderSpec, detect, load, loaders

__all__ = ["CancelToken", "LoaderSpec", "detect", "load", "loaders"]
