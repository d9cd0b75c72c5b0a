"""Runs as Hydra composes them: the table of settings and the checks derived from it,
building objects from a config, run folders and their records, resume, the console.

May import ``training``, ``serving``, ``models``, ``data`` and the loose modules; never
``commands`` or ``sweeps``."""
