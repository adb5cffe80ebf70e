//! The user-space congestion controls (Copa, PCC Vivace) against what their papers say they do,
//! each beside a CC that behaves otherwise on the same path, so that the bounds can tell them
//! apart: Copa keeps a standing queue of about 1/δ packets on a FIFO and, with no queue to see
//! behind a policer, sends far above the policed rate; Vivace fills a link without filling its
//! buffer and keeps its rate under random loss that CUBIC cannot bear.

use ratekit_lab::summary::{FlowSummary, Summary};
use ratekit_sim::RunOptions;

fn run(text: &str) -> Summary {
    let r = ratekit_lab::scenario::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    ratekit_sim::run(&r, None, RunOptions::default()).expect("run").0
}

/// One backlogged `cc` flow (10 ms RTT) for 20 s through `enforcer`, 2 s of warm-up.
fn alone(cc: &str, enforcer: &str, extra: &str) -> Summary {
    run(&format!(
        "duration = \"20s\"\nseed = 1\n[measure]\nwarmup = \"2s\"\n[enforcer]\n{enforcer}\n[[aggregates]]\n{extra}\nflows = [{{ cc = \"{cc}\", rtt = \"10ms\" }}]\n"
    ))
}

const FIFO_10M: &str = "kind = \"fifo\"\nrate = \"10mbit\"\nburst = \"1500b\"\nlimit = \"150kb\"";
const POLICER_10M: &str = "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = \"50kb\"";

fn goodput_over_rate(s: &Summary) -> f64 {
    s.flows.iter().map(|f| f.mean_goodput_bps).sum::<f64>() / 10e6
}

/// Mean sojourn (ms) and loss at the enforcer, after the warm-up.
fn queue_and_loss(s: &Summary) -> (f64, f64) {
    let c = &s.aggregates[0].path.as_ref().expect("a network run").classes[0];
    (c.delay_mean_ms, c.drops as f64 / c.arrivals as f64)
}

fn flow_loss(f: &FlowSummary) -> f64 {
    let c = f.counts.as_ref().expect("a network run");
    c.enforcer_drops as f64 / c.enforcer_arrivals as f64
}

#[test]
fn copa_keeps_about_one_over_delta_packets_queued_and_the_link_full() {
    // δ = 0.5: in equilibrium λ = 1/(δ·dq), so a lone flow queues 1/δ = 2 packets, 2.4 ms at
    // 10 Mbit/s; the window oscillates around it. CUBIC fills the 150 KB (120 ms) buffer.
    let copa = alone("copa", FIFO_10M, "");
    let (delay, loss) = queue_and_loss(&copa);
    assert!((1.2..=4.8).contains(&delay) && loss == 0.0, "Copa's queue: {delay} ms, loss {loss}");
    assert!(goodput_over_rate(&copa) > 0.93, "Copa leaves the link idle: {}", goodput_over_rate(&copa));
    let (cubic_delay, _) = queue_and_loss(&alone("cubic", FIFO_10M, ""));
    assert!(cubic_delay > 30.0, "CUBIC's queue {cubic_delay} ms");
}

#[test]
fn copa_behind_a_policer_sends_far_above_the_policed_rate() {
    // A token bucket has no queue: Copa sees no queueing delay, its target window is unbounded,
    // and it sends several times the rate, most of it dropped, while still delivering the rate.
    // CUBIC backs off on the same drops.
    let copa = alone("copa", POLICER_10M, "");
    let loss = flow_loss(&copa.flows[0]);
    assert!(loss > 0.5, "Copa sends {:.2} × what passes", 1.0 / (1.0 - loss));
    assert!(goodput_over_rate(&copa) > 0.9, "Copa's goodput {}", goodput_over_rate(&copa));
    let cubic = alone("cubic", POLICER_10M, "");
    assert!(flow_loss(&cubic.flows[0]) < 0.05, "CUBIC's loss {}", flow_loss(&cubic.flows[0]));
}

#[test]
fn vivace_fills_a_link_without_filling_its_buffer() {
    // Vivace's RTT-gradient term stops it where the queue starts to grow: the link is full, the
    // 120 ms buffer nearly empty and nothing is lost after the start. CUBIC fills the buffer.
    let vivace = alone("vivace", FIFO_10M, "");
    let (delay, loss) = queue_and_loss(&vivace);
    assert!(goodput_over_rate(&vivace) > 0.85, "Vivace's goodput {}", goodput_over_rate(&vivace));
    assert!(delay < 15.0 && loss < 0.01, "Vivace's queue {delay} ms, loss {loss}");
}

#[test]
fn vivace_bears_random_loss_that_starves_cubic() {
    // 3 % random loss on a 100 Mbit/s, 30 ms path: Vivace's utility still grows with the rate
    // (0.9·x^−0.1 > 11.35·0.03 up to far beyond 100 Mbit/s), while CUBIC's Mathis rate is about
    // 1.22·MSS/(RTT·√p) ≈ 2.7 Mbit/s. Vivace climbs slowly (20-packet MIs measure the loss
    // coarsely, so its start-up ends early and many probes disagree): 40 s, from the start.
    let path = |cc: &str| {
        run(&format!(
            "duration = \"40s\"\nseed = 1\n[enforcer]\nkind = \"fifo\"\nrate = \"100mbit\"\nburst = \"1500b\"\nlimit = \"375kb\"\n[[aggregates]]\nloss = 0.03\nflows = [{{ cc = \"{cc}\", rtt = \"30ms\" }}]\n"
        ))
    };
    let share = |s: &Summary| s.flows[0].mean_goodput_bps / 100e6;
    let (vivace, cubic) = (share(&path("vivace")), share(&path("cubic")));
    assert!(vivace > 0.4, "Vivace under 3 % loss: {vivace} of the link");
    assert!(cubic < 0.1, "CUBIC under 3 % loss: {cubic} of the link");
}
