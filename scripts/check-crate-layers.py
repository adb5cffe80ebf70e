#!/usr/bin/env python3
"""Checks the workspace's crate layering (issue 13): each crate may depend only on crates of a
lower layer. The layers, lowest first:

    core                     every enforcer, sans-IO
    lab                      what every driver shares (driver, accounting, scenarios, summaries, ...)
    sim, trace, dataplane    the drivers: simulator, traces and detector, data plane and testbed
    cli, py                  the `ratekit` command and the Python package: translate only

So the Python wheel never pulls the command line's clap/indicatif or the data plane's libbpf, and
the data plane never depends on the simulator. Reads `cargo metadata`; exit status 1 naming every
dependency that breaks the order.
"""

import json
import subprocess
import sys

LAYERS = [["ratekit-core"], ["ratekit-lab"], ["ratekit-sim", "ratekit-trace", "ratekit-dataplane"], ["ratekit-cli"]]
# The wheel is a top-layer crate that must not reach the data plane (libbpf) nor the CLI.
FORBIDDEN = {"ratekit-py": {"ratekit-cli", "ratekit-dataplane"}}


def layer_of(name):
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    return len(LAYERS) - 1 if name == "ratekit-py" else None


def main():
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                                     check=True, capture_output=True, text=True).stdout)
    problems = []
    edges = 0
    for pkg in meta["packages"]:
        mine = layer_of(pkg["name"])
        if mine is None:
            problems.append(f"{pkg['name']}: not in any layer; add it to scripts/check-crate-layers.py")
            continue
        for dep in pkg["dependencies"]:
            if dep["kind"] == "dev" or not dep["name"].startswith("ratekit-"):
                continue
            edges += 1
            theirs = layer_of(dep["name"])
            if dep["name"] in FORBIDDEN.get(pkg["name"], set()):
                problems.append(f"{pkg['name']} depends on {dep['name']}, which it must not")
            elif theirs is None or theirs >= mine:
                problems.append(f"{pkg['name']} (layer {mine}) depends on {dep['name']} (layer {theirs})")
    for p in problems:
        print(p)
    print(f"crate layers: {edges} dependencies between workspace crates, {len(problems)} out of order")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
