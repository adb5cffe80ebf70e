"""scripts/capture-timing.py on the simulator's captures (`[testbed] pcap`), where the path's timing
is known: the forward path adds nothing but serialisation, the ACK path a noise below `ack_jitter`
(uniform when drawn afresh for every ACK, `ack_jitter_slow = 0`), whatever the flow's silence
before a burst. A run without that noise is the control: the script must read it as none."""
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
  { cc = "cubic", rtt = "20ms", ack_jitter = "JITTER", ack_jitter_slow = 0.0 },
  { cc = "bbr", rtt = "20ms", ack_jitter = "JITTER", ack_jitter_slow = 0.0, start = "100ms" },
]
"""


def simulate_and_measure(tmp_path: Path, jitter: str, template: str = SCENARIO, label: str = "capture") -> list[dict]:
    name = f"{label}-{jitter}"
    scenario = tmp_path / f"{name}.toml"
    scenario.write_text(template.replace("JITTER", jitter))
    out = tmp_path / name
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
    assert bbr["clumps_per_round"] > 2 * cubic["clumps_per_round"], "pacing spreads a round; ACK clocking keeps it in a few bursts"


ROUNDS = """
name = "rounds"
duration = "6s"
seed = 3
[measure]
warmup = "2s"
[testbed]
pcap = true
[enforcer]
kind = "token_bucket"
rate = "50mbit"
burst = "50kb"
[[aggregates]]
host_rate = "10gbit"
link_rate = "10gbit"
flows = [{ cc = "cubic", rtt = "40ms", count = 3, start_jitter = "10ms", ack_jitter = "JITTER" }]
"""


def test_a_burst_comes_back_after_the_paths_delay_whatever_the_silence_before_it(tmp_path):
    """The model's loop delay does not depend on how long a flow was silent (Linux's does: docs/
    simulator.md), so the script must read the same for bursts that follow closely and bursts after
    silence: without noise, under the reader's 50 us (it wakes 50 us after a burst's first segment,
    and the excess counts from the last), and a median 125 us more with a noise below 250 us."""
    for jitter, low, high in (("0us", 0, 55), ("250us", 90, 240)):
        for f in simulate_and_measure(tmp_path, jitter, ROUNDS, "rounds"):
            busy, silent = f["loop_excess_us"]
            assert low < busy < high and low < silent < high and abs(busy - silent) < 30, f"{jitter}: {f}"
            assert 1 <= f["clumps_per_round"] < 10, f


def test_the_share_of_the_noise_nearby_acks_share_is_read_from_the_loop_delays(tmp_path):
    """loop_drift_us: with the default noise (half of it drifting over a second) two ACK-clocked
    bursts 20-150 ms apart come back with loop delays about as far apart as two draws below
    125 us (a median near 37 us), bursts seconds apart further; with a noise drawn afresh for every
    ACK (`ack_jitter_slow = 0`, the control) both read as two draws below 250 us (73 us)."""
    drifting = [f["loop_drift_us"] for f in simulate_and_measure(tmp_path, "250us", ROUNDS, "drift")]
    control = ROUNDS.replace('ack_jitter = "JITTER"', 'ack_jitter = "JITTER", ack_jitter_slow = 0.0')
    fresh = [f["loop_drift_us"] for f in simulate_and_measure(tmp_path, "250us", control, "fresh")]
    for near, far in drifting:
        assert 25 < near < 55 and near < far, drifting
    for near, far in fresh:
        assert 55 < near < 95 and 55 < far < 95, fresh


def test_a_directory_without_captures_is_refused_by_name(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode != 0 and "sender.pcap" in r.stderr
