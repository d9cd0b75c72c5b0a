"""What a run prints: its overrides and config path at the start, a summary at the end, and none of
the library noise that hides them (Lightning's adverts, known deprecation warnings)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from segnet.logs import log_files, to_log_file, to_log_files
from segnet.runs.folders import Work, discard_refused_run

log = logging.getLogger(__name__)

# Lightning's info lines that advertise products or narrate internals
_QUIET_INFO = (
    "💡 Tip:",
    "Loading `train_dataloader` to estimate number of stepping batches",
    # the callbacks config's own summary (segnet.training.callbacks.summary) replaces Lightning's
    "Trainer already configured with model summary callbacks",
)
# Warnings about how Lightning or its dependencies are written, not about the user's run
_QUIET_WARNINGS = (
    r".*isinstance\(treespec, LeafSpec\)` is deprecated.*",
    r".*overridden `on_after_batch_transfer` in `LightningModule` but have passed in a.*",
    # a resume goes on in its run's folder; a new run into a used one is refused before
    r"Checkpoint directory .* exists and is not empty.*",
)


class _DropInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_QUIET_INFO)


def lightning_logs_on_their_own() -> None:
    """Lightning's loggers as Lightning sets them up when it is imported before logging is
    configured: their own console handler, nothing passed on. The commands import it after
    Hydra has configured logging (so that --help answers at once); without this, each of
    its lines would print twice, once through Lightning's package handler and once in
    Hydra's format."""
    for name in ("lightning.pytorch", "lightning.fabric"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.setLevel(logging.INFO)
            logger.addHandler(logging.StreamHandler())
            logger.propagate = False


def quiet_library_noise() -> None:
    """Drop Lightning's "Tip" adverts and the known deprecation warnings that every run
    printed. Idempotent."""
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropInfo) for f in logger.filters):
            logger.addFilter(_DropInfo())
    for pattern in _QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def rank_zero_speaks() -> None:
    """A run of several processes (DDP) says each thing once: on the processes besides
    rank 0 this package logs errors only, as each would repeat rank 0's warnings and notes
    (about the data, which every rank reads alike; the epoch lines are rank 0's already)."""
    from lightning.pytorch.utilities import rank_zero_only

    from segnet.runs.folders import launched_rank  # (NODE_RANK too: another machine's processes)

    if rank_zero_only.rank != 0 or launched_rank():
        logging.getLogger("segnet").setLevel(logging.ERROR)


def log_config(cfg: Any) -> None:
    """What ran: on the console the overrides given and where the whole config is (a page
    of YAML would push the run's own lines off the screen); in the run's log file the
    resolved config itself, whatever the overrides were."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    to_log_file("resolved config:\n" + OmegaConf.to_yaml(cfg, resolve=True).rstrip(), __name__)
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    where = Path(cfg.paths.output_dir) / ".hydra" / "config.yaml"
    log.info(
        "overrides: %s\n  config: %s (resolved: in the log file; monitor: %s)",
        " ".join(overrides) or "none",
        where,
        cfg.get("monitor"),
    )


def log_summary(
    out_dir: Path,
    best_ckpt: str | None,
    split: str | None,
    metrics: dict,
    best_epoch: int | None = None,
    limited: str | None = None,
    monitor: str | None = None,
    trackers: list[dict] = (),
) -> None:
    """The end of a run in a few lines: where everything went and the headline numbers
    (``limited``: the setting that left part of the split untested; ``monitor``:
    the validation metric that picked the best checkpoint, whose best value is shown;
    ``trackers``: what each guarded tracker got, as ``close_guards`` returns it)."""
    lines = [f"run folder: {out_dir}"]
    if best_ckpt:
        about = [] if best_epoch is None else [f"epoch {best_epoch}"]
        score = metrics.get(f"{monitor}_best") if monitor else None
        if score is not None:
            about.append(f"{monitor} {score:.4f}")
        saved = f" ({', '.join(about)})" if about else ""
        lines.append(f"best checkpoint: {best_ckpt}{saved}")
    if split:
        headline = {k: v for k, v in metrics.items() if k.startswith("test/") and k.count("/") == 1}
        shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(headline.items()))
        part = f" (part of it: {limited})" if limited else ""
        lines.append(f"tested on '{split}'{part}: {shown}")
    if (out_dir / "metrics.json").is_file():
        lines.append(f"metrics: {out_dir / 'metrics.json'}")
    if (out_dir / "tensorboard").is_dir():  # none with logger=none
        lines.append(f"tensorboard --logdir {out_dir / 'tensorboard'}")
    lines += [delivery_line(t, out_dir) for t in trackers]
    log.info("summary\n  %s", "\n  ".join(lines))


def delivery_line(tracker: dict, out_dir: Path) -> str:
    """Whether a tracker got everything it was sent, and how to send it the rest."""
    if tracker["complete"]:
        return f"{tracker['label']}: got all {tracker['calls']} records"
    missed = tracker["calls"] - tracker["delivered"]
    return (
        f"{tracker['label']}: missed {missed} of {tracker['calls']} records "
        f"({tracker.get('last_error', 'unreachable')}); they are kept in "
        f"{out_dir / tracker['journal']}: segnet-replay {out_dir}"
    )


# What a run refuses (a setting, a file, a checkpoint it cannot take), raised by this
# package's own checks: messages that name what to change, which a traceback would bury
REFUSALS = (ValueError, FileExistsError, FileNotFoundError)
PACKAGE = str(Path(__file__).resolve().parents[1])


def raised_here(err: BaseException) -> bool:
    """Whether ``err`` was raised in this package's own code (its message written for the
    user), not inside torch, MONAI or another library."""
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    raised_in = frame.tb_frame.f_code.co_filename if frame is not None else ""
    return str(Path(raised_in).resolve()).startswith(PACKAGE)


def is_refusal(err: BaseException) -> bool:
    """Whether ``err`` is one of this package's refusals: of a refusing kind, and raised
    in its own code (a ValueError from inside torch or MONAI mid-epoch is a failure, whose
    traceback the console should show)."""
    return isinstance(err, REFUSALS) and raised_here(err)


@contextmanager
def traceback_in_log(what: str) -> Iterator[Work]:
    """A failure's traceback goes into the run's log file (``train.log``), so that it says
        why the run failed. On the console, a refusal (``REFUSALS``) of a single run shows as
        its message alone, with where the traceback is; anything else as Hydra shows it, with
        its traceback (in a multirun, Hydra reports each failed job itself). Yields the
    command's :class:`Work`: a refusal before it starts leaves no run folder behind."""
    from segnet.files import OutOfSpaceError

    work = Work()
    try:
        yield work
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:
        import sys

        to_log_files(
            log.makeRecord(
                log.name, logging.ERROR, __file__, 0, "%s failed", (what,), sys.exc_info()
            )
        )
        files = log_files()
        if isinstance(err, OutOfSpaceError) and not in_multirun():
            # a full disk is no bug to trace: what is kept and what to do is the message
            where = f"\n(the traceback is in {files[0].baseFilename})" if files else ""
            raise SystemExit(f"{what} stopped: {err}{where}") from None
        if is_refusal(err) and not in_multirun():
            where = f"\n(the traceback is in {files[0].baseFilename})" if files else ""
            if discard_refused_run([Path(h.baseFilename) for h in files], work) is not None:
                where = ""  # nothing ran: no run folder is kept, nor its log
                for handler in files:
                    logging.getLogger().removeHandler(handler)
                    handler.close()
            raise SystemExit(f"{what} refused: {err}{where}") from None
        raise


def in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def print_table(metrics: dict[str, float], title: str) -> None:
    """A run's final scores as a table on the console, and as lines in its log file."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in metrics.items():
        table.add_row(key, f"{value:.4f}")
    Console().print(table)
    to_log_file("\n  ".join([title, *(f"{k} {v:.4f}" for k, v in metrics.items())]), __name__)
