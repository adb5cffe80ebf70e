#!/usr/bin/env python3
"""Draws the figures of `ratekit reproduce` (docs/reproduce.md).

Usage: report.py FIGURES_DIR. Every FIGURES_DIR/*.json written by ratekit (file, title, kind
"cdf" or "lines", xlabel, ylabel, series of {label, x, y}, log_x, log_y) becomes FILE.png and
FILE.svg.
ratekit runs this script itself (it is built into the binary); running it by hand redraws.
Exits non-zero with a one-line reason when matplotlib is missing.
"""
import glob
import json
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("python3 has no matplotlib; run scripts/setup.d/70-reproduce.sh")

# Fixed metadata so reruns give byte-identical SVGs.
SVG_META = {"Date": None}
matplotlib.rcParams["svg.hashsalt"] = "ratekit"


def draw(path):
    with open(path) as f:
        fig = json.load(f)
    plt.figure(figsize=(6.4, 4.0))
    for s in fig["series"]:
        if not s["x"]:
            continue
        if fig["kind"] == "cdf":
            plt.step(s["x"], s["y"], where="post", label=s["label"])
        else:
            plt.plot(s["x"], s["y"], label=s["label"], marker="o" if len(s["x"]) < 20 else None, linewidth=1)
    plt.title(fig["title"], fontsize=10)
    plt.xlabel(fig["xlabel"])
    plt.ylabel(fig["ylabel"])
    if fig.get("log_x"):
        plt.xscale("log", base=2)
    if fig.get("log_y"):
        positive = [y for s in fig["series"] for y in s["y"] if y and y > 0]
        plt.yscale("symlog", linthresh=min(positive) if positive else 1.0)
        if all(y >= 0 for s in fig["series"] for y in s["y"]):
            plt.ylim(bottom=0)
    plt.grid(alpha=0.3)
    if any(s["label"] for s in fig["series"]):
        plt.legend(fontsize=7)
    plt.tight_layout()
    base = os.path.join(os.path.dirname(path), fig["file"])
    plt.savefig(base + ".png", dpi=110)
    plt.savefig(base + ".svg", metadata=SVG_META)
    plt.close()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py FIGURES_DIR")
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        draw(path)


if __name__ == "__main__":
    main()
