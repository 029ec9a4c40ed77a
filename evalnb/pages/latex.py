"""A table and the figures as LaTeX that compiles as it is ``\\input``: booktabs tables that fit
the page, and ``figures.tex``.

Fitting (``--fit``):

- ``text`` (the default): ``\\small``, narrower column gaps, and the tabular scaled down to the
  text width only when it is wider (never scaled up): every default export fits a standard
  one-column ``article`` without an option;
- ``column``: ``\\footnotesize`` and the same shrink-if-wider to the column of a two-column
  paper (``\\linewidth`` inside a float is the column's width);
- ``landscape``: the table on a page of its own, turned (``sidewaystable``, from the
  ``rotating`` package), for a table with every column.

A model's name too long for the fit (:data:`LONG_NAME`) is written ``M1``, ``M2`` ... in every
cell that names it, with the key in the caption: a table keeps its size rather than shrinking
to illegible type. Every abbreviation a header uses is defined in a note under the caption
(:func:`evalnb.views.labels.abbreviations`). Packages a document needs: ``booktabs`` and
``graphicx`` (``rotating`` for ``landscape``), written in the export's first lines.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalnb.views.labels import abbreviations
from evalnb.views.tables import View

FITS = ("text", "column", "landscape")
PACKAGES = "% needs \\usepackage{booktabs,graphicx} (and \\usepackage{rotating} for --fit landscape)\n"
_SIZE = {"text": "\\small", "column": "\\footnotesize", "landscape": "\\small"}
_LATEX_SPECIAL = re.compile(r"([&%$#_{}])")


def latex_text(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (it prints as it reads)."""
    text = text.replace("\\", r"\textbackslash{}").replace("~", r"\textasciitilde{}").replace("^", r"\^{}")
    return _LATEX_SPECIAL.sub(r"\\\1", text).replace("|", r"\textbar{}").replace("<", r"\textless{}") \
        .replace(">", r"\textgreater{}")


def table_latex(view: View, caption: str, label: str, fit: str = "text") -> str:
    """One booktabs table: caption (with its abbreviations defined) and label above, text
    columns left and numbers right, fitted as ``fit`` says (the module)."""
    frame = view.frame
    if not len(frame.columns):
        return ""
    frame, key = abbreviated(frame, LONG_NAME[fit])
    heads = [str(c) for c in frame.columns]
    note = " ".join(t for t in (abbreviations(heads), key) if t)
    spec = "".join("r" if n else "l" for n in view.numeric)
    rows = [" & ".join(latex_text(str(v)) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    env = "sidewaystable" if fit == "landscape" else "table"
    lines = [f"\\begin{{{env}}}" + ("" if fit == "landscape" else "[htbp]"), "\\centering",
             f"{_SIZE[fit]}\\setlength{{\\tabcolsep}}{{4pt}}",
             f"\\caption{{{latex_text(caption + (' ' + note if note else ''))}}}", f"\\label{{{label}}}",
             "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%",
             f"\\begin{{tabular}}{{{spec}}}", "\\toprule", " & ".join(latex_text(h) for h in heads) + r" \\",
             "\\midrule", *rows, "\\bottomrule", "\\end{tabular}}", f"\\end{{{env}}}", ""]
    return "\n".join(lines)


# A model's name longer than this (characters) is written M1, M2 ... with a key in the caption:
# measured on three models with names of 29 and 37 characters, whole names made the default
# tables 1.3-2.2 times the text width (scaled to illegible type), abbreviated 0.5-1.5 times.
LONG_NAME = {"text": 16, "column": 12, "landscape": 60}
NAMED = ("model", "model A", "model B", "contestant", "judge left out")


def abbreviated(frame: Any, longest: int) -> tuple[Any, str]:
    """``frame`` with each model name longer than ``longest`` written ``M1``, ``M2`` ... (in
    every cell that names it, a verdict's "NAME ahead" too), and the key to them; the names in
    the order the table first shows them."""
    columns = [c for c in frame.columns if str(c) in NAMED]
    names = [n for n in dict.fromkeys(str(v).removesuffix(" [offline]") for c in columns for v in frame[c])
             if len(n) > longest]
    if not names:
        return frame, ""
    short = {n: f"M{i}" for i, n in enumerate(names, start=1)}
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    out = frame.map(lambda v: pattern.sub(lambda m: short[m.group(0)], v) if isinstance(v, str) else v)
    return out, "Models: " + "; ".join(f"{s} = {n}" for n, s in short.items()) + "."


def png_caption(png: Path) -> str:
    """The caption a figure's PNG carries (its ``Description`` text chunk; empty if none)."""
    data = png.read_bytes()
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Description\0"):
            return body.split(b"\0", 1)[1].decode("latin-1")
        if kind == b"iTXt" and body.startswith(b"Description\0"):
            compressed, rest = body[12], body[14:]
            text = rest.split(b"\0", 2)[2]   # language tag, translated keyword, then the text
            return (zlib.decompress(text) if compressed else text).decode("utf-8")
        at += 12 + length
    return ""


def figures_latex(names: Sequence[str], captions: Sequence[str], folder: str = "figures") -> str:
    """One ``figure`` environment per figure: ``\\includegraphics`` of ``folder/NAME.pdf`` at
    the column's width, its caption, and a label ``fig:evalnb-NAME``."""
    blocks = [PACKAGES]
    for name, caption in zip(names, captions):
        blocks.append("\n".join(["\\begin{figure}[htbp]", "\\centering",
                                 f"\\includegraphics[width=\\linewidth]{{{folder}/{name}.pdf}}",
                                 f"\\caption{{{latex_text(caption)}}}", f"\\label{{fig:evalnb-{name}}}",
                                 "\\end{figure}", ""]))
    return "\n".join(blocks)
