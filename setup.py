"""Only a build hook; the project's metadata is in pyproject.toml.

The built-in rubrics live in the top-level ``prompts/`` folder (their one source). ``build_py``
copies it into the built package as ``harness/prompts/``, so a wheel, ``pip install .`` or
``pipx install`` carries them; a checkout reads ``prompts/`` directly
(``harness.rubrics.rubric.builtin_prompts_dir``).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithPrompts(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "prompts"
        shutil.copytree(source, Path(self.build_lib) / "harness" / "prompts", dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithPrompts})
