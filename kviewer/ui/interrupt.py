"""Ctrl+C while Qt draws: the one deferral is :func:`kviewer.tempdir.deferred_interrupt` (no Qt);
this name stays for :mod:`kviewer.ui.headless` until it imports that directly."""

from __future__ import annotations

from kviewer.tempdir import deferred_interrupt as DeferredInterrupt

__all__ = ["DeferredInterrupt"]
