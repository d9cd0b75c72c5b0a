"""Console scripts: ``segnet-train``, ``segnet-evaluate``, ``segnet-export``,
``segnet-predict`` and ``segnet-bench``, each the same command as its ``python ...`` form
(``train.py`` and ``evaluate.py`` with their argument rewriting, the modules' ``__main__``),
so that both behave alike. The configs are read from the source tree (an editable install,
as ``make install`` makes)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str) -> None:
    path = ROOT / name
    if not path.is_file():
        raise SystemExit(
            f"{path} not found: the segnet-* commands run from a source checkout installed "
            "with `make install` (pip install -e .)."
        )
    sys.argv[0] = str(path)
    runpy.run_path(str(path), run_name="__main__")


def train() -> None:
    _script("train.py")


def evaluate() -> None:
    _script("evaluate.py")


def export() -> None:
    from segnet.commands.export import main

    main()


def predict() -> None:
    from segnet.commands.predict import main

    main()


def bench() -> None:
    runpy.run_module("segnet.commands.bench", run_name="__main__", alter_sys=True)
