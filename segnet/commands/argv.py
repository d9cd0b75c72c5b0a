"""Each command's own reading of its command line, before Hydra parses it: the part of
the command that every entry point (``python train.py``, ``segnet-train``, a test)
goes through. Light to import: ``--help`` answers before torch is loaded."""

from __future__ import annotations

from collections.abc import Sequence

from segnet.runs.folders import output_dir_as_run_dir, refuse_existing_run_dir
from segnet.runs.resume import resume_into_its_run


def train_argv(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=`` as Hydra's run folder; a resume (``ckpt_path=``) into its run,
    with the run's overrides; any other new run's folder checked to hold no run."""
    return resume_into_its_run(output_dir_as_run_dir(argv))


def evaluate_argv(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=`` as Hydra's run folder, which must hold no earlier run's
    outputs (checked before Hydra writes its config there)."""
    argv = output_dir_as_run_dir(argv)
    refuse_existing_run_dir(argv)
    return argv


export_argv = evaluate_argv
