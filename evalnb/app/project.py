"""Where the stage notebooks, the example parameters and the sample data are, and
``evalnb init``: a copy of them in a folder of the user's.

One source of truth: the checkout's top-level ``notebooks/`` and ``params/`` (and the sample
data and example rater under ``evalnb/``). In a checkout (an editable install) they are used
where they are. A wheel carries them as the *project template*, ``evalnb/_project/``, written
at build time by ``setup.py`` with :func:`write_template` (the same function ``evalnb init``
uses in a checkout), laid out as ``evalnb init`` lays out a user's folder::

    notebooks/   01_generate.ipynb ... 05_compare.ipynb
    params/      the example and demo parameters
    data/        the shipped samples (evalnb/data in the checkout)
    examples/    the example rater script (evalnb/examples in the checkout)

The demo parameters reach the samples by paths relative to themselves; in the template
``../evalnb/data/`` reads ``../data/`` (and ``../evalnb/examples/`` ``../examples/``), which is
the only change made on the way.

Standard library only: ``setup.py`` loads this file by path, before evalnb is installed.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

TEMPLATE_NAME = "_project"      # the template's folder inside the installed package
PARTS = ("notebooks", "params", "data", "examples")
# A path from the checkout's params/ into the package folder, and its form in the template.
_INTO_PACKAGE = re.compile(r"\.\./evalnb/(data|examples)/")


class ProjectFilesMissing(RuntimeError):
    pass


def _checkout(package: Path) -> Path | None:
    root = package.parent
    if (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir() and (root / "params").is_dir():
        return root
    return None


def project_dir() -> Path:
    """The folder holding ``notebooks/`` and ``params/``: the checkout, or the installed template."""
    package = Path(__file__).resolve().parent.parent   # the evalnb package
    found = _checkout(package)
    if found is not None:
        return found
    template = package / TEMPLATE_NAME
    if (template / "notebooks").is_dir():
        return template
    raise ProjectFilesMissing(f"evalnb's notebooks are missing: neither {package.parent / 'notebooks'} nor "
                              f"{template / 'notebooks'} exists (a wheel built without setup.py's template step?)")


def template_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """(relative path, content) of every file of the project template, from a checkout ``root``."""
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        yield f"notebooks/{path.name}", path.read_bytes()
    for path in sorted((root / "params").iterdir()):
        if path.suffix in (".yaml", ".yml", ".json"):
            yield f"params/{path.name}", _INTO_PACKAGE.sub(r"../\1/", path.read_text("utf-8")).encode("utf-8")
    for part in ("data", "examples"):
        for path in sorted((root / "evalnb" / part).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield f"{part}/{path.relative_to(root / 'evalnb' / part).as_posix()}", path.read_bytes()


def write_template(root: Path, target: Path) -> list[Path]:
    """Write the project template made from checkout ``root`` into ``target``."""
    written = []
    for relative, content in template_files(root):
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(path)
    return written


def _source_files() -> dict[str, bytes | Path]:
    root = project_dir()
    if root.name == TEMPLATE_NAME:   # installed: the template as built
        return {path.relative_to(root).as_posix(): path for part in PARTS for path in sorted((root / part).rglob("*"))
                if path.is_file() and "__pycache__" not in path.parts}
    return dict(template_files(root))


def init_project(target: Path, *, force: bool = False) -> list[Path]:
    """Copy the stage notebooks, the example parameters, the sample data and the example rater
    into ``target`` (ready for JupyterLab). Refuses to replace a file that differs, unless ``force``."""
    files = _source_files()
    clashes = [rel for rel, src in files.items() if (target / rel).exists()
               and (target / rel).read_bytes() != (src.read_bytes() if isinstance(src, Path) else src)]
    if clashes and not force:
        shown = ", ".join(clashes[:5]) + (f" and {len(clashes) - 5} more" if len(clashes) > 5 else "")
        raise FileExistsError(f"{target}: would replace {shown} (use --force to overwrite)")
    written = []
    for rel, src in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copyfile(src, path)
        else:
            path.write_bytes(src)
        written.append(path)
    return written
