"""A Hydra launcher that runs a multirun's jobs as separate processes on this machine,
``n_jobs`` at a time (``hydra/launcher=parallel``; configs/hydra/launcher/parallel.yaml).

Why: small networks leave most of a GPU idle. On one H100, two ``hippocampus_gpu`` folds
side by side were done in 345 s, where one alone takes 276 s (README "On one GPU"); Hydra's
basic launcher runs jobs one after the other. Each job is the same script run again with
its overrides, the sweep's ``hydra.*`` overrides and its own run folder
(``<sweep dir>/<subdir>``), so it is the run ``python train.py <overrides>`` would be: its
own process, CUDA context and data workers.

Jobs run in process groups of their own, so that a signal reaches each job once, from
here: Ctrl+C or SIGTERM is passed on to the running jobs (each saves its ``last.ckpt`` and
stops), a second Ctrl+C stops them at once, and the launcher waits for them either way.

Kept free of torch and of segnet's imports: Hydra imports every plugin on every start-up.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from segnet.shell import command, hydra_value, override

log = logging.getLogger(__name__)

# what the job writes to its terminal (progress bars, warnings), kept in its run folder
CONSOLE_LOG = "console.log"
# hydra.* overrides that shape the sweep itself, not a job: not passed on to the jobs
SWEEP_ONLY = ("hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper",
              "hydra.sweep.", "hydra.mode", "hydra.run.dir")  # fmt: skip


class JobFailed(CompactHydraException):
    """A job that exited with an error: Hydra prints this message alone, no traceback of
    its own (the job's traceback is in its console.log and log file)."""


class Terminated(Exception):
    """SIGTERM reached the launcher (``kill``, ``timeout``, a cluster's pre-emption)."""


class ParallelLauncher(Launcher):
    def __init__(self, n_jobs: int = 2, gpus: Sequence[int] | None = None) -> None:
        if not isinstance(n_jobs, int) or n_jobs < 1:
            raise ValueError(f"hydra.launcher.n_jobs={n_jobs!r}: use a whole number >= 1.")
        self.n_jobs = n_jobs
        # jobs take these GPUs in turn; None: every job sees every GPU
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
        """The program this sweep runs, again, for one job: the config it was composed
        from, the user's ``hydra.*`` overrides, the job's own overrides and run folder."""
        assert self.config is not None
        hydra_cfg = self.config.hydra
        args = [sys.executable, *program(), f"--config-name={hydra_cfg.job.config_name}"]
        for source in hydra_cfg.runtime.config_sources:
            if source.provider == "main" and source.path.startswith("file://"):
                args.append(f"--config-path={source.path[len('file://') :]}")
            elif source.provider == "command-line":
                args.append(f"--config-dir={source.path.removeprefix('file://')}")
        passed = [o for o in hydra_cfg.overrides.hydra if not o.lstrip("+~").startswith(SWEEP_ONLY)]
        return [
            *args,
            *passed,
            *overrides,
            "hydra.mode=RUN",
            f"hydra.run.dir={hydra_value(run_dir)}",
        ]

    def gpu_for(self, busy: list[int | None]) -> int | None:
        """The listed GPU running the fewest jobs (the first of those), or None for all."""
        if self.gpus is None:
            return None
        return min(self.gpus, key=busy.count)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        assert self.config is not None
        check_gpus(self.gpus)  # before any folder or job
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info("Launching %d jobs, %d at a time", len(job_overrides), self.n_jobs)
        pending = list(enumerate(job_overrides, start=initial_job_idx))
        running: dict[int, Running] = {}
        returns: dict[int, JobReturn] = {}
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, raise_terminated)
        try:
            while pending or running:
                while pending and len(running) < self.n_jobs:
                    num, overrides = pending.pop(0)
                    gpu = self.gpu_for([job.gpu for job in running.values()])
                    returns[num] = self.record(overrides, num)
                    if refused(returns[num]):
                        continue
                    running[num] = self.start(returns[num], gpu)
                time.sleep(0.2)
                for num, job in list(running.items()):
                    if job.proc.poll() is None:
                        continue
                    job.console.close()
                    del running[num]
                    finish(returns[num], job.proc.returncode, time.monotonic() - job.started)
        except (KeyboardInterrupt, Terminated) as stop:
            signum = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
            stop_jobs(running, signum)
            # the jobs that had not started, each with the folder it would have had
            waiting = [(num, o, self.record(o, num).working_dir) for num, o in pending]
            from segnet.sweeps.summary import write_summary

            try:  # the jobs that finished (or stopped) before it, in summary.csv
                write_summary(Path(str(self.config.hydra.sweep.dir)), None, show=False)
            except Exception as err:  # noqa: BLE001 - the interruption is what to report
                log.warning("no summary.csv for the interrupted sweep: %s", err)
            raise SystemExit(interrupted_message(running, returns, waiting)) from None
        except BaseException:
            stop_jobs(running, signal.SIGTERM)  # a launcher error: the jobs save and stop
            raise
        finally:
            for job in running.values():
                job.console.close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        if any(r.status == JobStatus.FAILED for r in returns.values()):
            # Hydra stops at a failed job before the sweep's summary: the finished jobs'
            # results are written all the same
            from segnet.sweeps.summary import write_summary

            write_summary(Path(str(self.config.hydra.sweep.dir)), self.config.get("monitor"))
        return [returns[num] for num in sorted(returns)]

    def record(self, overrides: Sequence[str], num: int) -> JobReturn:
        """The job's record, as the basic launcher keeps it: its task config, the full
        config with ``hydra``, and its run folder as working_dir."""
        cfg = self.job_config(overrides, num)
        run_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        full = copy.deepcopy(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        return JobReturn(
            overrides=list(overrides),
            cfg=cfg,
            hydra_cfg=full,
            working_dir=str(run_dir),
            task_name=str(full.hydra.job.name),
        )

    def start(self, job: JobReturn, gpu: int | None) -> Running:
        run_dir = Path(str(job.working_dir))
        run_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible_device(gpu)
        on = "" if gpu is None else f" (GPU {env['CUDA_VISIBLE_DEVICES']})"
        overrides = job.overrides or []
        log.info(
            "\t#%s : %s -> %s%s", run_dir.name, " ".join(filter_overrides(overrides)), run_dir, on
        )
        console = (run_dir / CONSOLE_LOG).open("w")
        try:
            proc = subprocess.Popen(
                self.command(overrides, run_dir),
                stdout=console,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # signals reach it from here, once
            )
        except BaseException:
            console.close()
            raise
        return Running(proc, console, time.monotonic(), gpu)


class Running:
    """A job's process, the file its output goes to, when it started and its GPU. (Not a
    dataclass: Hydra's plugin scan imports this file without registering it in sys.modules,
    where @dataclass looks up its annotations.)"""

    def __init__(self, proc: subprocess.Popen, console: Any, started: float, gpu: int | None):
        self.proc, self.console, self.started, self.gpu = proc, console, started, gpu


def program() -> list[str]:
    """What runs this sweep, for ``python`` to run again: the script, or ``-m <module>``
    where it was started so (python -m segnet.export)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return ["-m", spec.name] if spec else [sys.argv[0]]


def raise_terminated(signum, frame) -> None:
    raise Terminated


def visible_device(index: int) -> str:
    """GPU ``index`` among those this process sees: under CUDA_VISIBLE_DEVICES=2,3 (a
    cluster's allocation), index 0 is device 2."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(index)
    devices = [d.strip() for d in visible.split(",") if d.strip()]
    if index >= len(devices):
        raise JobFailed(
            f"hydra.launcher.gpus lists GPU {index}, but CUDA_VISIBLE_DEVICES={visible} "
            f"leaves {len(devices)} visible (indices 0..{len(devices) - 1})."
        )
    return devices[index]


def check_gpus(gpus: Sequence[int] | None) -> None:
    """Each GPU ``hydra.launcher.gpus`` lists is one this machine has (counted as CUDA
    sees them, under CUDA_VISIBLE_DEVICES): a job given a GPU that is not there would run
    on the CPU, hours slower, without a word."""
    if gpus is None:
        return
    import torch

    count = torch.cuda.device_count()
    missing = [g for g in gpus if not 0 <= g < count]
    if missing:
        have = f"{count} GPU(s) (indices 0..{count - 1})" if count else "no GPU"
        raise JobFailed(
            f"hydra.launcher.gpus={list(gpus)}: this machine has {have}, so GPU "
            f"{missing[0]} is not there; list GPUs it has, or leave hydra.launcher.gpus out."
        )


def stop_jobs(running: dict[int, Running], signum: int) -> None:
    """Pass the signal on to every running job and wait for each to save and stop; a
    second Ctrl+C while waiting is passed on too (the jobs then stop at once)."""
    if not running:
        return
    log.warning("stopping %d running job(s): each saves its last.ckpt", len(running))
    for job in running.values():
        job.proc.send_signal(signum)
    while any(job.proc.poll() is None for job in running.values()):
        try:
            time.sleep(0.2)
        except (KeyboardInterrupt, Terminated):
            for job in running.values():
                if job.proc.poll() is None:
                    job.proc.send_signal(signal.SIGINT)


def interrupted_message(
    running: dict[int, Running],
    returns: dict[int, JobReturn],
    waiting: Sequence[tuple[int, Sequence[str], Any]],
) -> str:
    """What became of each job, and the command that goes on with it: resume a job that
    saved, run one that had not started (in the folder it would have had)."""
    lines = ["multirun interrupted."]
    for num in sorted(running):
        job = returns[num]
        saved = Path(str(job.working_dir)) / "checkpoints" / "last.ckpt"
        if saved.is_file():
            resume = command("python", *program(), *(job.overrides or []))
            lines.append(f"  job {num} saved {saved}; to resume it: {resume} "
                         f"{override('ckpt_path', saved)}")  # fmt: skip
        else:
            lines.append(f"  job {num} stopped before saving a checkpoint ({job.working_dir})")
    for num, overrides, run_dir in waiting:
        run = command("python", *program(), *overrides)
        lines.append(f"  job {num} had not started; to run it: {run} "
                     f"{override('hydra.run.dir', run_dir)}")  # fmt: skip
    return "\n".join(lines)


def refused(job: JobReturn) -> bool:
    """A job whose folder already holds files is not started, and fails: a sweep folder
    named in a config file (not on the command line, where it is checked before any job)
    could be an earlier sweep's, and a new job never writes into an earlier run."""
    run_dir = Path(str(job.working_dir))
    if not (run_dir.is_dir() and any(run_dir.iterdir())):
        return False
    job.status = JobStatus.FAILED
    job.return_value = JobFailed(
        f"job {run_dir.name} not started: {run_dir} already holds files, and a new job never "
        "writes into an earlier run. Name a new hydra.sweep.dir."
    )
    log.error("%s", job._return_value)
    return True


def finish(job: JobReturn, returncode: int, seconds: float) -> None:
    """Record how a job ended: its value (the best monitored metric, as ``train.py``
    returns it to sweepers; None where the run wrote no metrics.json), or why it failed
    and where its output is."""
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
    try:
        record = json.loads((run_dir / "metrics.json").read_text())
        value = record["metrics"].get(f"{record.get('monitor')}_best")
        return None if value is None else float(value)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # no metrics.json (train=false), or not one a run wrote
