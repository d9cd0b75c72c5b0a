"""Multiruns: the preflight that checks every job before the first starts, the summary
table of a sweep, and Optuna studies.

May import anything in the package; nothing imports it but the sweep's own configs (and
``serving.ensemble`` reading a sweep folder's layout through ``sweeps.layout``)."""
