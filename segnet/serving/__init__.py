"""Using a trained model, in plain torch: checkpoint files, inference, model cards,
exported models, ensembles' arithmetic, export and predict.

May import ``segnet.models``, ``segnet.data``'s readers, ``files``, ``logs`` and ``shell``;
never Lightning, Hydra or torchmetrics, so that a deployment needs none of them
(``tests/test_imports.py`` checks both)."""
