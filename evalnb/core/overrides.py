"""``--set KEY=VALUE``: one parameter overridden from the command line.

KEY is a dotted path; VALUE is read as YAML (numbers, booleans, lists, mappings). A part of
the path that is a whole number indexes a list (``judges.0.base_url=...``, ``judges.2={...}``
replaces the third judge). Decisions, where the issue was silent:

- an index must name an entry that exists (0 to len - 1): a list is never grown or padded by
  an override (``judges=[...]`` sets a whole list, one more judge included);
- a number on a mapping is that mapping's key, as YAML would read it (``prices.0=...``);
- a part missing on the way (or null) is made a mapping (``retry.max_retries=2`` with no
  ``retry``); a part that holds a number or a string is refused, never replaced by a mapping;
- a name on a list is refused with the index syntax in the message.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import yaml

from evalnb.core.errors import ConfigError


def apply_sets(params: dict[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``params`` with each ``KEY=VALUE`` of ``sets`` applied in order (``params`` unchanged)."""
    out = copy.deepcopy(params)
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {key}: the value is not valid YAML ({getattr(e, 'problem', e)})") from None
        parts = key.strip().split(".")
        if not all(parts):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted KEY (a.b.c)")
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(parts[:depth]) or "the parameters"
            if isinstance(node, list):
                index = _index(node, part, where, key)
                if last:
                    node[index] = value
                else:
                    node[index] = node = _container(node[index], ".".join(parts[:depth + 1]), key)
            elif last:
                node[part] = value
            else:
                node[part] = node = _container(node.get(part), ".".join(parts[:depth + 1]), key)
    return out


def _index(items: list[Any], part: str, where: str, key: str) -> int:
    if not part.isdigit():
        raise ConfigError(f"--set {key}: {where} is a list: give an entry's index, e.g. {where}.0 "
                          f"(indices 0 to {len(items) - 1})" if items else
                          f"--set {key}: {where} is an empty list: set it whole ({where}=[...])")
    index = int(part)
    if index >= len(items):
        span = f"indices 0 to {len(items) - 1}" if items else "it is empty"
        raise ConfigError(f"--set {key}: {where} has {len(items)} entr{'y' if len(items) == 1 else 'ies'} "
                          f"({span}); index {index} is out of range: to add one, set the whole list "
                          f"({where}=[...])")
    return index


def _container(value: Any, where: str, key: str) -> Any:
    """The mapping or list to descend into at ``where`` (a copy is already ours: deepcopy)."""
    if value is None:
        return {}
    if isinstance(value, (dict, list)):
        return value
    raise ConfigError(f"--set {key}: {where} is {value!r}, not a mapping or a list: nothing in it to set")
