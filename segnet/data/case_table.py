"""The one reader of case lists (``data.csv=``) for every format: a header row naming the
columns (``image``, ``label``, and where a format reads them ``roi`` and ``split``), a row
per case, paths relative to the CSV's own folder. What spreadsheets write is read as meant:
a byte-order mark is not part of the first column's name, and spaces around names and
cells are not part of them; blank lines are skipped."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from segnet.data.errors import DataError
from segnet.data.splits import SPLITS


def read_case_table(
    path: Path, required: Sequence[str] = ("image", "label"), error: type = DataError
) -> list[dict]:
    """The rows of ``path`` as dicts of stripped cells, each with its line number under
    ``"line"``; refused with ``error`` (the format's own), naming the file, without a
    header holding ``required`` or with a ``split`` cell that names no split (an empty
    one is drawn by fraction and seed)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data.csv={str(path)!r}: no such file.")
    # utf-8-sig: a spreadsheet's byte-order mark is not part of the first column's name
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        rows = []
        for row in reader:
            # cells past the header's columns, which the reader lists under None, are left out
            cells = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
            rows.append({**cells, "line": reader.line_num})
    columns = [c for c in (rows[0] if rows else {}) if c != "line"]
    if not set(required) <= set(columns):
        found = ", ".join(repr(c) for c in columns) if rows else "no rows"
        raise error(
            f"data.csv={path} needs a header with {' and '.join(map(repr, required))} "
            f"columns (it has {found})."
        )
    for row in rows:
        if row.get("split") and row["split"] not in SPLITS:
            raise error(
                f"data.csv={path}, line {row['line']}: split {row['split']!r}; use "
                f"{', '.join(SPLITS)} or leave it empty (drawn by data.val_fraction and "
                "data.test_fraction)."
            )
    return rows


def resolve(csv_path: Path, value: str) -> Path:
    """A path cell: absolute as given, else relative to the CSV's folder."""
    p = Path(value.strip()).expanduser()
    return p if p.is_absolute() else Path(csv_path).parent / p
