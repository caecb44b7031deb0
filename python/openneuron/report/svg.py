"""Inline SVG plots for the HTML report, drawn here so the page needs no library and no
network: a horizontal bar chart, and a line chart over time with event markers."""

from __future__ import annotations

import math
from html import escape

PALETTE = ["#3b6fb6", "#d9822b", "#2e9d5b", "#c23b3b", "#8256b8", "#8c6d4f", "#d45fa0",
           "#6f7a86", "#b8a72e"]
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def nice_ticks(hi: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 5 x 10^k) up to at least hi."""
    if hi <= 0:
        return [0.0, 1.0]
    raw = hi / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(hi / step - 1e-9)) + 1)]


def _open(title: str, width: int, height: int) -> list[str]:
    t = escape(title)
    return [f'<svg width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{t}" {FONT}>',
            f"<title>{t}</title>"]


def bar_chart(title: str, labels: list[str], values: list[float], fmt, width: int = 640) -> str:
    """One bar per label, longest first as given; fmt(value) is printed after the bar."""
    row, left, top = 24, 130, 8
    height = top * 2 + row * max(len(labels), 1)
    top_value = max(values, default=0) or 1
    span = width - left - 110
    out = _open(title, width, height)
    for i, (label, value) in enumerate(zip(labels, values)):
        y = top + i * row
        w = max(1.0, span * value / top_value) if value > 0 else 0
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect class="bar" x="{left}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" '
                   f'fill="{color}"><title>{escape(label)}: {escape(fmt(value))}</title></rect>')
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + 16}">{escape(fmt(value))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _downsample(xs: list[float], ys: list[float], limit: int) -> tuple[list, list]:
    """At most ~limit points, keeping each bucket's largest value so peaks stay visible."""
    if len(xs) <= limit:
        return xs, ys
    step = math.ceil(len(xs) / limit)
    keep_x, keep_y = [], []
    for i in range(0, len(xs), step):
        j = max(range(i, min(i + step, len(xs))), key=lambda k: ys[k])
        keep_x.append(xs[j])
        keep_y.append(ys[j])
    return keep_x, keep_y


def _legend(items: list[tuple[str, str, bool]], x0: int, width: int) -> tuple[list[str], int]:
    """Legend entries (name, colour, dashed) in rows that fit the width; (svg, rows)."""
    out, x, row = [], x0, 0
    for name, color, dashed in items:
        w = 34 + 7 * len(name)
        if x > x0 and x + w > width:
            x, row = x0, row + 1
        y = 14 + 18 * row
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 22}" y="{y}">{escape(name)}</text>')
        x += w
    return out, row + 1


def line_chart(title: str, series: list[tuple[str, list[float], list[float]]],
               markers: list[tuple[str, str, list[float]]], y_label: str, y_fmt,
               width: int = 540, height: int = 250) -> str:
    """Step lines (name, times, values) over seconds, and vertical event lines
    (name, colour, times), with a legend under the plot."""
    left, right, top, bottom = 70, 16, 12, 44
    pw, ph = width - left - right, height - top - bottom
    x_hi = max([max(xs, default=0) for _, xs, _ in series]
               + [max(ts, default=0) for _, _, ts in markers] + [1e-3])
    y_hi = max([max(ys, default=0) for _, _, ys in series] + [0])
    xt, yt = nice_ticks(x_hi), nice_ticks(y_hi, 4)
    x_hi, y_hi = xt[-1], yt[-1]

    def px(x):
        return left + pw * x / x_hi

    def py(y):
        return top + ph - ph * y / y_hi

    legend = [(name, PALETTE[i % len(PALETTE)], False) for i, (name, _, _) in enumerate(series)]
    legend += [(f"{name} ({len(times)})", color, True) for name, color, times in markers]
    legend_svg, legend_rows = _legend(legend, left, width)
    full_height = height + 18 * legend_rows
    out = _open(title, width, full_height)
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    for y in yt:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{escape(y_fmt(y))}</text>')
    for x in xt:
        out.append(f'<text x="{px(x):.1f}" y="{top + ph + 16}" text-anchor="middle">{x:g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{top + ph + 32}" text-anchor="middle">'
               f"seconds since the script started</text>")
    out.append(f'<text transform="translate(14 {top + ph / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    for i, (name, xs, ys) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        xs, ys = _downsample(xs, ys, 1500)
        points, last = [], None
        for x, y in zip(xs, ys):  # a step line: a sample holds until the next one
            if last is not None:
                points.append(f"{px(x):.1f},{py(last):.1f}")
            points.append(f"{px(x):.1f},{py(y):.1f}")
            last = y
        out.append(f'<polyline class="series" fill="none" stroke="{color}" stroke-width="1.5" '
                   f'points="{" ".join(points)}"><title>{escape(name)}</title></polyline>')
    for name, color, times in markers:
        for t in times:
            out.append(f'<line class="marker" x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top}" '
                       f'y2="{top + ph}" stroke="{color}" stroke-dasharray="4 3">'
                       f"<title>{escape(name)} at {t:.2f} s</title></line>")
    out.append(f'<g class="legend" transform="translate(0 {height})">')
    out += legend_svg
    out.append("</g></svg>")
    return "\n".join(out)
