"""Inline SVG charts for the run report: horizontal bars, stacked bars, column histograms.

Pure Python, no dependencies. Every function returns one self-contained `<svg>` string
(with a `<title>` per mark, so hovering shows the exact value); all text is escaped.
Output is a function of the inputs only (no random ids, no clock), so reports diff cleanly.
"""
from __future__ import annotations

from html import escape
from typing import Sequence

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif"
COLORS = {"kept": "#2e7d32", "rejected": "#c62828", "bar": "#1565c0", "alt": "#ef6c00", "grid": "#e0e0e0",
          "text": "#212121", "muted": "#757575"}


def _fmt(v: float) -> str:
    """Compact number: 1234 -> 1,234; 1.5e6 -> 1.5M; floats to 3 significant digits."""
    if isinstance(v, float) and not v.is_integer():
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}"
    v = int(v)
    for unit, size in (("G", 10**9), ("M", 10**6)):
        if abs(v) >= size * 10:
            return f"{v / size:.1f}{unit}"
    return f"{v:,}"


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" style="{FONT}">'
            f'<title>{escape(label)}</title>{"".join(body)}</svg>')


def hbar(items: Sequence[tuple[str, float]], *, title: str, color: str = COLORS["bar"], width: int = 640,
         unit: str = "", label_width: int = 230) -> str:
    """One horizontal bar per (label, value), in the given order; values must be >= 0."""
    row, top = 22, 8
    plot = width - label_width - 70
    vmax = max([v for _, v in items] + [0]) or 1
    body = []
    for i, (label, value) in enumerate(items):
        y = top + i * row
        w = max(plot * value / vmax, 1 if value > 0 else 0)
        short = label if len(label) <= 34 else label[:32] + "…"
        body.append(f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end" font-size="12" '
                    f'fill="{COLORS["text"]}">{escape(short)}</text>')
        body.append(f'<rect x="{label_width}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{color}">'
                    f'<title>{escape(label)}: {_fmt(value)}{escape(unit)}</title></rect>')
        body.append(f'<text x="{label_width + w + 5:.1f}" y="{y + 14}" font-size="12" '
                    f'fill="{COLORS["muted"]}">{_fmt(value)}{escape(unit)}</text>')
    return _svg(width, top * 2 + row * len(items), body, title)


def stacked_hbar(items: Sequence[tuple[str, Sequence[float]]], series: Sequence[tuple[str, str]], *,
                 title: str, width: int = 640, label_width: int = 130) -> str:
    """Horizontal bars split into segments: items (label, [v per series]), series (name, color).

    Every bar is drawn on one scale (the largest total), so a stage that loses rows is
    visibly shorter than the one before it. A legend sits on top.
    """
    row, top = 26, 30
    plot = width - label_width - 90
    vmax = max([sum(vs) for _, vs in items] + [0]) or 1
    body = []
    x = label_width
    for name, color in series:
        body.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{color}"/>'
                    f'<text x="{x + 16}" y="18" font-size="12" fill="{COLORS["text"]}">{escape(name)}</text>')
        x += 24 + 8 * len(name)
    for i, (label, values) in enumerate(items):
        y = top + i * row
        body.append(f'<text x="{label_width - 6}" y="{y + 16}" text-anchor="end" font-size="12" '
                    f'fill="{COLORS["text"]}">{escape(label)}</text>')
        x = float(label_width)
        for (name, color), v in zip(series, values):
            w = plot * v / vmax
            if w > 0:
                body.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row - 6}" '
                            f'fill="{color}"><title>{escape(label)} {escape(name)}: {_fmt(v)}</title></rect>')
            x += w
        body.append(f'<text x="{x + 5:.1f}" y="{y + 16}" font-size="12" fill="{COLORS["muted"]}">'
                    f'{" / ".join(_fmt(v) for v in values)}</text>')
    return _svg(width, top + row * len(items) + 6, body, title)


def columns(items: Sequence[tuple[str, float]], *, title: str, x_label: str, y_label: str,
            color: str = COLORS["bar"], width: int = 640, height: int = 220, log: bool = False,
            reference: float | None = None, reference_label: str = "") -> str:
    """Vertical columns (a histogram or one column per shard), with a y axis and gridlines.

    `log=True` scales heights by log10(1 + v) (for counts spanning decades).
    `reference` draws a dashed horizontal line (e.g. the mean shard size).
    """
    import math

    left, right, top, bottom = 56, 12, 12, 40
    pw, ph = width - left - right, height - top - bottom
    vals = [v for _, v in items]
    vmax = max(vals + [reference or 0, 0]) or 1
    scale = (lambda v: math.log10(1 + v) / math.log10(1 + vmax)) if log else (lambda v: v / vmax)
    body = []
    for k in range(5):  # gridlines and y tick labels
        frac = k / 4
        y = top + ph - ph * frac
        tick = (10 ** (frac * math.log10(1 + vmax)) - 1) if log else vmax * frac
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{COLORS["grid"]}"/>'
                    f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10" '
                    f'fill="{COLORS["muted"]}">{_fmt(round(tick, 1) if tick < 10 else round(tick))}</text>')
    n = max(len(items), 1)
    slot = pw / n
    gap = min(slot * 0.15, 4)
    every = max(1, math.ceil(n / 16))
    for i, (label, v) in enumerate(items):
        h = ph * scale(v)
        x = left + i * slot + gap / 2
        body.append(f'<rect x="{x:.1f}" y="{top + ph - h:.1f}" width="{max(slot - gap, 0.5):.1f}" height="{h:.1f}" '
                    f'fill="{color}"><title>{escape(x_label)} {escape(str(label))}: {_fmt(v)}</title></rect>')
        if i % every == 0:
            body.append(f'<text x="{x + (slot - gap) / 2:.1f}" y="{top + ph + 14}" text-anchor="middle" '
                        f'font-size="10" fill="{COLORS["muted"]}">{escape(str(label))}</text>')
    if reference is not None and reference > 0:
        y = top + ph - ph * scale(reference)
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{COLORS["alt"]}" '
                    f'stroke-dasharray="5,4" stroke-width="1.5"><title>{escape(reference_label)}: '
                    f'{_fmt(reference)}</title></line>')
    body.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="{COLORS["muted"]}"/>'
                f'<line x1="{left}" x2="{width - right}" y1="{top + ph}" y2="{top + ph}" stroke="{COLORS["muted"]}"/>')
    body.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle" font-size="11" '
                f'fill="{COLORS["text"]}">{escape(x_label)}</text>')
    body.append(f'<text x="12" y="{top + ph / 2:.1f}" text-anchor="middle" font-size="11" fill="{COLORS["text"]}" '
                f'transform="rotate(-90 12 {top + ph / 2:.1f})">{escape(y_label)}{" (log)" if log else ""}</text>')
    return _svg(width, height, body, title)
