"""The commands as users start them: ``segnet-train``, ``segnet-evaluate``,
``segnet-export``, ``segnet-predict`` and ``segnet-bench``, each the same command as its
``python ...`` form (``train.py`` and ``evaluate.py`` call :func:`train` and
:func:`evaluate` here; ``python -m segnet.export`` ...). They run from any folder, from a
checkout or an installed wheel: the configs come from ``segnet.runs.config_files``.

Only Hydra is imported at the top: torch and Lightning come after the command line is
read, so ``--help`` and a refused override answer in a second or two."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from segnet.runs.config_files import CONFIGS


@hydra.main(version_base="1.3", config_path=str(CONFIGS), config_name="train")
def run_training(cfg: DictConfig) -> float | None:
    from segnet.runs.console import lightning_logs_on_their_own, traceback_in_log

    lightning_logs_on_their_own()
    if cfg.get("optuna"):  # hparams_search=...: a study of many training runs
        from segnet.sweeps.study import run_study

        return float(run_study(cfg).best_value)
    with traceback_in_log("training") as work:  # an import that fails is in the log too
        from segnet.commands.train import train
        from segnet.runs.resume import forget_config_of_refused_resume

        with forget_config_of_refused_resume(work):
            metrics, _ = train(cfg, work)
    # returned for Hydra sweepers (Optuna): the value they optimise
    value = metrics.get(f"{cfg.monitor}_best")
    return None if value is None else float(value)


@hydra.main(version_base="1.3", config_path=str(CONFIGS), config_name="evaluate")
def run_evaluation(cfg: DictConfig) -> None:
    from segnet.runs.console import lightning_logs_on_their_own, traceback_in_log

    lightning_logs_on_their_own()
    with traceback_in_log("evaluation") as work:
        from segnet.commands.evaluate import evaluate

        evaluate(cfg, work)


def train() -> None:
    """``segnet-train`` and ``python train.py``: the train command from any entry point: its command line read first (a resume goes
    into its run), then Hydra's."""
    from segnet.commands.argv import train_argv
    from segnet.runs.typos import hint_on_failure

    sys.argv[1:] = train_argv(sys.argv[1:])
    with hint_on_failure("train", sys.argv[1:]):
        run_training()


def evaluate() -> None:
    """``segnet-evaluate`` and ``python evaluate.py``: the evaluate command from any entry point: its command line read first (the run
    folder named, and free), then Hydra's."""
    from segnet.commands.argv import evaluate_argv
    from segnet.runs.typos import hint_on_failure

    sys.argv[1:] = evaluate_argv(sys.argv[1:])
    with hint_on_failure("evaluate", sys.argv[1:]):
        run_evaluation()


def export() -> None:
    from segnet.commands.export import main

    main()


def predict() -> None:
    from segnet.commands.predict import main

    main()


def bench() -> None:
    from segnet.commands.bench import main

    main()
