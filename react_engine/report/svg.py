"""Bar charts drawn as inline SVG: a report needs no plotting library."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .page import esc

__all__ = ["COLORS", "bar_chart"]

COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3")

_TOP, _BOTTOM, _LEFT, _RIGHT = 34, 46, 12, 12
"""Margins: the title above, the group labels (and legend) below."""


def _number(value: float) -> str:
    return f"{value:,.2f}" if value != int(value) else f"{int(value):,}"


def bar_chart(
    title: str,
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    width: int = 340,
    height: int = 220,
    label: Callable[[float], str] = _number,
    ceiling: float | None = None,
) -> str:
    """One ``<svg>`` chart: ``series`` is ``(name, one value per group)``; ``ceiling``: the top."""
    top = ceiling if ceiling is not None else max((v for _, vs in series for v in vs), default=0)
    top = top or 1.0
    legend = len(series) > 1
    bottom = _BOTTOM + (16 if legend else 0)
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - bottom
    slot = plot_w / max(len(groups), 1)
    bar_w = max(2.0, min(36.0, slot * 0.8 / max(len(series), 1)))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="13" '
        f'font-weight="600">{esc(title)}</text>',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{width - _RIGHT}" y2="{_TOP + plot_h}" '
        'stroke="#8c959f"/>',
    ]
    for g, group in enumerate(groups):
        start = _LEFT + g * slot + (slot - bar_w * len(series)) / 2
        for s, (name, values) in enumerate(series):
            value = float(values[g])
            h = plot_h * max(value, 0.0) / top
            x, y = start + s * bar_w, _TOP + plot_h - h
            color = COLORS[(g if not legend else s) % len(COLORS)]
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w - 1:.1f}" '
                f'height="{h:.1f}" fill="{color}" data-value="{value:g}">'
                f"<title>{esc(group)} · {esc(name)}: {esc(label(value))}</title></rect>"
            )
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                f'font-size="10">{esc(label(value))}</text>'
            )
        short = group if len(group) <= 18 else group[:17] + "…"
        parts.append(
            f'<text x="{_LEFT + (g + 0.5) * slot:.1f}" y="{_TOP + plot_h + 15}" '
            f'text-anchor="middle" font-size="10.5">{esc(short)}<title>{esc(group)}</title></text>'
        )
    if legend:
        x = float(_LEFT)
        for s, (name, _) in enumerate(series):
            y = height - 12
            color = COLORS[s % len(COLORS)]
            parts.append(
                f'<rect x="{x:.1f}" y="{y - 8}" width="9" height="9" fill="{color}"/>'
                f'<text x="{x + 12:.1f}" y="{y}" font-size="10.5">{esc(name)}</text>'
            )
            x += 22 + 6.2 * len(name)
    parts.append("</svg>")
    return "".join(parts)
