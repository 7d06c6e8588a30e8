"""One self-contained HTML page of a ``locpriv assess`` result: inline SVG and CSS, one small
inline script, no network access (no external script, style sheet, font or image).

Sections: the release's measures; the risk–utility curve over k (information loss on the
written files against linkage and prosecutor risk, one point per k of ``--sweep``, plus the
assessed release); the class-size histogram; the loss per key attribute; the linkage risk of
each pass-through column; the classes left after intersecting earlier releases.

Every drawn point carries its values (``data-k``, ``data-il``, ``data-risk``); the inline script
writes each point's position on the rendered page (``data-px``, ``data-py``) and the number of
points drawn (``body[data-drawn]``), so a headless browser's DOM shows what was drawn.
"""

from __future__ import annotations

from html import escape
from typing import Any

from locpriv.tabular.risk.assess import MEASURES, sweep_il

W, H, PAD = 560, 300, 48
SERIES: tuple[tuple[str, str], ...] = (
    ("linkage", "#c0392b"),
    ("linkage_passthrough", "#8e44ad"),
    ("prosecutor", "#2471a3"),
)

_SCRIPT = """
window.addEventListener('load', function () {
  var pts = document.querySelectorAll('svg .pt');
  var drawn = 0;
  pts.forEach(function (p) {
    var r = p.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) { drawn += 1; }
    p.setAttribute('data-px', (r.left + r.width / 2).toFixed(1));
    p.setAttribute('data-py', (r.top + r.height / 2).toFixed(1));
  });
  document.body.setAttribute('data-drawn', String(drawn));
});
"""

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 70em; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #bbb; padding: 0.2em 0.6em; text-align: right; }
th { background: #eee; } td.name { text-align: left; }
svg { border: 1px solid #ddd; background: #fff; margin: 0.5em 0; }
.axis { stroke: #444; } .lbl { font-size: 11px; fill: #333; } .note { color: #a04000; }
"""


def _num(v: float | None, digits: int = 4) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = hi - lo if hi > lo else 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _curve(points: list[dict[str, Any]]) -> str:
    """Risk (y) against IL % (x), one polyline per measure of :data:`SERIES`."""
    xs = [p["il"] for p in points]
    ys = [p["measures"].get(name) for p in points for name, _ in SERIES]
    yv = [y for y in ys if y is not None] or [0.0]
    fx = _scale(min([*xs, 0.0]), max([*xs, 1e-09]), PAD, W - PAD / 2)
    fy = _scale(0.0, max(*yv, 1e-09), H - PAD, PAD / 2)
    out = [
        f'<svg id="curve" data-plot="curve" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg">',
        f'<line class="axis" x1="{PAD}" y1="{H - PAD}" x2="{W - PAD / 2}" y2="{H - PAD}"/>',
        f'<line class="axis" x1="{PAD}" y1="{H - PAD}" x2="{PAD}" y2="{PAD / 2}"/>',
        f'<text class="lbl" x="{W / 2}" y="{H - 10}">information loss on the written file (%)'
        "</text>",
        f'<text class="lbl" x="4" y="{PAD / 2 - 6}">risk (share)</text>',
        f'<text class="lbl" x="{PAD - 4}" y="{H - PAD + 14}">{min([*xs, 0.0]):.2f}</text>',
        f'<text class="lbl" x="{W - PAD}" y="{H - PAD + 14}">{max([*xs, 0.0]):.2f}</text>',
        f'<text class="lbl" x="2" y="{PAD / 2 + 10}">{max(yv):.3f}</text>',
    ]
    for j, (name, colour) in enumerate(SERIES):
        pts = [(p, p["measures"].get(name)) for p in points]
        pts = [(p, v) for p, v in pts if v is not None]
        if not pts:
            continue
        pts.sort(key=lambda t: t[0]["il"])
        path = " ".join(f"{fx(p['il']):.1f},{fy(v):.1f}" for p, v in pts)
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}" '
            f'data-series="{name}"/>'
        )
        for p, v in pts:
            cx, cy = fx(p["il"]), fy(v)
            out.append(
                f'<circle class="pt" data-series="{name}" data-k="{p["k"]}" '
                f'data-il="{p["il"]:.6g}" data-risk="{v:.6g}" cx="{cx:.1f}" cy="{cy:.1f}" '
                f'r="4" fill="{colour}"><title>{escape(p["label"])}: {name} {v:.4f}, '
                f"IL {p['il']:.3f} %</title></circle>"
            )
            if j == 0:
                out.append(
                    f'<text class="lbl" x="{cx + 5:.1f}" y="{cy - 6:.1f}">'
                    f"{escape(p['label'])}</text>"
                )
        out.append(
            f'<text class="lbl" x="{W - 170}" y="{PAD / 2 + 14 * j + 10}" '
            f'style="fill:{colour}">'
            f"● {name}</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


def _bars(pid: str, items: list[tuple[str, float]], unit: str) -> str:
    """Horizontal bars (one per item)."""
    if not items:
        return "<p>none</p>"
    top = max(v for _, v in items) or 1.0
    row = 22
    height = row * len(items) + 10
    out = [f'<svg id="{pid}" width="{W}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    for i, (name, v) in enumerate(items):
        w = (W - 220) * v / top
        y = 5 + i * row
        out.append(
            f'<text class="lbl" x="4" y="{y + 14}">{escape(name)}</text>'
            f'<rect class="bar" data-name="{escape(name)}" data-value="{v:.6g}" x="150" '
            f'y="{y}" width="{w:.1f}" height="{row - 6}" fill="#5d6d7e"/>'
            f'<text class="lbl" x="{155 + w:.1f}" y="{y + 14}">{v:.4g}{unit}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _histogram(sizes: dict[str, int], pid: str = "classes", what: str = "classes") -> str:
    items = sorted((int(s), c) for s, c in sizes.items())
    if not items:
        return "<p>none</p>"
    top = max(c for _, c in items)
    bw = max(6.0, min(40.0, (W - 2 * PAD) / len(items)))
    out = [f'<svg id="{pid}" width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg">']
    out.append(f'<line class="axis" x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}"/>')
    for i, (size, count) in enumerate(items):
        h = (H - 2 * PAD) * count / top
        x = PAD + i * bw
        out.append(
            f'<rect class="bar" data-size="{size}" data-count="{count}" x="{x:.1f}" '
            f'y="{H - PAD - h:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" fill="#2471a3">'
            f"<title>{count} {what}: class of {size} records</title></rect>"
            f'<text class="lbl" x="{x:.1f}" y="{H - PAD + 14}">{size}</text>'
        )
    out.append(f'<text class="lbl" x="{W / 2}" y="{H - 10}">class size (records)</text>')
    out.append(f'<text class="lbl" x="4" y="{PAD - 8}">{what} (max {top})</text>')
    out.append("</svg>")
    return "\n".join(out)


def _generalised(rel: dict[str, Any], gen: dict[str, Any]) -> str:
    """The section of a generalised release: how it was recognised, the matching attacker,
    suppression, and why interval disclosure is not measured."""
    link = rel.get("linkage", {})
    heights = ", ".join(
        f"{escape(c)}: {'numeric ranges' if h == 'ranges' else f'hierarchy of height {h}'}"
        for c, h in gen.get("hierarchies", {}).items()
    )
    return (
        '<h2>Generalised release</h2><div id="generalised" '
        f'data-linkage="{link.get("keys", 0.0):.6g}" '
        f'data-candidates="{gen["candidates_mean"]:.6g}" data-suppressed="{gen["suppressed"]}">'
        f"<p>Recognised as generalised: {escape(str(gen.get('detected_by', 'hierarchies')))}. "
        f"Key attributes read through: {heights}.</p>"
        "<p><b>Matching linkage.</b> The released values are true but coarser (hierarchy "
        "nodes, ranges, <code>*</code> for a suppressed record), so distance-based linkage does "
        "not apply. The attacker knows her target's key values and the hierarchies; her "
        "candidates are the released rows whose every key value contains the target's, and "
        "she picks one at random: the linkage risk is the mean of 1 / candidates "
        f"({_num(link.get('keys'))}, {gen['candidates_mean']:.1f} candidates on average, "
        f"{link.get('sample', 0)} records). Knowing one pass-through column as well narrows "
        "the candidates to the rows holding the target's value of it.</p>"
        f"<p>{gen['suppressed']} record(s) suppressed (every key <code>*</code>): they are "
        "candidates for every target.</p>"
        "<p><b>Interval disclosure: not applicable.</b> A released range holds the true value "
        "by construction; the disclosure is the range itself.</p></div>"
    )


def render(result: dict[str, Any]) -> str:
    """The page of a ``locpriv assess`` result (its JSON dict)."""
    rel = result.get("release")
    body = ["<h1>locpriv: disclosure risk of a release</h1>"]
    body.append(
        "<p>Key attributes: "
        + escape(", ".join(result.get("qi", [])))
        + "; confidential: "
        + escape(", ".join(result.get("sensitive", [])) or "none")
        + ".</p>"
    )
    points: list[dict[str, Any]] = []
    for row in result.get("sweep") or []:
        il = sweep_il(row) or 0.0
        points.append(
            {"k": row["k"], "il": il, "measures": row["measures"], "label": f"k={row['k']}"}
        )
    if rel is not None:
        body.append(f"<h2>The release</h2><p>{rel['n']} records in {rel['classes']} classes.</p>")
        body.append('<table id="measures"><tr><th>measure</th><th>value</th><th>meaning</th></tr>')
        for name, v in rel["measures"].items():
            body.append(
                f'<tr data-measure="{name}" data-value="{"" if v is None else f"{v:.6g}"}">'
                f'<td class="name">{name}</td><td>{_num(v)}</td>'
                f'<td class="name">{escape(MEASURES[name])}</td></tr>'
            )
        body.append("</table>")
        for note in rel.get("notes", []):
            body.append(f'<p class="note">{escape(note)}</p>')
        gen = rel.get("generalised")
        if gen is not None:
            body.append(_generalised(rel, gen))
        if rel.get("il_written") is not None:
            k = int(rel["reidentification"]["min_class_size"])
            points.append(
                {"k": k, "il": rel["il_written"], "measures": rel["measures"], "label": "release"}
            )
    body.append("<h2>Risk–utility curve over k</h2>")
    if points:
        body.append(_curve(points))
        body.append('<table id="sweep"><tr><th>k</th><th>IL % (written)</th>')
        body.append("".join(f"<th>{n}</th>" for n, _ in SERIES) + "</tr>")
        for p in points:
            body.append(
                f'<tr><td class="name">{escape(p["label"])}</td><td>{p["il"]:.4f}</td>'
                + "".join(f"<td>{_num(p['measures'].get(n))}</td>" for n, _ in SERIES)
                + "</tr>"
            )
        body.append("</table>")
    else:
        body.append("<p>No points: run <code>locpriv assess --sweep 2,3,5,10 …</code>.</p>")
    if rel is not None:
        body.append("<h2>Class sizes</h2>" + _histogram(rel.get("class_sizes", {})))
        il = rel.get("il_per_attribute", {})
        body.append("<h2>Loss per key attribute (%)</h2>")
        body.append(_bars("loss", sorted(il.items()), " %"))
        through = rel.get("linkage", {}).get("passthrough", {})
        body.append("<h2>Linkage risk of each pass-through column</h2>")
        body.append(
            "<p>Share of records an attacker who knows the key attributes and this column "
            "links to their own released record (keys alone: "
            f"{_num(rel.get('linkage', {}).get('keys'))}).</p>"
        )
        body.append(_bars("passthrough", sorted(through.items(), key=lambda t: -t[1]), ""))
        inf = rel.get("inference", {})
        if inf:
            body.append('<h2>Inference of confidential attributes</h2><table id="inference">')
            body.append("<tr><th>attribute</th><th>accuracy</th><th>baseline</th><th>gain</th>")
            body.append("<th>homogeneous records</th></tr>")
            for name, v in inf.items():
                body.append(
                    f'<tr><td class="name">{escape(name)}</td><td>{v["majority"]:.4f}</td>'
                    f"<td>{v['baseline']:.4f}</td><td>{v['gain']:.4f}</td>"
                    f"<td>{v['homogeneous_records']:.4f}</td></tr>"
                )
            body.append("</table>")
    hist = result.get("history")
    if hist is not None:
        body.append("<h2>After intersecting earlier releases</h2>")
        body.append(
            f'<p id="history" data-min="{hist["min_size"]:.0f}" '
            f'data-below="{hist["share_below_k"]:.6g}">smallest class {hist["min_size"]:.0f}, '
            f"median {hist['median_size']:.0f}; {100 * hist['share_below_k']:.1f} % of records "
            f"in a class below k = {hist['k']:.0f}.</p>"
        )
        body.append(_histogram(hist.get("records_by_size", {}), "history-classes", "records"))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>locpriv assess</title>"
        f"<style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )
