"""How a format treats each of its settings (``data.<name>``): the kind of value it
takes, whether a resume may set it differently from its run, whether it only shapes
training (an evaluation refuses it) or is part of the model (nobody changes it after
training). Each DataModule class lists a row for every setting it takes
(:attr:`~segnet.data.base.SegmentationDataModule.settings`); the table of settings
(``segnet.runs.settings``) asks the format a run names for them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    # "switch": true/false (null where allowed); "count": a whole number >= minimum;
    # "fraction": a count or a fraction >= 0; "number": a number >= minimum (> where
    # above); "any": checked where it is used
    kind: str = "any"
    minimum: float | None = None
    above: bool = False
    resume: bool = False  # a resume may set it differently from the run it continues
    training_only: bool = False  # shapes training alone: an evaluation refuses it
    part_of_model: bool = False  # the network's input normalisation: never changed


ANY = Setting()  # what is read, and how: kept as the run had it
RESUMABLE = Setting(resume=True)  # where the data is and how fast it is read
SWITCH = Setting("switch")
TRAINING = Setting(training_only=True)  # augmentation, patch sampling, the loss's weights
TRAINING_SWITCH = Setting("switch", training_only=True)
MODEL = Setting(part_of_model=True)  # the network's input as it was trained

# where the data is and how fast it is read may change on a resume; what is read may not
WHERE_AND_HOW_FAST = {
    "root": RESUMABLE,
    "csv": RESUMABLE,
    "num_workers": RESUMABLE,
    "pin_memory": Setting("switch", resume=True),
    "eval_batch_size": RESUMABLE,
    "split": RESUMABLE,
    "batch_size": ANY,
}
# cases split by fraction and seed, or into folds
DRAWN_SPLITS = {
    **{k: ANY for k in ("val_fraction", "test_fraction", "fold", "num_folds", "seed")},
    "groups": ANY,  # true, false or a name pattern: checked by segnet.data.splits
}
# whole-input evaluation in windows: evaluate.py may set another
SLIDING_WINDOW = {"sw_roi_size": ANY, "sw_overlap": ANY, "sw_mode": ANY, "sw_batch_size": RESUMABLE}
CLASS_WEIGHTS = {"class_weights": TRAINING, "class_weights_power": TRAINING}
# Data settings added after runs were recorded whose default is not what those runs did:
# the value a run that does not record one had (drawn splits kept no group whole; images
# at native size), which a resume and an evaluation of it take
AS_BEFORE_THEY_EXISTED = {"groups": False, "downscale": 1}


def keys_with(rows: dict[str, Setting], flag: str) -> tuple[str, ...]:
    """The settings of ``rows`` whose row has ``flag`` set (``training_only``, ...)."""
    return tuple(key for key, row in rows.items() if getattr(row, flag))
