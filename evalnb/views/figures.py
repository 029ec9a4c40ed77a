"""Figures a journal accepts, without pyplot and without a backend.

Every evalnb figure is a :class:`ReportFigure`: a ``matplotlib.figure.Figure`` made with the
object API, so it never touches pyplot's figure registry or the backend the researcher chose
(nothing here calls ``matplotlib.use``). It is saved headless as a vector PDF and a 300-dpi
PNG, and returned as the value of the notebook cell.

The style is evalnb's own (:data:`STYLE`, applied by :func:`figure_style` while a figure is
built, drawn and saved; never a change to the researcher's ``rcParams``):

- fonts embedded in the PDF as TrueType (Type 42), never Type 3 (ACM's and IEEE's checks reject
  Type 3; ``pdffonts`` lists what a file embeds);
- a width for one column (:data:`ONE_COLUMN`, 3.3 in) or two (:data:`TWO_COLUMNS`, 7 in),
  chosen per figure, with fonts at 7-8 pt, the size of a caption;
- the Okabe-Ito colour-blind-safe palette (:data:`PALETTE`); an offline approximation drawn
  grey and hatched (:data:`OFFLINE`);
- no title or parameters inside the figure: the figure's ``caption`` (what it shows, the
  bootstrap settings, the offline note) is written beside it in the notebook (an HTML
  ``<figure>`` with ``<figcaption>``) and into the files' metadata (PDF ``Subject``, PNG
  ``Description``).

In the notebook the figure is one output: a ``text/html`` ``<figure>`` whose ``<img>`` holds the
PNG (base64, the bytes :func:`save_figure` wrote) under its ``<figcaption>``, and the caption as
``text/plain``. Decision: the PNG is in the output once. An ``image/png`` beside the HTML would be
a second copy of the same bytes that JupyterLab, nbconvert's HTML and ``evalnb render`` never
show (they show the HTML, the only one of the two that can carry the caption): it doubled the
bytes each figure takes in an executed record. A frontend that draws no HTML (a terminal console,
nbconvert's LaTeX) shows the caption; the figure's files are in ``figures/``.

The figure publishes that bundle itself (``_ipython_display_``): a kernel whose inline backend
is active (``%matplotlib inline``, or once pyplot has drawn) registers its own PNG printer for
every ``Figure``, which IPython would otherwise call beside ``_repr_mimebundle_``, adding a
PNG of its own, redrawn outside the style. It shows at the size an ordinary matplotlib figure of the
same ``figsize`` takes (matplotlib's 100 dpi, the inline backend's): the ``<img>``'s ``width``
and ``height``.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import html
import io
import os
import secrets
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from matplotlib.figure import Figure

PNG_DPI = 300
SCREEN_DPI = 100   # matplotlib's figure.dpi: the size of any other figure in a notebook
ONE_COLUMN = 3.3   # inches: one column of a two-column paper (ACM, IEEE)
TWO_COLUMNS = 7.0
# Okabe & Ito (2008), "Color Universal Design": distinguishable under every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
# an offline approximation's bars: grey, hatched with dark lines thick enough to survive print (1 pt at 300 dpi)
OFFLINE: dict[str, Any] = {"facecolor": "#BBBBBB", "edgecolor": "#333333", "hatch": "///", "hatch_linewidth": 1.0}
FIGURE_CLASS = "evalnb-figure"   # the notebook output's <figure class=...>
OFFLINE_NOTE = "Grey hatched: an offline approximation, not comparable with the paper."

STYLE: dict[str, Any] = {
    "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none",
    "font.family": "DejaVu Sans", "mathtext.fontset": "dejavusans",
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
    "axes.linewidth": 0.6, "lines.linewidth": 1.0, "patch.linewidth": 0.5, "hatch.linewidth": 0.5,
    "xtick.major.width": 0.6, "ytick.major.width": 0.6, "figure.dpi": SCREEN_DPI, "savefig.dpi": PNG_DPI,
}

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """evalnb's figure style for the figures built inside it; the caller's rcParams are
    restored on leaving (matplotlib's ``rc_context``)."""
    import matplotlib
    from cycler import cycler

    with matplotlib.rc_context({**STYLE, "axes.prop_cycle": cycler(color=list(PALETTE))}):   # type: ignore[dict-item]
        yield


def styled(function: F) -> F:
    """``function`` (which builds a figure) run inside :func:`figure_style`."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with figure_style():
            return function(*args, **kwargs)
    return wrapper   # type: ignore[return-value]


class ReportFigure(Figure):
    """A Figure with a caption, displayed in Jupyter as a captioned HTML figure holding its PNG
    once, whatever the matplotlib backend."""

    saved: dict[str, Path]   # format -> file, once saved with save_figure
    saved_png: bytes | None = None   # what save_figure wrote: the notebook shows the same bytes
    caption: str = ""

    def png(self) -> bytes:
        buffer = io.BytesIO()
        with figure_style():
            self.savefig(buffer, format="png", dpi=PNG_DPI,
                         metadata={"Description": self.caption} if self.caption else None)
        return buffer.getvalue()

    def _repr_png_(self) -> tuple[bytes, dict[str, int]]:
        # A figure is finished once saved: drawing it again would only cost time.
        data = self.saved_png or self.png()
        return data, display_size(data)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """What the notebook keeps: the captioned HTML figure (its ``<img>`` the one copy of the
        PNG) and the caption as text."""
        data, size = self._repr_png_()
        encoded = base64.b64encode(data).decode()
        caption = f"<figcaption>{html.escape(self.caption)}</figcaption>" if self.caption else ""
        page = (f'<figure class="{FIGURE_CLASS}"><img src="data:image/png;base64,{encoded}" '
                f'width="{size["width"]}" height="{size["height"]}" alt="{html.escape(self.caption)}">'
                f"{caption}</figure>")
        return {"text/html": page, "text/plain": self.caption or repr(self)}

    def _ipython_display_(self) -> None:
        # Published as it is: IPython's per-type printers (the inline backend's for Figure) add nothing.
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True)


def display_size(png: bytes) -> dict[str, int]:
    """``{"width": ..., "height": ...}`` in CSS pixels: the PNG's pixels at SCREEN_DPI."""
    width, height = struct.unpack(">II", png[16:24])   # the IHDR chunk, first in every PNG
    return {"width": round(width * SCREEN_DPI / PNG_DPI), "height": round(height * SCREEN_DPI / PNG_DPI)}


def new_figure(figsize: tuple[float, float], caption: str = "", **kwargs: Any) -> ReportFigure:
    """A figure (``figsize`` in inches: :data:`ONE_COLUMN` or :data:`TWO_COLUMNS` wide) with its
    caption; build it inside :func:`figure_style` (or a :func:`styled` function)."""
    kwargs.setdefault("layout", "constrained")
    fig = ReportFigure(figsize=figsize, **kwargs)
    fig.saved = {}
    fig.saved_png = None
    fig.caption = caption
    return fig


def save_figure(fig: ReportFigure, folder: Path, name: str) -> ReportFigure:
    """Write ``fig`` to ``folder/name.png`` (300 dpi) and ``folder/name.pdf`` (vector,
    TrueType fonts), its caption in both files' metadata, and return it for display."""
    folder.mkdir(parents=True, exist_ok=True)
    caption = getattr(fig, "caption", "")
    with figure_style():
        pdf = io.BytesIO()
        fig.savefig(pdf, format="pdf", metadata={"Title": name, "Subject": caption, "CreationDate": None})
        fig.saved_png = fig.png()
    write_whole(folder / f"{name}.pdf", pdf.getvalue())
    write_whole(folder / f"{name}.png", fig.saved_png)
    fig.saved = {"png": folder / f"{name}.png", "pdf": folder / f"{name}.pdf"}
    return fig


def write_whole(path: Path, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all: written under a temporary name in the same
    folder, then renamed over it, so a process killed while a figure is saved leaves the old
    file or the new one, never an empty or half-written one. The temporary file is created
    with mode 0666 less the umask, as any new file (the rename keeps its mode)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def zero_marker(ax: Any, x: float, y: float, *, label: str = "0", horizontal: bool = True) -> None:
    """A value of exactly 0 as a point on the axis with its label: a bar of length 0 would
    vanish into the spine and read as missing data."""
    ax.plot([x], [y], marker="D", markersize=2.5, color="black", clip_on=False, zorder=4)
    if horizontal:
        ax.annotate(label, (x, y), xytext=(4, 0), textcoords="offset points", va="center", ha="left", fontsize=6)
    else:
        ax.annotate(label, (x, y), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=6)


def value_labels(ax: Any, bars: Any, values: Sequence[float | None], ends: Sequence[float | None] | None = None, *,
                 horizontal: bool = False, decimals: int = 3) -> None:
    """Each bar's value written beyond its end (``ends``: where its interval ends, so the text
    clears the whisker); a zero as :func:`zero_marker`."""
    for i, (bar, value) in enumerate(zip(bars, values)):
        if value is None:
            continue
        text = f"{value:.{decimals}f}"
        end = ends[i] if ends is not None and ends[i] is not None else value
        if horizontal:
            y = bar.get_y() + bar.get_height() / 2
            if value == 0 and end == 0:
                zero_marker(ax, 0, y, label=text)
                continue
            if value == 0:
                ax.plot([0], [y], marker="D", markersize=2.5, color="black", clip_on=False, zorder=4)
            ax.annotate(text, (end, y), xytext=(3, 0), textcoords="offset points", va="center", ha="left", fontsize=6)
        else:
            x = bar.get_x() + bar.get_width() / 2
            if value == 0 and end == 0:
                zero_marker(ax, x, 0, label=text, horizontal=False)
                continue
            if value == 0:
                ax.plot([x], [0], marker="D", markersize=2.5, color="black", clip_on=False, zorder=4)
            ax.annotate(text, (x, end), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=6)


def with_offline_note(text: str, offline: bool) -> str:
    """A caption, with the offline note when the numbers are an offline approximation."""
    return f"{text} Offline approximation, not comparable with the paper." if offline else text


def integer_ticks(axis: Any) -> None:
    """Whole-number ticks only (a count of items has no half)."""
    from matplotlib.ticker import MaxNLocator
    axis.set_major_locator(MaxNLocator(integer=True))


def prepare_drawing() -> None:
    """Draw a throwaway figure as PNG and PDF in memory, so that the first real figure does
    not pay for loading fonts and the two renderers (``evalnb run`` does this in the
    background while the calls run). Touches no global setting and keeps nothing."""
    with figure_style():
        fig = new_figure((1, 1))
        fig.add_subplot().set_title("0")
        fig.savefig(io.BytesIO(), format="pdf")
        fig.png()
