"""Train a segmentation network: ``python train.py [overrides]`` (see configs/train.yaml)."""

import sys

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def run(cfg: DictConfig) -> float | None:
    # torch and Lightning are imported here, after Hydra: --help, --cfg and a refused
    # override answer in a second or two instead of waiting for them
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


def main() -> None:
    """The train command from any entry point (``python train.py``, ``segnet-train``): its
    command line read first (a resume goes into its run), then Hydra's."""
    from segnet.commands.argv import train_argv
    from segnet.runs.typos import hint_on_failure

    sys.argv[1:] = train_argv(sys.argv[1:])
    with hint_on_failure("train", sys.argv[1:]):
        run()


if __name__ == "__main__":
    main()
