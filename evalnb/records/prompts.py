"""Prompt templates and prompt files: how every benchmark fills and records its prompts.

Each benchmark keeps its own templates at the top of its protocol module. Placeholders are
filled in a single pass, so a question that happens to contain ``{document}`` is sent as
written and never expanded twice. A prompt file (the official one, or our shipped default)
is read once and recorded with its hash.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` for the names given, once, leaving every other brace alone."""
    return _PLACEHOLDER.sub(lambda m: values[m[1]] if m[1] in values else m[0], template)


@dataclass(frozen=True)
class PromptFile:
    path: Path
    text: str
    sha256: str

    def record(self) -> dict[str, str]:
        return {"path": str(self.path), "sha256": self.sha256}


def read_prompt_file(path: Path | None, default: Path) -> PromptFile:
    """A prompt file (the official one when given, else ours, ``default``), with its hash for the record."""
    target = path or default
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        from evalnb.core.errors import ConfigError
        raise ConfigError(f"prompt file not found: {target}") from None
    return PromptFile(target, data.decode("utf-8"), hashlib.sha256(data).hexdigest())


PROMPTS_DIR = "prompts"   # in a run directory: each template as text, beside fingerprint.json's hashes


def write_prompts(run_dir: Path, texts: Mapping[str, str]) -> None:
    """Each prompt template as ``prompts/NAME.txt`` in the run directory, so that a reviewer
    reads the judge's prompt from the record itself (fingerprint.json keeps only hashes).
    Written once, and again only when a text differs (the fingerprint refuses that anyway)."""
    from evalnb.records.stores import write_text

    folder = run_dir / PROMPTS_DIR
    for name, text in texts.items():
        target = folder / f"{name}.txt"
        if not target.exists() or target.read_text("utf-8") != text:
            folder.mkdir(parents=True, exist_ok=True)
            write_text(target, text)


def read_prompts(run_dir: Path) -> dict[str, str]:
    """The templates a run recorded (name -> text), in name order; none for an older run."""
    folder = Path(run_dir) / PROMPTS_DIR
    return {p.stem: p.read_text("utf-8") for p in sorted(folder.glob("*.txt"))} if folder.is_dir() else {}
