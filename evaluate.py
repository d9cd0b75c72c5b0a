"""Evaluate a checkpoint: ``python evaluate.py ckpt_path=... [data.split=test]``."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="configs", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    # imported after Hydra, as in train.py: --help and refused overrides answer at once
    from segnet.runs.console import lightning_logs_on_their_own, traceback_in_log

    lightning_logs_on_their_own()
    with traceback_in_log("evaluation"):
        from segnet.commands.evaluate import evaluate

        evaluate(cfg)


if __name__ == "__main__":
    import sys

    from segnet.runs.folders import output_dir_as_run_dir, refuse_existing_run_dir

    sys.argv[1:] = output_dir_as_run_dir(sys.argv[1:])
    from segnet.runs.typos import hint_on_failure

    refuse_existing_run_dir(sys.argv[1:])
    with hint_on_failure("evaluate", sys.argv[1:]):
        main()
