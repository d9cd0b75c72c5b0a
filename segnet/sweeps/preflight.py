"""Before a training multirun starts its first job: every job's config composed and
checked as ``train.py`` checks its own before reading data, so that a value only a later
job has stops the sweep before any job trains (a Hydra callback, ``configs/hydra``)."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


def job_override_lists(config: DictConfig) -> list[list[str]]:
    """Each job's overrides, as the basic sweeper expands them: the command line's and
    ``hydra.sweeper.params``' lists crossed. A sweeper plugin's continuous ranges
    (``interval``) are left at the configured value: each choice of the discrete ones is
    checked once."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = config.hydra.get("sweeper", {}).get("params") or {}
    lines = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    choices: dict[str, list[str]] = {}
    for o in OverridesParser.create().parse_overrides(lines):
        key = o.get_key_element()
        if not o.is_sweep_override():
            choices[key] = [o.input_line]
        elif o.is_discrete_sweep():
            choices[key] = [f"{key}={value}" for value in o.sweep_string_iterator()]
    return [list(job) for job in itertools.product(*choices.values())]


class SweepPreflight(Callback):
    """Hydra callback: before a training multirun starts its first job, every job's config
    is composed and checked as ``train.py`` checks it before reading data
    (:func:`segnet.commands.train.check_job_config`), so that a value only the fifth job has
    stops the sweep before the first four train, naming the job and the value."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("task_name") != "train":
            return
        from hydra.core.global_hydra import GlobalHydra

        from segnet.runs.checks import check_job_config
        from segnet.runs.console import is_refusal

        jobs = job_override_lists(config)
        loader = GlobalHydra.instance().config_loader()
        common = set.intersection(*map(set, jobs)) if jobs else set()
        quiet = logging.getLogger("segnet")
        level = quiet.level
        quiet.setLevel(logging.WARNING)  # one check per job: no per-job chatter
        try:
            for n, overrides in enumerate(jobs):
                varying = " ".join(o for o in overrides if o not in common) or "its overrides"
                try:
                    check_job_config(loader.load_sweep_config(config, overrides))
                except Exception as err:  # noqa: BLE001 - the job itself will say
                    if not is_refusal(err):  # not a setting refused: left to the job
                        log.warning("could not check sweep job %d (%s): %s", n, varying, err)
                        continue
                    raise SystemExit(
                        f"sweep job {n} ({varying}): {err}\nNo job was started: fix the "
                        "value and run the sweep again."
                    ) from None
        finally:
            quiet.setLevel(level)
        log.info("checked the configs of the %d jobs of this sweep", len(jobs))
