"""A Hydra launcher that runs a multirun's jobs as separate processes on this machine,
``n_jobs`` at a time (``hydra/launcher=parallel``; configs/hydra/launcher/parallel.yaml).

Why: small networks leave most of a GPU idle. On one H100, two ``hippocampus_gpu`` folds
side by side were done in 345 s, where one alone takes 276 s (README "On one GPU"); Hydra's
basic launcher runs jobs one after the other. Each job is the same script run again with
its overrides and its own run folder (``<sweep dir>/<subdir>``), so it is exactly the run
``python train.py <overrides>`` would be: its own process, CUDA context and data workers.

Kept free of torch and of segnet's imports: Hydra imports every plugin on every start-up.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

# what the job writes to its terminal (progress bars, warnings), kept in its run folder
CONSOLE_LOG = "console.log"


class ParallelLauncher(Launcher):
    def __init__(self, n_jobs: int = 2, gpus: Sequence[int] | None = None) -> None:
        if not isinstance(n_jobs, int) or n_jobs < 1:
            raise ValueError(f"hydra.launcher.n_jobs={n_jobs!r}: use a whole number >= 1.")
        self.n_jobs = n_jobs
        # jobs take these GPUs in turn (CUDA_VISIBLE_DEVICES); None: every job sees them all
        self.gpus = None if gpus is None else [int(g) for g in gpus]
        if self.gpus == []:
            raise ValueError("hydra.launcher.gpus=[]: list GPU indices, or null for all.")
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config, self.hydra_context = config, hydra_context

    def job_config(self, overrides: Sequence[str], num: int) -> DictConfig:
        """The job's full config as Hydra's basic launcher builds it (the sweep's resolved
        timestamp included), for its run folder and its record."""
        assert self.config is not None and self.hydra_context is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = num
        return cfg

    def command(self, overrides: Sequence[str], run_dir: Path) -> list[str]:
        """The script this sweep runs, again, for one job: its overrides and run folder,
        and the config name and folder the sweep was started with."""
        assert self.config is not None
        hydra_cfg = self.config.hydra
        args = [sys.executable, sys.argv[0], f"--config-name={hydra_cfg.job.config_name}"]
        args += [
            f"--config-dir={source.path}"
            for source in hydra_cfg.runtime.config_sources
            if source.provider == "command-line"
        ]
        return [*args, *overrides, f"hydra.run.dir={run_dir}"]

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        assert self.config is not None
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info("Launching %d jobs, %d at a time", len(job_overrides), self.n_jobs)
        pending = list(enumerate(job_overrides, start=initial_job_idx))
        running: dict[int, Running] = {}
        returns: dict[int, JobReturn] = {}
        try:
            while pending or running:
                while pending and len(running) < self.n_jobs:
                    num, overrides = pending.pop(0)
                    gpu = self.free_gpu([job.gpu for job in running.values()])
                    running[num], returns[num] = self.start(num, overrides, gpu)
                time.sleep(0.2)
                for num, job in list(running.items()):
                    if job.proc.poll() is None:
                        continue
                    job.console.close()
                    del running[num]
                    finish(returns[num], job.proc.returncode, time.monotonic() - job.started)
        except KeyboardInterrupt:
            # Ctrl+C reached every job too (one process group): each saves its last.ckpt
            # and stops; wait for them rather than leave them writing
            log.warning("Ctrl+C: waiting for %d running job(s) to save and stop", len(running))
            for job in running.values():
                job.proc.wait()
                job.console.close()
            folders = ", ".join(str(returns[num].working_dir) for num in sorted(running))
            raise SystemExit(
                f"multirun interrupted; the running jobs stopped and saved their last.ckpt "
                f"({folders}): resume one with python train.py "
                "ckpt_path=<its folder>/checkpoints/last.ckpt"
            ) from None
        return [returns[num] for num in sorted(returns)]

    def free_gpu(self, busy: list[int | None]) -> int | None:
        """The listed GPU running the fewest jobs (the first of those), or None for all."""
        if self.gpus is None:
            return None
        return min(self.gpus, key=busy.count)

    def start(self, num: int, overrides: Sequence[str], gpu: int | None):
        cfg = self.job_config(overrides, num)
        run_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        run_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        on = "" if gpu is None else f" (GPU {gpu})"
        log.info("\t#%d : %s -> %s%s", num, " ".join(filter_overrides(overrides)), run_dir, on)
        console = (run_dir / CONSOLE_LOG).open("w")
        proc = subprocess.Popen(
            self.command(overrides, run_dir), stdout=console, stderr=subprocess.STDOUT, env=env
        )
        hydra_cfg = cfg.hydra
        with open_dict(cfg):
            del cfg["hydra"]
        record = JobReturn(
            overrides=list(overrides),
            cfg=cfg,
            hydra_cfg=OmegaConf.create({"hydra": hydra_cfg}),
            working_dir=str(run_dir),
            task_name=str(hydra_cfg.job.name),
        )
        return Running(proc, console, time.monotonic(), gpu), record


class JobFailed(CompactHydraException):
    """A job that exited with an error: Hydra prints this message alone, no traceback of
    its own (the job's traceback is in its console.log and log file)."""


class Running:
    """A job's process, the file its output goes to, when it started and its GPU."""

    def __init__(self, proc: subprocess.Popen, console: Any, started: float, gpu: int | None):
        self.proc, self.console, self.started, self.gpu = proc, console, started, gpu


def finish(job: JobReturn, returncode: int, seconds: float) -> None:
    """Record how a job ended: its value (the best monitored metric, as ``train.py``
    returns it to sweepers), or why it failed and where its output is."""
    run_dir = Path(str(job.working_dir))
    if returncode == 0:
        job.status = JobStatus.COMPLETED
        job.return_value = best_metric(run_dir)
        log.info("job %s finished in %.0f s: %s", run_dir.name, seconds, run_dir)
        return
    job.status = JobStatus.FAILED
    job.return_value = JobFailed(
        f"job {run_dir.name} ({' '.join(job.overrides or [])}) exited with code "
        f"{returncode} after {seconds:.0f} s; its output is in {run_dir / CONSOLE_LOG}"
    )
    log.error("%s", job._return_value)


def best_metric(run_dir: Path) -> float | None:
    path = run_dir / "metrics.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    value = record.get("metrics", {}).get(f"{record.get('monitor')}_best")
    return None if value is None else float(value)
