"""segnet: SegNet-style segmentation, trained with Lightning and configured with Hydra.

The package is laid out by role, each room importing only the rooms above it in this list
(``tests/test_imports.py`` holds every room to it):

- ``files``, ``shell``: writing files whole (atomically) and quoting overrides for a
  shell; imported from anywhere.
- ``models/``: the networks, plain torch.
- ``data/``: reading datasets, and their LightningDataModules.
- ``serving/``: plain torch, never Lightning or Hydra: checkpoint files, inference, model
  cards, loading exported models, ensembles' arithmetic, export and predict.
- ``training/``: Lightning without Hydra: the LightningModule, losses, metrics, callbacks,
  checkpoint writing and the test stage.
- ``runs/``: Hydra-aware: the table of settings and the checks derived from it, building
  objects from a config, run folders and their records, resume, the console.
- ``commands/``: one module per command (train, evaluate, bench), each a short list of
  named stages.
- ``sweeps/``: multiruns: the preflight of every job, the summary table, Optuna studies.

``predict``, ``export`` and ``bench`` are the commands' short names
(``python -m segnet.predict``). Names of earlier versions' modules, which run folders
record, are translated where such a record is read (``runs/earlier_names``).
"""
