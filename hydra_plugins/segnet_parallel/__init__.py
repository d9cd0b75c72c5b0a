"""segnet's Hydra launcher plugin (``hydra/launcher=parallel``). Hydra finds launchers only
in the ``hydra_plugins`` namespace package, which is why this lives outside ``segnet``."""
