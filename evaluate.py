"""Evaluate a checkpoint: ``python evaluate.py ckpt_path=... [data.split=test]``."""

import sys

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="configs", config_name="evaluate")
def run(cfg: DictConfig) -> None:
    # imported after Hydra, as in train.py: --help and refused overrides answer at once
    from segnet.runs.console import lightning_logs_on_their_own, traceback_in_log

    lightning_logs_on_their_own()
    with traceback_in_log("evaluation") as work:
        from segnet.commands.evaluate import evaluate

        evaluate(cfg, work)


def main() -> None:
    """The evaluate command from any entry point: its command line read first (the run
    folder named, and free), then Hydra's."""
    from segnet.commands.argv import evaluate_argv
    from segnet.runs.typos import hint_on_failure

    sys.argv[1:] = evaluate_argv(sys.argv[1:])
    with hint_on_failure("evaluate", sys.argv[1:]):
        run()


if __name__ == "__main__":
    main()
