"""The index file of the Medical Segmentation Decathlon and nnU-Net (``dataset.json``) and
what it says of the classes, read alike for volumes and 2D images:

* the Decathlon's ``"labels": {"0": "background", "1": "Anterior"}`` and nnU-Net v2's
  ``"labels": {"background": 0, "Anterior": 1}``: the class names, by label value;
* nnU-Net v2's regions, a name mapping to a list of values
  (``"whole": [1, 2]``), with ``regions_class_order``;
* nnU-Net v2's ignore label (``"ignore": 3``, the highest value): pixels or voxels that are
  neither trained nor scored;
* ``file_ending`` (``.png`` for 2D images, ``.nii.gz`` for volumes), which tells the two apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from segnet.data.errors import DataError

INDEX = "dataset.json"
IGNORE = "ignore"  # nnU-Net v2's name for the label value that is not a class


@dataclass(frozen=True)
class IndexedClasses:
    """The classes a dataset.json names: ``class_names[v]`` is label value ``v``'s;
    ``ignore_value``, where given, is left out of training and scores."""

    class_names: list[str]
    ignore_value: int | None = None
    regions: dict[str, list[int]] | None = None
    regions_class_order: list[int] | None = None


def index_folder(root: str | Path | None, csv: str | Path | None = None) -> Path | None:
    """Where the dataset.json of some cases lies: a CSV's own folder (it may list cases
    from anywhere), else ``root``."""
    if csv:
        return Path(csv).expanduser().parent
    return Path(root).expanduser() if root else None


def read_index(folder: Path | None, error: type[DataError] = DataError) -> dict | None:
    """``folder``'s dataset.json, parsed; None where it has none."""
    if folder is None or not (folder / INDEX).is_file():
        return None
    path = folder / INDEX
    try:
        index = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise error(f"{path} is not valid JSON: {err}") from err
    if not isinstance(index, dict):
        raise error(f"{path} holds {type(index).__name__}, not an object with 'labels'.")
    return index


def indexed_classes(
    folder: Path | None, error: type[DataError] = DataError
) -> IndexedClasses | None:
    """The classes ``folder``'s dataset.json names; None where it has none, or no
    ``labels``."""
    index = read_index(folder, error)
    labels = (index or {}).get("labels") or {}
    if not labels:
        return None
    path = folder / INDEX
    if not isinstance(labels, dict):
        raise error(f"{path}: 'labels' is a {type(labels).__name__}, not an object.")
    # a list of one value is that value (nnU-Net's reading): regions take two or more
    labels = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in labels.items()}
    ignore = labels.pop(IGNORE, None)
    if is_region_labels(labels):
        names = region_label_names(labels)
        regions = {str(k): (v if isinstance(v, list) else [v]) for k, v in labels.items()
                   if (v if isinstance(v, list) else [v]) != [0]}  # fmt: skip
        order = index.get("regions_class_order")
        found = IndexedClasses(names, None, regions, list(order) if order is not None else None)
    else:
        found = IndexedClasses(class_names_from(labels, path, error))
    if ignore is None:
        return found
    if isinstance(ignore, bool) or not isinstance(ignore, int) or ignore < len(found.class_names):
        raise error(
            f"{path}: its ignore label {ignore!r} is not an integer above every class's "
            f"value (0..{len(found.class_names) - 1}); nnU-Net gives it the highest value. "
            "Relabel the masks so that it is, or set the classes by hand (data.class_names)."
        )
    return IndexedClasses(found.class_names, ignore, found.regions, found.regions_class_order)


def is_region_labels(labels: dict) -> bool:
    """nnU-Net v2's region form: some label names map to a list of two or more values (a
    list of one is that value, as nnU-Net reads it)."""
    return any(isinstance(v, list) and len(v) > 1 for v in labels.values())


def region_label_names(labels: dict) -> list[str]:
    """The label values' names in a dataset.json of regions: the name of a region of one
    value, else ``label_<value>`` (the files hold values 0 to the largest any region has)."""
    single = {v[0] if isinstance(v, list) else v: k for k, v in labels.items()
              if not isinstance(v, list) or len(v) == 1}  # fmt: skip
    top = max(max(v) if isinstance(v, list) else v for v in labels.values())
    return [str(single.get(v, "background" if v == 0 else f"label_{v}")) for v in range(top + 1)]


def class_names_from(labels: dict, path: Path, error: type[DataError] = DataError) -> list[str]:
    """The class names of a dataset.json's ``labels``, in label-value order: the Decathlon's
    ``{"0": "background", ...}`` or nnU-Net v2's ``{"background": 0, ...}``.

    Example:
        >>> class_names_from({"1": "Anterior", "0": "background"}, Path("dataset.json"))
        ['background', 'Anterior']
        >>> class_names_from({"background": 0, "Anterior": 1}, Path("dataset.json"))
        ['background', 'Anterior']
    """
    if all(str(k).isdigit() for k in labels):
        by_value = {int(k): str(v) for k, v in labels.items()}
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in labels.values()):
        by_value = {v: str(k) for k, v in labels.items()}
    else:
        raise error(
            f'{path}: \'labels\' maps neither label values to names ({{"0": "background"}}) '
            'nor names to values ({"background": 0}, or a list of values for a region); '
            "set data.class_names=[background,...] instead."
        )
    if sorted(by_value) != list(range(len(by_value))):
        raise error(
            f"{path}: its label values {sorted(by_value)} are not 0, 1, 2, ...; set "
            "data.class_names=[...] with one name per value from 0 to the largest."
        )
    return [by_value[v] for v in range(len(by_value))]


def file_ending(folder: Path | None, error: type[DataError] = DataError) -> str | None:
    """nnU-Net v2's ``file_ending`` (``.png``, ``.nii.gz``) in ``folder``'s dataset.json;
    None where it names none."""
    ending = (read_index(folder, error) or {}).get("file_ending")
    return str(ending).lower() if ending else None
