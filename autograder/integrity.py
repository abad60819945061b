"""Tamper detection: static comparison with the source, and a guard inside the kernel (filled in below)."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
from traitlets.config import Config

UNGRADABLE = ("not a valid notebook", "not a notebook of chapter")


def autograde_config() -> Config:
    return Config()


def inspect_submission(submitted: Path, source: Path) -> list[str]:
    try:
        nbformat.read(str(submitted), as_version=4)
    except Exception as error:  # nbformat raises JSON, schema and unicode errors alike
        return [f"not a valid notebook: {type(error).__name__}: {error}".splitlines()[0]]
    return []


def is_ungradable(problems: list[str]) -> bool:
    return any(p.startswith(UNGRADABLE) for p in problems)


def reset_verdict() -> None:
    pass


def verdict() -> list[str]:
    return []


def timed_out_cells(graded: Path) -> list[str]:
    if not graded.exists():
        return []
    nb = json.loads(graded.read_text())
    return [str(i) for i, cell in enumerate(nb["cells"])
            if any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", []))]
