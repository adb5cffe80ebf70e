"""Shared fixtures: the CLI binary (the reference every Python result is compared with) and
small seeded inputs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]

SCENARIO = """
name = "py-test"
duration = "3s"
seed = 3

[measure]
window = "250ms"
warmup = "500ms"

[enforcer]
kind = "bcpqp"
rate = "10mbit"
queues = 4
queue_size = "1mb"
theta_plus = 1.5
window = "100ms"

[[aggregates]]
count = 2
flows = [{ cc = ["cubic", "bbr"], rtt = ["10ms", "20ms"], pick = "flow", count = 3 }]
"""


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `ratekit` binary: $RATEKIT_BIN, else target/release/ratekit (scripts/test-python.sh builds it)."""
    path = Path(os.environ.get("RATEKIT_BIN", REPO / "target" / "release" / "ratekit"))
    if not path.is_file():
        pytest.fail(f"{path} not found: build it with `cargo build --release -p ratekit-cli` or set RATEKIT_BIN")
    return path


def run_cli(cli: Path, *args: object) -> subprocess.CompletedProcess:
    done = subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def arrivals(seed: int, n: int = 20_000, aggregates: int = 5, text_ids: bool = False) -> pd.DataFrame:
    """Poisson-ish arrivals overloading 10 Mbit/s per aggregate, rows sorted by time."""
    rng = np.random.default_rng(seed)
    time_ns = np.cumsum(rng.exponential(60_000.0, n)).astype(np.uint64)
    agg = rng.integers(0, aggregates, n)
    flow = rng.integers(0, 12, n)
    df = pd.DataFrame(
        {
            "time_ns": time_ns,
            "aggregate": [f"cust-{a}" for a in agg] if text_ids else agg,
            "flow": [f"10.0.0.{f}:443" for f in flow] if text_ids else flow * 1000 + agg,
            "bytes": rng.choice([64, 576, 1500], n, p=[0.2, 0.2, 0.6]),
            "class": rng.integers(0, 2, n),  # bcpqp-priority.toml has 2 class queues
        }
    )
    return df


@pytest.fixture()
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    return path
