"""A hint for a mistyped setting: Hydra refuses ``trainer.max_epoch=1`` and advises
``+trainer.max_epoch=1``, which would add a setting nothing reads; this names the setting
that was most likely meant instead."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from segnet.runs.config_files import CONFIGS

# Settings a command does not take, which users reach for: why, in place of Hydra's advice
# to add them with +
NOT_TAKEN = {
    "evaluate": {
        "data.patch_size": "an evaluation applies a volume model with the window it was "
        "validated with (data.sw_roi_size sets another) and an image model to whole images",
        "data.spacing": "a network is applied at the voxel spacing it was trained at, which "
        "the checkpoint keeps; scores are taken on each case's own grid",
    },
}


def setting_hints(config_name: str, argv: Sequence[str]) -> list[str]:
    """For each ``a.b.c=value`` in ``argv`` that the config (composed with the other
    overrides) does not have, a line naming the closest existing setting, if any."""
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig, OmegaConf

    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    plain = [a for a in overrides if not a.startswith(("+", "~", "hydra."))]
    asked = [a.split("=", 1)[0] for a in plain if "." in a.split("=", 1)[0]]
    choices = option_hints(plain)
    if not asked:
        return choices
    # the groups and added settings shape the config the dotted settings are looked up in
    others = [a for a in overrides if a.split("=", 1)[0] not in asked]
    try:
        with initialize_config_dir(str(CONFIGS), version_base="1.3"):
            cfg = compose(config_name, overrides=others)
    except Exception:  # noqa: BLE001 - one of those is wrong too: Hydra's message says which
        return choices
    hints = choices
    for key in asked:
        why = NOT_TAKEN.get(config_name, {}).get(key)
        if why:
            hints.append(f"{key} is not a setting of {config_name}: {why}.")
            continue
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent)
        if not isinstance(node, DictConfig) or leaf in node:
            continue
        close = difflib.get_close_matches(leaf, [str(k) for k in node], n=1)
        if close:
            hints.append(f"{key} is not a setting; did you mean {parent}.{close[0]}?")
    return hints


def option_hints(overrides: Sequence[str]) -> list[str]:
    """For each ``group=choice`` (``experiment=imagse_quick``, ``logger=[tensorboard,mlfow]``)
    whose choice the group's folder of configs lacks, a line naming the closest it has."""
    hints = []
    for arg in overrides:
        group, _, value = arg.partition("=")
        folder = CONFIGS / group
        try:
            if "." in group or "(" in value or not folder.is_dir():
                continue  # a setting, or a sweep function (choice(...)): not a choice
        except OSError:  # a name longer than the system takes
            continue
        options = sorted(p.stem for p in folder.glob("*.yaml"))
        for choice in (v.strip().strip("'\"") for v in value.strip("[]").split(",") if v.strip()):
            close = difflib.get_close_matches(choice, options, n=1)
            if choice not in options and choice != "null" and close:
                hints.append(f"{group}={choice}: no such choice; did you mean {group}={close[0]}?")
    return hints


@contextmanager
def hint_on_failure(config_name: str, argv: Sequence[str]) -> Iterator[None]:
    """Around a Hydra app: when Hydra itself stops it (exit status 1, as it does for a
    setting it does not know), print the hints after its message."""
    import sys

    from hydra.errors import ConfigCompositionException

    def hint() -> None:
        for line in setting_hints(config_name, argv):
            print(f"hint: {line}", file=sys.stderr)

    try:
        yield
    except SystemExit as stop:
        if stop.code == 1:
            hint()
        raise
    except ConfigCompositionException:
        # under a tracer (a debugger, coverage.py) Hydra raises its error instead of
        # printing it and exiting 1: the hints come all the same
        hint()
        raise
