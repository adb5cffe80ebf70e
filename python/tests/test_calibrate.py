"""scripts/calibrate.py's pure parts: the scenario it writes for a case and the issue-14 targets it
judges a case by. The testbed half needs root and minutes per case; these need neither."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "calibrate.py"


@pytest.fixture(scope="module")
def calibrate():
    spec = importlib.util.spec_from_file_location("calibrate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_metrics(shares, jain, ranked):
    rest = {key: 0.0 for key in ("rto_per_flow_s", "retx_per_flow_s", "recoveries_per_flow_s", "p10", "p50", "p90")}
    return {"shares": shares, "jain": jain, "ranked": ranked, "drop_rate": 0.01, **rest}


def test_the_grid_default_path_reaches_the_simulated_aggregate(calibrate):
    defaults = {"duration": "15s", "window": "250ms", "warmup": "3s", "rtt": "20ms", "host_rate": "10gbit", "link_rate": "10gbit"}
    case = {"name": "c", "placement": "tbf", "rate": "10mbit", "link_rate": "1gbit",
            "enforcer": {"kind": "fifo", "rate": "10mbit", "burst": 50000, "limit": 1514}, "flows": [{"cc": "cubic", "count": 2}]}
    sc = tomllib.loads(calibrate.scenario(case, defaults, seed=2))
    agg = sc["aggregates"][0]
    assert (agg["host_rate"], agg["link_rate"]) == ("10gbit", "1gbit"), "a case's own value wins over the default"
    assert sc["seed"] == 2 and sc["testbed"]["enforcer_at"] == "tbf"
    assert sc["enforcer"]["limit"] == 1514
    del defaults["host_rate"], defaults["link_rate"], case["link_rate"]
    assert "host_rate" not in calibrate.scenario(case, defaults, seed=1), "no default, no key: the simulator's own applies"


def test_targets_hold_within_the_tolerances_and_fail_outside(calibrate):
    linux = [run_metrics({"bbr": 0.60, "cubic": 0.40}, 0.90, [6e6, 4e6]) for _ in range(3)]
    close = [run_metrics({"bbr": 0.64, "cubic": 0.36}, 0.94, [6.9e6, 3.3e6])]
    judged = calibrate.judge(linux, close)
    assert judged["share_bbr"][2] and judged["jain"][2] and judged["flows_ok"][2]
    far = [run_metrics({"bbr": 0.66, "cubic": 0.34}, 0.96, [7.5e6, 3.0e6])]
    judged = calibrate.judge(linux, far)
    assert not judged["share_bbr"][2] and not judged["share_cubic"][2]
    assert not judged["jain"][2]
    assert judged["flows_ok"][:3] == (0, 2, False), "7.5 is 25 % above 6, 3.0 25 % below 4"


def test_a_flow_inside_linuxs_own_range_meets_its_target(calibrate):
    linux = [run_metrics({"reno": 1.0}, 0.9, [g]) for g in (2e6, 3e6, 4e6)]
    assert calibrate.judge(linux, [run_metrics({"reno": 1.0}, 0.9, [3.9e6])])["flows_ok"][2], "30 % off the mean, inside the range"
    assert not calibrate.judge(linux, [run_metrics({"reno": 1.0}, 0.9, [4.2e6])])["flows_ok"][2]


def test_hystarts_exits_are_set_beside_linuxs_only_where_every_run_has_them(calibrate):
    # Linux's counters sum over a run's flows: two exits by the train at 100 and 140, none by delay.
    linux = [{**run_metrics({"cubic": 1.0}, 1.0, [1e6, 1e6]), **calibrate.hystart_metrics([2, 240, 0, 0], 2)} for _ in range(3)]
    sim = [{**run_metrics({"cubic": 1.0}, 1.0, [1e6, 1e6]), **calibrate.hystart_metrics([1, 150, 1, 50], 2)}]
    res = calibrate.judge(linux, sim)
    assert res["hystart_exits_per_flow"][:3] == (1.0, 1.0, None), "one exit per flow in both; not a target"
    assert res["hystart_exit_cwnd"][:2] == (120.0, 100.0)
    assert calibrate.hystart_metrics(None, 2) == {} and calibrate.hystart_metrics([0, 0, 0, 0], 2)["hystart_exit_cwnd"] == 0.0
    stored = [run_metrics({"cubic": 1.0}, 1.0, [1e6, 1e6])] + linux[1:]
    assert "hystart_exits_per_flow" not in calibrate.judge(stored, sim), "a run stored without the counters: no comparison"
    assert not calibrate.missed(res), "the HyStart rows never decide a case"


def test_fewer_simulator_runs_than_testbed_runs_are_refused(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[[case]]\nname = "c"\nplacement = "tc"\nrate = "10mbit"\nenforcer = { kind = "token_bucket", rate = "10mbit", burst = 1514 }\nflows = [{ cc = "cubic" }]\n')
    r = subprocess.run([sys.executable, str(SCRIPT), str(grid), "--out", str(tmp_path / "o"), "--runs", "3", "--sim-runs", "2"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0 and "--sim-runs" in r.stderr, r.stderr


def test_a_seed_range_names_the_runs_to_add(calibrate):
    assert calibrate.seed_range("4-10") == list(range(4, 11))
    assert calibrate.seed_range("3") == [3]
    for bad in ("0-3", "5-4", "x", "4-"):
        with pytest.raises(argparse.ArgumentTypeError):
            calibrate.seed_range(bad)


def test_added_seeds_do_not_mix_with_stored_runs(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "grid.toml", "--out", str(tmp_path / "o"), "--seeds", "4-10", "--linux", "runs.jsonl"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0 and "--seeds" in r.stderr, r.stderr


@pytest.mark.parametrize("script", ["calibrate.py", "lab-artefacts.py", "capture-timing.py"])
def test_help_prints_the_whole_docstring(script, monkeypatch):
    # argparse reflows a description into one paragraph; the scripts' usage text is laid out by hand.
    # The scripts import their shared modules (classic_pcap) from their own folder, as when run.
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    path = ROOT / "scripts" / script
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py").replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shown = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, check=True).stdout
    assert module.__doc__.strip().splitlines()[-1].strip() in shown


TINY_GRID = """[defaults]
duration = "2s"
window = "250ms"
warmup = "500ms"
rtt = "20ms"

[[case]]
name = "tiny"
placement = "tc"
rate = "RATE"
enforcer = { kind = "token_bucket", rate = "RATE", burst = 50000 }
flows = [{ cc = "cubic", count = 1 }]
"""


def stored_run(calibrate, grid_text, seed, goodput):
    grid = tomllib.loads(grid_text)
    text = calibrate.scenario(grid["case"][0], grid["defaults"], seed)
    m = {**run_metrics({"cubic": 1.0}, 1.0, [goodput]), "cc": ["cubic"], "goodput": [goodput], "retransmits": [None], "timeouts": [None]}
    return {"case": "tiny", "seed": seed, "scenario_sha256": calibrate.scenario_digest(text), "kernel": "test", "measured": "2026-11-26", "metrics": m}


def calibrate_against(tmp_path, cli, grid_text, records):
    tmp_path.mkdir(exist_ok=True)
    grid, stored = tmp_path / "grid.toml", tmp_path / "linux.jsonl"
    grid.write_text(grid_text)
    stored.write_text("".join(json.dumps(r) + "\n" for r in records))
    return subprocess.run([sys.executable, str(SCRIPT), str(grid), "--out", str(tmp_path / "o"), "--linux", str(stored), "--sim-runs", "2"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "RATEKIT": str(cli)}, timeout=300)


def test_stored_linux_runs_judge_the_simulator_without_the_testbed(calibrate, cli, tmp_path):
    grid = TINY_GRID.replace("RATE", "10mbit")
    # One CUBIC flow at 9.3 Mbit/s through the 10 Mbit/s bucket: the simulator meets it; judged against
    # a 2 Mbit/s Linux flow, it must not.
    fair = [stored_run(calibrate, grid, seed, 9.3e6) for seed in (1, 2)]
    r = calibrate_against(tmp_path / "fair", cli, grid, fair)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "fair" / "o"
    assert "| tiny |" in (out / "table.md").read_text() and "| 1/1 |" in (out / "table.md").read_text()
    assert [json.loads(line) for line in (out / "linux-runs.jsonl").read_text().splitlines()] == fair, "what it judged against is written back as it was read"
    starved = [stored_run(calibrate, grid, seed, 2e6) for seed in (1, 2)]
    r = calibrate_against(tmp_path / "starved", cli, grid, starved)
    assert r.returncode == 0, r.stderr
    assert "| 0/1 |" in (tmp_path / "starved" / "o" / "table.md").read_text()


def test_a_stored_run_of_another_scenario_is_refused(calibrate, cli, tmp_path):
    measured_at_2m = [stored_run(calibrate, TINY_GRID.replace("RATE", "2mbit"), seed, 1e6) for seed in (1, 2)]
    r = calibrate_against(tmp_path, cli, TINY_GRID.replace("RATE", "10mbit"), measured_at_2m)
    assert r.returncode != 0 and "tiny seed 1" in r.stderr and "another scenario" in r.stderr, r.stderr


@pytest.mark.parametrize("grid_file,runs_file", [("grid.toml", "linux-runs.jsonl"), ("offgrid.toml", "offgrid-linux-runs.jsonl"), ("offgrid2.toml", "offgrid2-linux-runs.jsonl"), ("offgrid3.toml", "offgrid3-linux-runs.jsonl")])
def test_every_stored_linux_run_was_measured_on_the_grids_scenario(calibrate, grid_file, runs_file):
    # An edited grid case needs new Linux runs: the stored ones would judge the simulator on a scenario
    # Linux never ran.
    grid = tomllib.loads((ROOT / "scenarios" / "calibrate" / grid_file).read_text())
    cases = {c["name"]: c for c in grid["case"]}
    stored = calibrate.load_linux_runs(ROOT / "scenarios" / "calibrate" / runs_file)
    assert stored, f"scenarios/calibrate/{runs_file} holds the Linux runs the tables in docs/simulator.md were judged on"
    for name, runs in stored.items():
        assert name in cases, f"{name}: stored Linux runs of a case the grid no longer has"
        assert sorted(runs) == list(range(1, max(len(runs), grid["defaults"]["runs"]) + 1)), f"{name}: one stored run per seed, at least the grid's runs"
        for seed, rec in runs.items():
            assert rec["scenario_sha256"] == calibrate.scenario_digest(calibrate.scenario(cases[name], grid["defaults"], seed)), f"{name} seed {seed}"


def test_a_miss_is_read_as_linuxs_spread_the_simulators_other_seeds_or_neither(calibrate):
    def case(linux_jains, sim_jains):
        linux = [run_metrics({"cubic": 1.0}, j, [1e6]) for j in linux_jains]
        sim = [run_metrics({"cubic": 1.0}, j, [1e6]) for j in sim_jains]
        return calibrate.judge(linux, sim), calibrate.judge(linux, sim[:len(linux)])
    spread = case([0.60, 0.90, 0.75], [0.85] * 10)
    other_seeds = case([0.90] * 3, [0.90] * 3 + [0.70] * 7)
    wrong = case([0.90] * 3, [0.70] * 10)
    fine = case([0.90] * 3, [0.91] * 10)
    unmatched = case([0.90] * 3, [0.90] * 3 + [0.70] * 7)
    results = [("spread", spread[0]), ("other_seeds", other_seeds[0]), ("wrong", wrong[0]), ("fine", fine[0]), ("unmatched", unmatched[0])]
    twins = {"spread": spread[1], "other_seeds": other_seeds[1], "wrong": wrong[1], "fine": fine[1], "unmatched": None}
    md, summary = calibrate.misses_table(results, twins)
    assert md[2:] == ["| spread | jain | yes | no |", "| other_seeds | jain | no | yes |", "| wrong | jain | no | no |", "| unmatched | jain | no | n/a |"]
    assert "Of the 4 that miss: 1 inside Linux's own run range" in summary and "1 more meeting every target on Linux's own seeds, 2 neither" in summary


def test_runs_of_one_seed_are_twins_only_if_their_flows_started_alike(calibrate):
    def run(starts):
        return {**run_metrics({"cubic": 1.0}, 1.0, [1e6, 1e6]), "start_s": starts}
    assert calibrate.same_starts(run([0.0041, 0.0007]), run([0.0042, 0.0007]))
    assert not calibrate.same_starts(run([0.0091, 0.0007]), run([0.0042, 0.0007])), "a flow 5 ms apart"
    assert not calibrate.same_starts(run([None, None]), run([0.0042, 0.0007])), "a Linux run that did not record its starts"
    assert not calibrate.same_starts(run_metrics({"cubic": 1.0}, 1.0, [1e6]), run([0.0042])), "a stored run from before start_s"


def test_an_old_testbeds_drain_is_its_longest_rtt_twice_and_200_ms(calibrate):
    case = {"flows": [{"cc": "cubic"}, {"cc": "bbr", "rtt": "100ms"}]}
    assert calibrate.drain_s(case, {"rtt": "10ms"}) == pytest.approx(0.4)
    assert calibrate.drain_s({"flows": [{"cc": "cubic"}]}, {"rtt": "10ms"}) == pytest.approx(0.22)
    assert calibrate.drain_s({"flows": [{"cc": "cubic", "count": 2, "rtt": ["10ms", "40ms"]}]}, {}) == pytest.approx(0.28), "mixed RTTs"
    tb = tomllib.loads(calibrate.scenario({"name": "c", "placement": "tc", "rate": "2mbit", "enforcer": {"kind": "fifo"}, "flows": [{"cc": "reno"}]},
                                          {"duration": "15s", "window": "250ms", "warmup": "3s", "rtt": "10ms"}, 1, 0.22))
    assert tb["duration"] == "15220ms"


def test_a_twin_of_an_old_testbed_run_counts_its_drain_over_the_run(calibrate, tmp_path):
    # 2 s run, simulated 2.4 s: the drain's bytes count, over the run's 2 s less the flow's start,
    # and no window after the run's end; a finished transfer keeps its own goodput.
    flows = [{"id": 0, "cc": "cubic", "rtt_ms": 100.0, "start_s": 0.5, "mean_goodput_bps": 1.0, "delivered_bytes": 300_000, "fct_s": None},
             {"id": 1, "cc": "cubic", "rtt_ms": 100.0, "start_s": 0.0, "mean_goodput_bps": 4e5, "delivered_bytes": 50_000, "fct_s": 1.0}]
    (tmp_path / "summary.json").write_text(json.dumps({"duration_s": 2.4, "flows": flows, "aggregates": [{"rate_bps": 1e6, "drop_rate": 0.0}]}))
    rows = ["time_s,flow,goodput_bps"] + [f"{t:.3f},0,{g}" for t, g in ((1.75, 1e5), (2.0, 2e5), (2.25, 9e5))]
    (tmp_path / "flows.csv").write_text("\n".join(rows) + "\n")
    m = calibrate.metrics(tmp_path / "summary.json", 1.0, 0.25, 2.0)
    assert m["goodput"] == [pytest.approx(300_000 * 8 / 1.5), 4e5]
    assert (m["p10"], m["p90"]) == (pytest.approx(0.1), pytest.approx(0.2)), "the window ending at 2.25 s is after the run"


def test_stored_runs_of_testbeds_that_did_and_did_not_count_the_drain_do_not_mix(calibrate, cli, tmp_path):
    grid = TINY_GRID.replace("RATE", "10mbit")
    old, new = (stored_run(calibrate, grid, seed, 9.3e6) for seed in (1, 2))
    new["traffic_generator"] = calibrate.RUN_END_GENERATOR
    r = calibrate_against(tmp_path, cli, grid, [old, new])
    assert r.returncode != 0 and "tiny" in r.stderr and "drain" in r.stderr, r.stderr


# One case per enforcer, at 2 and 10 Mbit/s (a few seconds of simulation in all), that met every target
# against its stored Linux runs when they were committed: a change to the TCP models or enforcers that
# moves the simulator away from Linux here fails without root or a testbed. The htb case was
# htb15k-1c1b-2m-10ms until its Linux runs were measured again with the current traffic generator:
# against those the model's Jain's index is 0.05 off (docs/simulator.md), so 10 Mbit/s stands in.
REGRESSION_CASES = ("tb1p-4r-2m-100ms,tb50k-4c-10m-10ms,tb1m-1c1b-10m-40ms,tbf50k-1c1b-10m-10ms,fp50k-4c4b-2m-10ms,"
                    "bcpqp-2c2b-2m-100ms,htb15k-1c1b-10m-10ms,htbbdp-4c-10m-40ms")


def test_the_simulator_still_meets_stored_linux_runs(cli, tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(ROOT / "scenarios" / "calibrate" / "grid.toml"), "--out", str(tmp_path),
                        "--linux", str(ROOT / "scenarios" / "calibrate" / "linux-runs.jsonl"), "--only", REGRESSION_CASES],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "RATEKIT": str(cli)}, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [line for line in (tmp_path / "table.md").read_text().splitlines() if line.startswith("| ") and not line.startswith("| case")]
    assert len(rows) == len(REGRESSION_CASES.split(",")), "every regression case has stored Linux runs"
    missed = [row.split(" | ")[0][2:] for row in rows if not row.endswith("| yes |")]
    assert not missed, f"no longer within issue 14's targets of Linux: {missed}"
