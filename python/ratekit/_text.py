"""Arguments that are either a file path or the file's text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

PathOrText = Union[str, "os.PathLike[str]"]


def read_text(value: PathOrText, what: str) -> tuple[str, str]:
    """Returns (text, name): ``value`` is a path to a TOML file, or TOML text itself (a string with
    a newline or an ``=``). ``name`` labels error messages as the CLI does."""
    if isinstance(value, os.PathLike) or ("\n" not in value and "=" not in value):
        path = Path(value)
        if not path.is_file():
            raise FileNotFoundError(f"{what}: no such file {path}")
        return path.read_text(), str(path)
    return value, f"<{what}>"
