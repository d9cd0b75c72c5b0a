"""The export command: ``python -m segnet.export ckpt_path=<checkpoint or run folder>``
(``segnet-export`` is the same). A checkpoint, a run folder or a multirun of folds
exported into a new run folder (``segnet.serving.export`` writes and verifies the
files). Hydra is imported here alone, so the serving package stays free of it."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from segnet.commands.argv import export_argv
from segnet.runs.console import traceback_in_log


@hydra.main(version_base="1.3", config_path="../../configs", config_name="export")
def run(cfg: DictConfig) -> None:
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


def main() -> None:
    # before Hydra writes its config into a folder that holds another run's
    sys.argv[1:] = export_argv(sys.argv[1:])
    run()


if __name__ == "__main__":
    main()
