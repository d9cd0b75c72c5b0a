"""Training with Lightning, without Hydra: the LightningModule, losses, metrics, callbacks,
checkpoint writing and the test stage.

May import ``serving``, ``models``, ``data``, ``files``, ``logs`` and ``shell``; never
``runs``, ``commands`` or ``sweeps``, nor Hydra: what it needs from a config arrives as
plain arguments."""
