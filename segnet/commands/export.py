"""The export command: ``python -m segnet.export ckpt_path=<checkpoint or run folder>``
(``segnet-export`` is the same). A checkpoint, a run folder or a multirun of folds
exported into a new run folder (``segnet.serving.export`` writes and verifies the
files). Hydra is imported here alone, so the serving package stays free of it."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from segnet.commands.argv import export_argv
from segnet.runs.config_files import CONFIGS
from segnet.runs.console import traceback_in_log


@hydra.main(version_base="1.3", config_path=str(CONFIGS), config_name="export")
def run(cfg: DictConfig) -> None:
    export(cfg)


def export(cfg: DictConfig) -> None:
    """The export a composed ``export`` config asks for, into ``cfg.paths.output_dir``."""
    from segnet.serving.ensemble import checkpoint_paths
    from segnet.serving.export import export_checkpoint, export_ensemble

    with traceback_in_log("export") as work:
        paths = checkpoint_paths(cfg.ckpt_path)  # a run or multirun folder, or a list
        write = export_checkpoint if len(paths) == 1 else export_ensemble
        write(
            paths[0] if len(paths) == 1 else paths,
            cfg.paths.output_dir,
            # formats=onnx (one, without brackets) as formats=[onnx]
            (cfg.formats,) if isinstance(cfg.formats, str) else tuple(cfg.formats),
            OmegaConf.to_container(cfg, resolve=True)["example_size"],
            on_write=work.starts,  # a failure from here on keeps the run folder and its log
        )
        if len(paths) == 1:
            to_trackers(paths[0], Path(cfg.paths.output_dir))


def to_trackers(ckpt: Path, out_dir: Path) -> None:
    """The exported files added to the trackers the checkpoint's training run logged to
    (MLflow, W&B), as artifacts under ``export/``."""
    from segnet.logs import to_log_file
    from segnet.runs.records import send_to_run_trackers
    from segnet.runs.resume import run_folder_of

    run = run_folder_of(Path(ckpt).expanduser().resolve())
    if run is None:
        return
    files = sorted(p for p in out_dir.iterdir() if p.is_file() and p.name.startswith("model"))
    for where in send_to_run_trackers(run, files, "export"):
        line = f"sent to      {where}"
        print(line)
        to_log_file(line, "segnet.commands.export")


def main() -> None:
    # before Hydra writes its config into a folder that holds another run's
    sys.argv[1:] = export_argv(sys.argv[1:])
    run()


if __name__ == "__main__":
    main()
