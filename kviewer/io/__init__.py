"""Loaders: a package per format family (torch/, ncu/, rocprof/, nsys), a registry that detects
formats by content, the trace cache (cache/) and the one decompression path (source); no Qt."""

from __future__ import annotations

from kviewer.io.registry import CancelToken, LoaderSpec, detect, load, loaders

__all__ = ["CancelToken", "LoaderSpec", "detect", "load", "loaders"]
