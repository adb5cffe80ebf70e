"""scripts/capture-timing.py on the simulator's captures (`[testbed] pcap`), where the path's timing
is known: the forward path adds nothing but serialisation, the ACK path a uniform noise below
`ack_jitter`. A run without that noise is the control: the script must read it as none."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "capture-timing.py"

SCENARIO = """
name = "capture"
duration = "4s"
seed = 5
[measure]
warmup = "1s"
[testbed]
pcap = true
pcap_receiver = true
[enforcer]
kind = "token_bucket"
rate = "10mbit"
burst = "30kb"
[[aggregates]]
host_rate = "10gbit"
link_rate = "10gbit"
flows = [
  { cc = "cubic", rtt = "20ms", ack_jitter = "JITTER" },
  { cc = "bbr", rtt = "20ms", ack_jitter = "JITTER", start = "100ms" },
]
"""


def simulate_and_measure(tmp_path: Path, jitter: str) -> list[dict]:
    scenario = tmp_path / f"s-{jitter}.toml"
    scenario.write_text(SCENARIO.replace("JITTER", jitter))
    out = tmp_path / f"out-{jitter}"
    subprocess.run([os.environ["RATEKIT_BIN"], "sim", str(scenario), "--out", str(out), "--quiet"], check=True)
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, capture_output=True)
    (result,) = json.loads((out / "capture-timing.json").read_text())
    return result["flows"]


def test_the_timing_read_from_captures_is_the_paths_own(tmp_path):
    noisy = simulate_and_measure(tmp_path, "250us")
    assert [f["cc"] for f in noisy] == ["cubic", "bbr"], "flows matched to summary.json by their SYNs"
    for f in noisy:
        assert f["fwd_excess_us"][1] < 5, f"the forward path has no noise: {f}"
        assert 150 < f["rev_excess_us"][1] < 250, f"p90 of a uniform noise below 250 us: {f}"
        assert f["segments_sent"] > 100 and 0 <= f["ack_cover3"] <= 1
    quiet = simulate_and_measure(tmp_path, "0us")
    for f in quiet:
        assert f["rev_excess_us"][1] < 5, f"no ACK-path noise, none read: {f}"
    bbr, cubic = noisy[1], noisy[0]
    assert bbr["send_burst3"] < 0.2 < cubic["send_burst3"], "paced BBR sends in pairs, CUBIC in bursts"


def test_a_directory_without_captures_is_refused_by_name(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode != 0 and "sender.pcap" in r.stderr
