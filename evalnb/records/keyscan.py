"""Finding key-shaped strings in a run's files (``evalnb verify`` and ``evalnb pack``).

The same shapes the secret filter redacts (:data:`evalnb.core.redaction.SECRET_VALUE`):
``sk-…``, ``sk-ant-…``, ``AIza…``, GitHub, Hugging Face and Slack tokens, ``Bearer …``.
A finding names the file, the line and the kind of key, never the string itself.

Decision: only text is searched. A file that is not UTF-8 (a PNG, a PDF) is an image, and
the base64 images inside a notebook or a page are skipped too (an ``image/*`` output, and a
``data:image`` URI in text: an evalnb figure's PNG is in its ``text/html``): random base64
matches ``AIza`` plus thirty letters about once in 400 images, and a key inside an image is no
text anyone reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.data_uris import DATA_URI, is_image
from evalnb.core.redaction import SECRET_VALUE


@dataclass(frozen=True)
class KeyFinding:
    file: str      # as the caller names it
    line: int
    kind: str      # the key's visible prefix, e.g. "sk-ant-…"

    def __str__(self) -> str:
        return f"{self.file}, line {self.line}: a key-shaped string ({self.kind})"


def _kind(match: str) -> str:
    for prefix in ("sk-ant-", "sk-", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "hf_", "xox", "Bearer"):
        if match.startswith(prefix):
            return f"{prefix}…"
    return "key…"


def without_image_data(text: str) -> str:
    """``text`` with every embedded image's base64 left out (``src="data:"`` stays); any other
    data URI is text someone may read, and is searched."""
    return DATA_URI.sub(lambda m: "data:" if is_image(m) else m.group(0), text)


def _without_images(notebook: Any) -> Any:
    """A notebook's JSON with every image output's data removed, and the images embedded in
    its text outputs (an HTML figure's ``<img>``)."""
    for cell in notebook.get("cells", []) if isinstance(notebook, dict) else []:
        for output in cell.get("outputs", []) or []:
            data = output.get("data")
            if isinstance(data, dict):
                for mime in list(data):
                    if mime.startswith("image/"):
                        data[mime] = ""
                    elif isinstance(data[mime], str):
                        data[mime] = without_image_data(data[mime])
                    elif isinstance(data[mime], list):   # line by line: the lines stay where they were
                        data[mime] = [without_image_data(line) if isinstance(line, str) else line
                                      for line in data[mime]]
    return notebook


def text_of(path: Path, data: bytes) -> str | None:
    """The searchable text of a file, or None for a binary one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if path.suffix == ".ipynb":
        try:
            # Keep the file's lines: the images' base64 sits on lines of its own in nbformat's layout.
            notebook = _without_images(json.loads(text))
            return json.dumps(notebook, indent=1, ensure_ascii=False)
        except (json.JSONDecodeError, AttributeError):
            return text
    return without_image_data(text)   # an HTML page's embedded figures


def scan_text(name: str, text: str) -> Iterator[KeyFinding]:
    for number, line in enumerate(text.splitlines(), start=1):
        for match in SECRET_VALUE.finditer(line):
            yield KeyFinding(name, number, _kind(match.group(0)))


def scan_file(path: Path, name: str, data: bytes | None = None) -> list[KeyFinding]:
    text = text_of(path, path.read_bytes() if data is None else data)
    return [] if text is None else list(scan_text(name, text))
