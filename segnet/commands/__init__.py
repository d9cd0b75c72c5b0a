"""One module per command (train, evaluate, export, predict, bench), each a short list of
named stages over ``runs``, ``training`` and ``serving``.

May import everything but ``sweeps``."""
