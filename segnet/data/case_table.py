"""The one reader of case lists (``data.csv=``) for every format: a header row naming the
columns (``image``, ``label``, and where a format reads them ``roi`` and ``split``), a row
per case, paths relative to the CSV's own folder. What spreadsheets write is read as meant:
a byte-order mark is not part of the first column's name, and spaces around names and
cells are not part of them; blank lines are skipped. Columns named in other words
(``image_path``, ``mask``, ``mask_path``, ``subset``) and splits named in other words
(``training``, ``validation``) are read as the ones they mean, and a path written on
Windows (``images\\0001.png``) as the path it names."""

from __future__ import annotations

import csv
import logging
from collections.abc import Sequence
from pathlib import Path

from segnet.data.errors import DataError
from segnet.data.folder_roles import role_of, split_of
from segnet.data.splits import SPLITS

# a split column's other names
SPLIT_COLUMNS = ("split", "subset", "set")
# image_<channel> columns are channels and label_<class> columns masks per class, but for
# these endings: the column's own name (image_path, label_file)
PATH_WORDS = ("path", "paths", "file", "files", "filename", "name")
log = logging.getLogger(__name__)


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
    named = {**column_names(columns), **split_column(columns, rows)}
    if named:
        log.info("data.csv=%s: %s", path, ", ".join(f"column {c!r} read as {n!r}"
                                                    for c, n in named.items()))  # fmt: skip
        rows = [{named.get(k, k): v for k, v in row.items()} for row in rows]
        columns = [named.get(c, c) for c in columns]
    for row in rows:  # a split named in other words (training, validation)
        if row.get("split") and row["split"] not in SPLITS:
            row["split"] = split_of(row["split"]) or row["split"]
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


def column_names(columns: Sequence[str]) -> dict[str, str]:
    """The columns named in other words, each with the name it is read as: the one column
    whose words say images (``image_path``, ``img``, ``input``) as ``image``, the one whose
    words say masks (``mask``, ``mask_path``, ``segmentation``, ``gt``) as ``label``;
    each only where no column has that name. A ``label_<class>`` column is a mask per
    class, and stays."""
    said = {"images": "image", "labels": "label"}
    named = {}
    for role, name in said.items():
        if name in columns:
            continue
        found = [c for c in columns if role_of(c) == role and not _of_a_part(c, name)]
        per_class = [c for c in columns if _of_a_part(c, "label")]
        if len(found) == 1 and not (role == "labels" and per_class):
            named[found[0]] = name
    return named


def split_column(columns: Sequence[str], rows: list[dict]) -> dict[str, str]:
    """``subset`` or ``set`` as ``split``, where no column has that name and every cell of
    it names a split (``val``, ``validation``) or none: a column of sites or cohorts stays."""
    found = [c for c in columns if c.lower() in SPLIT_COLUMNS] if "split" not in columns else []
    if len(found) != 1:
        return {}
    cells = {row.get(found[0]) for row in rows} - {"", None}
    if all(c in SPLITS or split_of(c) for c in cells):
        return {found[0]: "split"}
    other = sorted(c for c in cells if not (c in SPLITS or split_of(c)))
    log.info("column %r is not read as the split: it holds %s, which name no split (train, "
             "val, test)", found[0], ", ".join(map(repr, other[:3])))  # fmt: skip
    return {}


def _of_a_part(column: str, name: str) -> bool:
    """Whether ``column`` is ``<name>_<part>``: a channel (image_t1) or a class's mask
    (label_vessel), not the column itself (image_path, label_file)."""
    lower = column.lower()
    return lower.startswith(f"{name}_") and lower.removeprefix(f"{name}_") not in PATH_WORDS


def resolve(csv_path: Path, value: str) -> Path:
    """A path cell: absolute as given, else relative to the CSV's folder; one written on
    Windows (``images\\0001.png``) with its separators as the path it names here."""
    text = value.strip()

    def at(cell: str) -> Path:
        p = Path(cell).expanduser()
        return p if p.is_absolute() else Path(csv_path).parent / p

    if "\\" in text and "/" not in text and not at(text).exists():
        return at(text.replace("\\", "/"))
    return at(text)
