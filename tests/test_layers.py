"""The layer rule, read from the code: every import of evalnb's own modules (function-local
and type-checking ones included) goes down the layers or stays in its own, and no import
circle exists. Also: no module over 400 lines, and no block of six lines written twice.

``python -m tests.test_layers`` prints the import graph, layer by layer (``--dot`` for Graphviz).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "evalnb"

# Lowest first. A module's layer is that of the longest prefix naming it.
LAYERS = (
    ("core", "evalnb.core"),              # types, errors, the resolved parameters, redaction, small helpers
    ("stats", "evalnb.stats"),            # every number a reviewer reads: pure functions over arrays
    ("views", "evalnb.views"),            # tables, estimates, figures, plots, words, progress
    ("records", "evalnb.records"),        # stores, manifest, fingerprint, lock, key scan, validation
    ("providers", "evalnb.providers"),    # where a call is made: SDK modules, retry, pacing, registry
    ("config", "evalnb.config"),          # the parameters, resolved and checked
    ("execution", "evalnb.execution"),    # one entry point that runs a stage's calls; batch/
    ("benchmarks", "evalnb.benchmarks"),  # one folder per benchmark: protocol, analysis
    ("evidence", "evalnb.evidence"),      # one run's items: evidence, Tasks page, headline, failures
    ("comparison", "evalnb.comparison"),  # several runs: compare, joint bootstrap, paired, planning
    ("judges", "evalnb.judges"),          # the judges' studies: scores section, retest, panel, bias
    ("pipeline", "evalnb.pipeline"),      # open_run, generate, judge, aggregate; rerun, accounting ...
    ("pages", "evalnb.pages"),            # report, statistics sections, render, paper, exports
    ("package", "evalnb"),                # the public names the notebooks call, imported lazily
    ("app", "evalnb.app"),                # the command line (it may call the public names too)
)
# Benchmarks import only the foundation (and their own folder), never the machinery that runs them.
BENCHMARKS_MAY_IMPORT = ("evalnb.core", "evalnb.stats", "evalnb.views", "evalnb.records", "evalnb.benchmarks")
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    matches = [(len(prefix), i) for i, (_, prefix) in enumerate(LAYERS)
               if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1]


def _target(name: str) -> str | None:
    """The evalnb module an imported name is (a module, or the package that defines it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, text: str | None = None) -> set[str]:
    """Every evalnb module ``module`` imports (its file, or ``text`` in its place), wherever in
    the file the import stands."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8") if text is None else text)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from evalnb.stats import intervals` imports the module evalnb.stats.intervals, and
            # also runs the package's __init__ (Python reads the name off the package first), so
            # a circle through an __init__ that imports its own modules is an import circle too.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                     for alias in node.names]
            # (Not evalnb's own __init__: every import runs it first, and its imports are lazy.)
            if base != "evalnb" and base in MODULES and MODULES[base].name == "__init__.py":
                names.append(base)
        else:
            continue
        for name in names:
            target = _target(name) if name.startswith("evalnb") else None
            if target and target != module:
                found.add(target)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer() -> None:
    assert all(layer_of(m) is not None for m in MODULES)


def test_no_import_goes_up_a_layer() -> None:
    upward = sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
                    for m, targets in GRAPH.items() for t in targets if layer_of(t) > layer_of(m))
    assert not upward, "\n".join(upward)


def test_benchmarks_import_only_core() -> None:
    bad = sorted(f"{m} imports {t}" for m, targets in GRAPH.items() if m.startswith("evalnb.benchmarks")
                 for t in targets if not t.startswith(BENCHMARKS_MAY_IMPORT))
    assert not bad, "\n".join(bad)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_a_circle_through_a_package_init_is_found() -> None:
    # `from PACKAGE import submodule` runs PACKAGE/__init__ first; wildtrace's __init__ imports
    # analysis, which imports protocol: written that way in protocol, it closes a circle.
    module = "evalnb.benchmarks.wildtrace.protocol"
    text = MODULES[module].read_text("utf-8")
    assert "import evalnb.benchmarks.wildtrace.repeats as repeats" in text
    circled = text.replace("import evalnb.benchmarks.wildtrace.repeats as repeats",
                           "from evalnb.benchmarks.wildtrace import repeats")
    graph = {**GRAPH, module: imports_of(module, circled)}
    assert "evalnb.benchmarks.wildtrace" in graph[module]
    assert any(module in circle and "evalnb.benchmarks.wildtrace" in circle for circle in cycles(graph))


def test_the_import_reader_sees_function_local_and_type_checking_imports(tmp_path: Path) -> None:
    module = "evalnb.evidence.run_evidence"   # its evidence import is function-local
    text = MODULES[module].read_text("utf-8")
    assert "    from evalnb.evidence import items as evidence" in text   # a function-local import
    assert "evalnb.evidence.items" in GRAPH[module]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module: str) -> None:
    lines = MODULES[module].read_text("utf-8").count("\n")
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"


# --- no block written twice --------------------------------------------------------------------------

RUN = 6


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, folded text) of the lines that carry code: no blanks, comments, lone
    punctuation, imports or docstring-only lines."""
    out = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        text = " ".join(line.split())
        if (not text or text.startswith(("#", "import ", "from ")) or re.fullmatch(r"[\])}(\[{,:]+", text)
                or text in ('"""', "'''")):
            continue
        out.append((n, text))
    return out


def same_text_blocks() -> list[str]:
    seen: dict[tuple[str, ...], tuple[str, int]] = {}
    found = []
    for path in MODULES.values():
        lines = _code_lines(path)
        for i in range(len(lines) - RUN + 1):
            key = tuple(t for _, t in lines[i:i + RUN])
            where = (str(path.relative_to(ROOT)), lines[i][0])
            if key in seen and seen[key][0] != where[0]:
                found.append(f"{seen[key][0]}:{seen[key][1]} ~ {where[0]}:{where[1]}")
            seen.setdefault(key, where)
    return found


def test_no_block_of_six_lines_stands_in_two_modules() -> None:
    assert same_text_blocks() == []


# --- the picture -------------------------------------------------------------------------------------

def print_graph(dot: bool = False) -> None:
    if dot:
        print("digraph evalnb {\n  rankdir=BT; node [shape=box, fontsize=10];")
        for i, (name, _) in enumerate(LAYERS):
            members = [m for m in MODULES if layer_of(m) == i]
            print(f'  subgraph cluster_{name} {{ label="{i + 1} {name}"; '
                  + " ".join(f'"{m}";' for m in members) + " }")
        for m, targets in sorted(GRAPH.items()):
            for t in sorted(targets):
                print(f'  "{m}" -> "{t}";')
        print("}")
        return
    by_layer: dict[int, list[str]] = defaultdict(list)
    for m in MODULES:
        by_layer[layer_of(m)].append(m)
    for i in sorted(by_layer, reverse=True):
        print(f"layer {i + 1}: {LAYERS[i][0]}")
        for m in sorted(by_layer[i]):
            targets = ", ".join(sorted(t.removeprefix("evalnb.") for t in GRAPH[m])) or "-"
            print(f"  {m.removeprefix('evalnb.') or 'evalnb'} -> {targets}")
    found = cycles(GRAPH)
    print(f"circles: {found or 'none'}")


if __name__ == "__main__":
    print_graph(dot="--dot" in sys.argv)
