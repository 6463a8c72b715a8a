#!/usr/bin/env python3
"""Summarise an e2e.sh run: medians per (measure, target), ratios, a markdown table, a JSON
file and an SVG chart. Standard library only.

Usage: report.py RESULTS.csv META.json OUT_DIR
CSV columns: round,measure,target,value,unit,better   (better is `higher` or `lower`)
"""
import csv
import json
import statistics
import sys
from collections import OrderedDict

TARGETS = ["direct", "socat", "bare", "haproxy", "dockwarden"]
COLORS = {"direct": "#9e9e9e", "socat": "#8c564b", "bare": "#2ca02c", "haproxy": "#ff7f0e", "dockwarden": "#1f77b4"}
NAMES = {"direct": "direct", "socat": "socat relay", "bare": "bare hyper", "haproxy": "HAProxy", "dockwarden": "dockwarden"}


def load(path):
    rows = list(csv.DictReader(open(path)))
    data = OrderedDict()
    for r in rows:
        m = data.setdefault(r["measure"], {"unit": r["unit"], "better": r["better"], "values": {}})
        m["values"].setdefault(r["target"], []).append(float(r["value"]))
    return data


def summarise(data):
    out = OrderedDict()
    for measure, m in data.items():
        med = {t: statistics.median(v) for t, v in m["values"].items() if v}
        entry = {"unit": m["unit"], "better": m["better"], "median": med,
                 "min": {t: min(v) for t, v in m["values"].items() if v},
                 "max": {t: max(v) for t, v in m["values"].items() if v},
                 "n": {t: len(v) for t, v in m["values"].items()}}
        dw = med.get("dockwarden")
        for other in ("direct", "haproxy", "bare"):
            o = med.get(other)
            entry[f"dockwarden/{other}"] = (dw / o) if dw is not None and o else None
        so, d = med.get("socat"), med.get("direct")
        entry["socat/direct"] = (so / d) if so is not None and d else None
        out[measure] = entry
    return out


def fmt(v):
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def cell(e, t):
    """Median, with the min–max spread when there is more than one sample."""
    md = e["median"].get(t)
    if md is None:
        return "–"
    if e["n"].get(t, 0) > 1:
        return f"{fmt(md)} ({fmt(e['min'][t])}–{fmt(e['max'][t])})"
    return fmt(md)


def markdown(summary, meta):
    lines = [
        f"Run {meta.get('date')} on {meta.get('machine')}; dockerd {meta.get('dockerd')}, "
        f"{meta.get('haproxy')}, {meta.get('rustc')}; mode `{meta.get('mode')}`, "
        f"{meta.get('rounds')} rounds, targets alternated within each round. "
        "Cells: median (min–max over all samples: every round, and each repetition within a round).",
        "",
        "| measure | unit | better | " + " | ".join(NAMES[t] for t in TARGETS)
        + " | dockwarden/direct | dockwarden/HAProxy | dockwarden/bare | socat relay/direct |",
        "|---|---|---|" + "---:|" * (len(TARGETS) + 4),
    ]
    for k, e in summary.items():
        lines.append(
            f"| {k} | {e['unit']} | {e['better']} | " + " | ".join(cell(e, t) for t in TARGETS)
            + f" | {fmt(e['dockwarden/direct'])} | {fmt(e['dockwarden/haproxy'])} | {fmt(e['dockwarden/bare'])} | {fmt(e['socat/direct'])} |"
        )
    added = [(k, e) for k, e in summary.items() if k.endswith("_p50") and e["median"].get("direct")]
    if added:
        lines += ["", "Added p50 latency over direct (µs, medians):", "",
                  "| measure | " + " | ".join(NAMES[t] for t in TARGETS[1:]) + " |",
                  "|---|" + "---:|" * (len(TARGETS) - 1)]
        for k, e in added:
            d = e["median"]["direct"]
            vals = [fmt((e["median"][t] - d) * 1e3) if t in e["median"] else "–" for t in TARGETS[1:]]
            lines.append(f"| {k} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def speed(e, t):
    """Speed relative to the direct socket: >1 is faster than direct, whatever the unit."""
    v, d = e["median"].get(t), e["median"].get("direct")
    if v is None or not d or not v:
        return None
    return v / d if e["better"] == "higher" else d / v


def svg(summary, title):
    rows = [(k, e) for k, e in summary.items() if e["median"].get("direct")]
    bar_h, gap, left, width = 9, 10, 250, 460
    top = 50
    nt = len(TARGETS)
    height = top + len(rows) * (nt * bar_h + gap) + 40
    vmax = max([1.2] + [s for _, e in rows for t in TARGETS if (s := speed(e, t))])
    vmax = min(vmax, 3.0)
    x = lambda v: left + width * min(v, vmax) / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 80}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">{title}</text>',
           f'<text x="10" y="34" fill="#555">speed relative to the direct socket (median; &gt;1 is faster; '
           f'latency, wall time and RSS inverted)</text>']
    y = top
    for k, e in rows:
        out.append(f'<text x="{left - 6}" y="{y + nt * bar_h / 2 + 3}" text-anchor="end">{k}</text>')
        for i, t in enumerate(TARGETS):
            s = speed(e, t)
            if s is None:
                continue
            yy = y + i * bar_h
            out.append(f'<rect x="{left}" y="{yy}" width="{x(s) - left:.1f}" height="{bar_h - 1}" fill="{COLORS[t]}"/>')
            out.append(f'<text x="{x(s) + 3:.1f}" y="{yy + bar_h - 1}" font-size="9">{s:.2f}</text>')
        y += nt * bar_h + gap
    one = x(1.0)
    out.append(f'<line x1="{one:.1f}" y1="{top - 4}" x2="{one:.1f}" y2="{y}" stroke="black" stroke-dasharray="3,3"/>')
    lx = left
    for t in TARGETS:
        out.append(f'<rect x="{lx}" y="{y + 12}" width="10" height="10" fill="{COLORS[t]}"/>')
        out.append(f'<text x="{lx + 14}" y="{y + 21}">{NAMES[t]}</text>')
        lx += 110
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    csv_path, meta_path, out_dir = sys.argv[1:4]
    meta = json.load(open(meta_path))
    summary = summarise(load(csv_path))
    json.dump({"meta": meta, "results": summary}, open(f"{out_dir}/results.json", "w"), indent=1)
    md = markdown(summary, meta)
    open(f"{out_dir}/results.md", "w").write(md)
    open(f"{out_dir}/chart.svg", "w").write(svg(summary, f"dockwarden e2e bench, {meta.get('date')}"))
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
