"""Figures without pyplot and without a backend.

Every evalnb figure is a :class:`ReportFigure`: a ``matplotlib.figure.Figure`` made with the
object API, so it never touches pyplot's figure registry or the backend the researcher chose
(nothing here calls ``matplotlib.use``). It is saved headless as PNG and PDF, and returned as
the value of the notebook cell, where it shows as ``image/png`` under any backend: Jupyter's
inline backend prints it as it prints any Figure, and elsewhere (``MPLBACKEND=Agg``
inherited by a kernel, or no pyplot imported at all) IPython uses its ``_repr_png_``.

The PNG is drawn at 150 dpi, crisp on a high-density screen, and displayed at the size an
ordinary matplotlib figure of the same ``figsize`` takes in the notebook (matplotlib's 100
dpi, the inline backend's): the image's ``width`` and ``height`` go with it as display
metadata, which JupyterLab and the executed record's HTML both use. Shown at its pixel size,
a 6-inch figure took 900 pixels, half as wide again as any other figure beside it.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

PNG_DPI = 150
SCREEN_DPI = 100   # matplotlib's figure.dpi: the size of any other figure in a notebook


class ReportFigure(Figure):
    """A Figure that displays itself as PNG in Jupyter, whatever the matplotlib backend."""

    saved: dict[str, Path]   # format -> file, once saved with save_figure
    saved_png: bytes | None = None   # what save_figure wrote: the notebook shows the same bytes

    def png(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=PNG_DPI, bbox_inches="tight")
        return buffer.getvalue()

    def _repr_png_(self) -> tuple[bytes, dict[str, int]]:
        # A figure is finished once saved: drawing it again would only cost time.
        data = self.saved_png or self.png()
        return data, display_size(data)


def display_size(png: bytes) -> dict[str, int]:
    """``{"width": ..., "height": ...}`` in CSS pixels: the PNG's pixels at SCREEN_DPI."""
    width, height = struct.unpack(">II", png[16:24])   # the IHDR chunk, first in every PNG
    return {"width": round(width * SCREEN_DPI / PNG_DPI), "height": round(height * SCREEN_DPI / PNG_DPI)}


def new_figure(figsize: tuple[float, float], **kwargs: Any) -> ReportFigure:
    fig = ReportFigure(figsize=figsize, **kwargs)
    fig.saved = {}
    fig.saved_png = None
    return fig


def save_figure(fig: ReportFigure, folder: Path, name: str) -> ReportFigure:
    """Write ``fig`` to ``folder/name.png`` and ``folder/name.pdf`` and return it for display."""
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"{name}.pdf", bbox_inches="tight")
    fig.saved_png = fig.png()
    (folder / f"{name}.png").write_bytes(fig.saved_png)
    fig.saved = {"png": folder / f"{name}.png", "pdf": folder / f"{name}.pdf"}
    return fig


def prepare_drawing() -> None:
    """Draw a throwaway figure as PNG and PDF in memory, so that the first real figure does
    not pay for loading fonts and the two renderers (``evalnb run`` does this in the
    background while the calls run). Touches no global setting and keeps nothing."""
    fig = new_figure((1, 1))
    fig.add_subplot().set_title("0")
    fig.savefig(io.BytesIO(), format="pdf")
    fig.png()
