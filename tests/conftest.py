"""Shared test helpers."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _offline_hubs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models load from installed packages only; a hub download would fail the test."""
    monkeypatch.setitem(os.environ, "HF_HUB_OFFLINE", "1")
    monkeypatch.setitem(os.environ, "TRANSFORMERS_OFFLINE", "1")
