"""Multiruns: the preflight that checks every job before the first starts, the summary
table of a sweep, and Optuna studies.

May import anything in the package; nothing in it imports this room (the sweeps' Hydra
configs and the parallel launcher do)."""
