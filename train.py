"""Train a segmentation network: ``python train.py [overrides]`` (see configs/train.yaml)."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float | None:
    # torch and Lightning are imported here, after Hydra: --help, --cfg and a refused
    # override answer in a second or two instead of waiting for them
    from segnet.runs.console import lightning_logs_on_their_own, traceback_in_log

    lightning_logs_on_their_own()
    if cfg.get("optuna"):  # hparams_search=...: a study of many training runs
        from segnet.sweeps.study import run_study

        return float(run_study(cfg).best_value)
    with traceback_in_log("training"):  # an import that fails is in the run's log too
        from segnet.commands.train import train
        from segnet.runs.resume import forget_config_of_refused_resume

        with forget_config_of_refused_resume():
            metrics, _ = train(cfg)
    # returned for Hydra sweepers (Optuna): the value they optimise
    value = metrics.get(f"{cfg.monitor}_best")
    return None if value is None else float(value)


if __name__ == "__main__":
    import sys

    from segnet.runs.folders import output_dir_as_run_dir, resume_into_its_run
    from segnet.runs.typos import hint_on_failure

    sys.argv[1:] = resume_into_its_run(output_dir_as_run_dir(sys.argv[1:]))
    with hint_on_failure("train", sys.argv[1:]):
        main()
