"""The wheel carries the project template (``evalnb/_project/``: the stage and compare
notebooks, the example and demo parameters, the sample data, the example rater), written
from the checkout's top-level ``notebooks/`` and ``params/`` at build time by the same
function ``evalnb init`` uses: one source of truth, no copies kept in the repository.
Everything else is in pyproject.toml."""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_evalnb_project", ROOT / "evalnb" / "app" / "project.py")
assert _spec is not None and _spec.loader is not None
project = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(project)


class build_py_with_template(build_py):
    """build_py, then the project template into the build's evalnb package. An editable
    install needs none: evalnb finds notebooks/ and params/ in the checkout."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            self._template = project.write_template(ROOT, Path(self.build_lib) / "evalnb" / project.TEMPLATE_NAME)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), *map(str, getattr(self, "_template", []))]


setup(cmdclass={"build_py": build_py_with_template})
