"""Module names of earlier versions, translated where something written by one is read.

Before the package was arranged by role its modules lay flat in ``segnet/``: run folders'
recorded configs (and the settings stored in their checkpoints) name classes by those
modules (``segnet.module.SegmentationModule`` as a ``_target_``). A resume compares them
with today's names through :func:`current_name`; nothing is installed into Python's
import system for them."""

from __future__ import annotations

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


def current_name(name: str) -> str:
    """The module (or dotted object path, as a ``_target_``) ``name`` is called now."""
    for old, new in RENAMED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name
