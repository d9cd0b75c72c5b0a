"""Short and earlier module names. Before the package was arranged by role its modules
lay flat in ``segnet/``: run folders' recorded configs name classes by those names
(``segnet.module.SegmentationModule`` as a ``_target_``), and users' scripts import them
(``from segnet.predict import Predictor``). Each such name is the current module itself,
not a copy, so a class is the same class under either name.

The commands keep their short forms: ``python -m segnet.export``, ``segnet.predict`` and
``segnet.bench`` run ``segnet.commands.export``, ``.predict`` and ``.bench``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

# old name -> new name; a package's submodules follow it (segnet.callbacks.ema)
RENAMED = {
    "segnet.callbacks": "segnet.training.callbacks",
    "segnet.module": "segnet.training.module",
    "segnet.losses": "segnet.training.losses",
    "segnet.metrics": "segnet.training.metrics",
    "segnet.checkpoint_io": "segnet.training.checkpoint_io",
    "segnet.checkpoints": "segnet.serving.checkpoints",
    "segnet.inference": "segnet.serving.inference",
    "segnet.model_card": "segnet.serving.model_card",
    "segnet.loading": "segnet.serving.loading",
    "segnet.ensemble": "segnet.serving.ensemble",
    "segnet.export": "segnet.serving.export",
    "segnet.predict": "segnet.serving.predict",
    "segnet.outputs": "segnet.runs.folders",
    "segnet.resume": "segnet.runs.resume",
    "segnet.console": "segnet.runs.console",
    "segnet.typos": "segnet.runs.typos",
    "segnet.evaluation": "segnet.commands.evaluate",
    "segnet.bench": "segnet.commands.bench",
    "segnet.sweep": "segnet.sweeps.summary",
    "segnet.tune": "segnet.sweeps.study",
    "segnet.preflight": "segnet.sweeps.preflight",
}


# what ``python -m <name>`` runs, where it differs from what ``import <name>`` gives
RUN_AS = {
    "segnet.export": "segnet.commands.export",
    "segnet.predict": "segnet.commands.predict",
    "segnet.bench": "segnet.commands.bench",
}


def current_name(name: str) -> str:
    """The module (or dotted object path, as a ``_target_``) ``name`` is called now."""
    for old, new in RENAMED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


class _Alias(importlib.abc.Loader):
    def __init__(self, name: str, target: str) -> None:
        self.name, self.target = name, target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Already executed under its current name."""

    def get_code(self, fullname: str):  # ``python -m <name>``: the command's module
        command = RUN_AS.get(self.name, self.target)
        spec = importlib.util.find_spec(command)
        return spec.loader.get_code(command)

    def is_package(self, fullname: str) -> bool:
        spec = importlib.util.find_spec(self.target)
        return spec.submodule_search_locations is not None


class _OldNames(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("segnet."):
            return None
        new = current_name(fullname)
        if new == fullname:
            return None
        real = importlib.util.find_spec(new)
        if real is None:
            return None
        spec = importlib.util.spec_from_loader(
            fullname, _Alias(fullname, new), is_package=real.submodule_search_locations is not None
        )
        if real.submodule_search_locations is not None:
            spec.submodule_search_locations = list(real.submodule_search_locations)
        spec.origin = importlib.util.find_spec(RUN_AS.get(fullname, new)).origin
        return spec


def install() -> None:
    if not any(isinstance(f, _OldNames) for f in sys.meta_path):
        # first: the path finder would otherwise find an old package's submodules
        # (segnet.callbacks.ema) under their old name as second copies
        sys.meta_path.insert(0, _OldNames())
