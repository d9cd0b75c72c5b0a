"""The wheel carries the commands' configs: the checkout's top-level ``configs/`` (their
one source) is copied into the built package as ``segnet/configs``, where
``segnet.runs.config_files`` looks first. Everything else is in ``pyproject.toml``."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:  # an editable install reads configs/ where it is
            source = Path(__file__).resolve().parent / "configs"
            self.copy_tree(str(source), str(Path(self.build_lib) / "segnet" / "configs"))


setup(cmdclass={"build_py": BuildWithConfigs})
