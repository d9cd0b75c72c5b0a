"""Lines for a run's log file alone (Hydra's ``<task>.log``): what the console already
shows, or shows as a progress bar that a logged line would break. Plain logging, for
every layer of the package."""

from __future__ import annotations

import logging


def to_log_file(text: str, name: str = "segnet.progress") -> None:
    """``text`` into the run's log file (``train.log``) only: the console already shows it,
    or shows a progress bar that a logged line would break."""
    to_log_files(logging.LogRecord(name, logging.INFO, __file__, 0, text, None, None))


def log_files() -> list[logging.FileHandler]:
    """The run's log files (Hydra's ``<task>.log``), as the root logger writes them."""
    return [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]


def to_log_files(record: logging.LogRecord) -> None:
    for handler in log_files():
        if record.levelno >= handler.level:
            handler.handle(record)
