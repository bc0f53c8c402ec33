"""Kept only for `drmas.config.load_suite` until it reads `drmas.registry.MAS` directly:
the MAS now live in drmas/mas/ and register there (this module can then be deleted)."""

from __future__ import annotations


def get_orchestra(name: str) -> type:
    from drmas.registry import MAS

    return MAS.get(name)
