"""The report's plots (matplotlib, the optional extra aclnn-cli[report]): one PNG per case, its panels side by side.

- error against each input the kernel reads: each sample element's error relative to the op's term scale
  (what the default gate judges after relief), coloured ok / forgiven (over the limit relative to |golden|,
  within it relative to the terms that cancel) / flagged; the plain relative error in grey behind;
- the signed ulp histogram: toward zero left, away from zero right, so bias is a one-sided histogram;
- the error map (views of 2+ dims): the largest ulp error per block, flagged blocks crossed.

Only this module imports matplotlib, and only the HTML report imports this module. It draws on a Figure
with an Agg canvas of its own: no pyplot, no global backend, safe beside any other use of matplotlib.
Drawing text is most of matplotlib's time, so the figure has few words: few ticks with plain-text
labels (no mathtext), one legend, axis labels only where they differ.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib import colors, ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..tensor.dtypes import DTYPES
from .errordata import ErrorData
from .palette import AWAY, EXACT, FLAGGED, FORGIVEN, OK, PLAIN, TOWARD

PANEL = (3.3, 2.5)  # inches per panel
DPI = 80
_SMALL = 7  # font size of everything


def case_figure(data: ErrorData, inputs: list[str], scale: np.ndarray | None, limit: float | None) -> bytes:
    """The PNG of one case's plots. inputs: the inputs to plot against (those the kernel reads); scale: the
    op's term scale per sample element (None: unknown or not what the standard judges); limit: the
    standard's per-element relative bound (None: it has none). The page explains the colours (palette.py)."""
    layout = _layout(len(inputs), data.map is not None)
    for ax, name in zip(layout.scatters, inputs):
        _error_against_input(ax, data, name, scale, limit)
    _histogram(layout.histogram, data)
    if data.map is not None:
        _error_map(layout, data)
    for ax in layout.fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_locator(ticker.NullLocator())
            if axis.get_scale() == "log":
                axis.set_major_locator(ticker.LogLocator(numticks=4))
                axis.set_major_formatter(_POWERS)
            elif axis.get_scale() == "linear" and not isinstance(axis.get_major_locator(), ticker.FixedLocator):
                axis.set_major_locator(ticker.MaxNLocator(4))
    buf = io.BytesIO()
    layout.canvas.print_png(buf)
    return buf.getvalue()


class _Layout:
    """A figure of one panel arrangement, reused from case to case in a process: building axes and their
    ticks anew costs as much as drawing them. reset() leaves the axes as they were built."""

    USES = 200  # then built anew (whatever matplotlib caches per figure stays bounded)

    def __init__(self, n_inputs: int, with_map: bool) -> None:
        panels = n_inputs + 1 + with_map
        width = PANEL[0] * max(panels, 2)
        self.fig = Figure(figsize=(width, PANEL[1]), dpi=DPI)
        self.canvas = FigureCanvasAgg(self.fig)
        # fixed margins (inches as fractions): tight_layout would draw the whole figure once more to measure it
        self.fig.subplots_adjust(left=0.45 / width, right=1 - 0.55 / width, bottom=0.2, top=0.9, wspace=0.3)
        axes = list(self.fig.subplots(1, panels, squeeze=False)[0])
        self.scatters, self.histogram = axes[:n_inputs], axes[n_inputs]
        self.map = axes[-1] if with_map else None
        self.image = self.colorbar = None
        self.uses = 0
        for ax in axes:
            ax.tick_params(labelsize=_SMALL, length=2, pad=1)

    def reset(self) -> None:
        for ax in (*self.scatters, self.histogram, self.map):
            if ax is None:
                continue
            for artist in (*ax.collections, *ax.patches, *ax.lines, *ax.texts):
                artist.remove()
            ax.set_xscale("linear")
            ax.set_yscale("linear")
            ax.set_title("")
            ax.set_xlabel("")
            ax.relim()
            ax.autoscale(True)
        self.uses += 1


_LAYOUTS: dict[tuple[int, bool], _Layout] = {}


def _layout(n_inputs: int, with_map: bool) -> _Layout:
    key = (n_inputs, with_map)
    layout = _LAYOUTS.get(key)
    if layout is None or layout.uses >= _Layout.USES:
        layout = _LAYOUTS[key] = _Layout(n_inputs, with_map)
    layout.reset()
    return layout


_POWERS = ticker.FuncFormatter(lambda v, pos: f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("1e0", "1"))
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _sup(k: int) -> str:
    """k as superscript characters (plain text: mathtext costs more than the rest of a panel)."""
    return str(k).translate(_SUPERSCRIPT)


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=_SMALL, color="#57606a")
    ax.set_xticks([])
    ax.set_yticks([])


def _error_against_input(ax, data: ErrorData, name: str, scale: np.ndarray | None, limit: float | None) -> None:
    x = data.inputs[name]
    shown = np.isfinite(x)
    hidden = int((~shown).sum())
    ax.set_xlabel(name + (f" ({hidden} non-finite not drawn)" if hidden else ""), fontsize=_SMALL, labelpad=1)
    if not shown.any():
        return _note(ax, f"no finite {name} in the sample")
    plain = data.relative_to(0.0)
    judged = plain if scale is None else data.relative_to(scale)
    special = data.flagged & ~(np.isfinite(data.actual) & np.isfinite(data.expected))
    judged_dtype = DTYPES.get(data.judged_dtype or "")
    bottom = 2.0 ** -((judged_dtype.precision if judged_dtype else 24) + 4)  # where a zero error sits on the log axis
    top = max(float(np.max(np.where(np.isfinite(plain), plain, 0), initial=0)), limit or 0, bottom * 16) * 4
    clip = lambda y: np.clip(np.nan_to_num(y, nan=top, posinf=top), bottom, top)
    forgiven = ~data.flagged & (plain >= limit) if limit is not None and scale is not None else np.zeros(x.size, bool)
    behind = (shown & (plain > judged)) if scale is not None else np.zeros(x.size, bool)
    colour = np.where(data.flagged, FLAGGED, np.where(forgiven, FORGIVEN, OK))
    dots = shown & ~special  # (one scatter call for all dots, the grey ones first: calls cost more than points)
    ax.scatter(np.concatenate((x[behind], x[dots])), clip(np.concatenate((plain[behind], judged[dots]))),
               s=np.r_[np.full(int(behind.sum()), 6), np.full(int(dots.sum()), 9)],
               c=np.concatenate((np.full(int(behind.sum()), PLAIN), colour[dots])), lw=0)
    if (shown & special).any():
        ax.scatter(x[shown & special], np.full(int((shown & special).sum()), top), s=20, c=FLAGGED, marker="x", lw=1)
    if limit is not None:
        ax.axhline(limit, color=FLAGGED, lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_ylim(bottom / 2, top * 2)
    if np.max(np.abs(x[shown])) > 1e4:
        ax.set_xscale("symlog", linthresh=1.0)


def _histogram(ax, data: ErrorData) -> None:
    toward, away = dict(data.toward_zero), dict(data.away_from_zero)
    ks = sorted(set(toward) | set(away))
    ks = list(range(ks[0], ks[-1] + 1)) if ks else []
    counts = [toward.get(k, 0) for k in reversed(ks)] + [data.exact] + [away.get(k, 0) for k in ks]
    total = sum(counts)
    ax.set_xlabel("signed ulp error, log2 bins" + (f" ({data.nonfinite} non-finite)" if data.nonfinite else ""),
                  fontsize=_SMALL, labelpad=1)
    if not total:
        return _note(ax, "no finite elements compared")
    centre = len(ks)
    for colour, first, last in ((TOWARD, 0, centre), (EXACT, centre, centre + 1), (AWAY, centre + 1, len(counts))):
        if last > first:  # (one artist per colour: a bar each costs a patch each)
            ax.stairs(np.maximum(counts[first:last], 0.5), np.arange(first, last + 1) - 0.5, baseline=0.5, fill=True,
                      color=colour)
    ones = {centre - 1 - ks.index(0), centre + 1 + ks.index(0)} if 0 in ks and ks.index(0) >= 2 else set()  # +-1 ulp
    picks = sorted({0, centre, len(counts) - 1} | ones)
    label = lambda i: ("0" if i == centre else f"-2{_sup(ks[centre - 1 - i])}" if i < centre
                       else f"2{_sup(ks[i - centre - 1])}")
    ax.set_xticks(picks, [label(i) for i in picks])
    ax.set_yscale("log")
    ax.set_ylim(0.5, max(counts) * 2)
    share = lambda n: f"{100 * n / total:.0f}%"
    n_toward, n_away = sum(toward.values()), sum(away.values())
    ax.set_title(f"toward zero {share(n_toward)} | exact {share(data.exact)} | away {share(n_away)}",
                 fontsize=_SMALL, pad=2)


ULP_NORM = colors.LogNorm(vmin=0.5, vmax=2.0**30)  # one colour scale for every map: maps compare, no rescaling


def _error_map(layout: _Layout, data: ErrorData) -> None:
    m, ax = data.map, layout.map
    grid = np.where(m.ulp_max > 0, np.clip(m.ulp_max, ULP_NORM.vmin, ULP_NORM.vmax), np.nan)  # 0: the background
    if layout.image is None:
        ax.set_facecolor("#eeeeee")
        layout.image = ax.imshow(grid, norm=ULP_NORM, cmap="viridis", aspect="auto", interpolation="nearest")
        layout.colorbar = layout.fig.colorbar(layout.image, ax=ax, pad=0.02, fraction=0.08)
        powers = [0, 10, 20, 30]
        layout.colorbar.set_ticks([2.0**k for k in powers], labels=["1"] + [f"2{_sup(k)}" for k in powers[1:]])
        layout.colorbar.ax.yaxis.set_minor_locator(ticker.NullLocator())
        layout.colorbar.ax.tick_params(labelsize=_SMALL, length=2, pad=1)
    else:
        layout.image.set_data(grid)
    # Each cell spans a whole block, so a partial last block is drawn where it is (and cropped below),
    # under its crosses, not stretched to the view's edge.
    layout.image.set_extent((0, grid.shape[1] * m.block[1], grid.shape[0] * m.block[0], 0))
    if m.flagged is not None:
        r, c = np.nonzero(m.flagged)
        ax.scatter((c + 0.5) * m.block[1], (r + 0.5) * m.block[0], s=12, c=FLAGGED, marker="x", lw=0.8)
    ax.set_xlim(0, m.cols)
    ax.set_ylim(m.rows, 0)
    crossed = ", x: flagged" if m.flagged is not None else ""
    ax.set_title(f"largest ulp error per {m.block[0]}x{m.block[1]} block{crossed}", fontsize=_SMALL, pad=2)
    ax.set_xlabel("last dim (rows: the leading dims)", fontsize=_SMALL, labelpad=1)
