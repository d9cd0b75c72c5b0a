"""Where the commands' configs are. Their source is the checkout's top-level ``configs/``
(what a source checkout and an editable install read); a wheel carries a copy of it as
``segnet/configs`` (``setup.py`` puts it there), so an installed package runs from any
folder."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def config_dir() -> Path:
    """The wheel's copy where there is one, else the checkout's ``configs/``."""
    for candidate in (PACKAGE / "configs", PACKAGE.parent / "configs"):
        if (candidate / "train.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"no configs found in {PACKAGE / 'configs'} or {PACKAGE.parent / 'configs'}: "
        "install the package from a wheel built by `pip wheel .`, or run from a checkout."
    )


CONFIGS = config_dir()
