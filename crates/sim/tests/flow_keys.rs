//! A flow's key stands for its 5-tuple, whose ephemeral port differs from run to run, so flows
//! hashed into a fair policy's queues collide in some seeds and not in others, about as often as
//! real runs do (4 flows in 16 queues: 1 − 16·15·14·13/16⁴ ≈ 0.33).

use ratekit_sim::RunOptions;

/// Four CBR flows at 4 Mbit/s each into a 10 Mbit/s BC-PQP with 16 flow-hashed fair queues: each
/// gets 2.5 Mbit/s unless it shares a queue, which then splits its 2.5 (or 3.33) between two.
fn shares_a_queue(seed: u64) -> bool {
    let text = format!(
        r#"
        duration = "3s"
        seed = {seed}
        [measure]
        warmup = "1s"
        [enforcer]
        kind = "bcpqp"
        rate = "10mbit"
        queues = 16
        classify = "flow"
        policy = "fair"
        queue_size = "60kb"
        [[aggregates]]
        flows = [{{ rtt = "10ms", count = 4, app = {{ kind = "cbr", rate = "4mbit", packet = 1500 }} }}]
        "#
    );
    let r = ratekit_lab::scenario::parse(&text, "flow_keys.toml").unwrap_or_else(|e| panic!("{e}"));
    let (s, _) = ratekit_sim::run(&r, None, RunOptions::default()).expect("run");
    let rates: Vec<f64> = s.flows.iter().map(|f| f.mean_goodput_bps / 1e6).collect();
    rates.iter().any(|&r| r < 2.0)
}

#[test]
fn hashed_queues_collide_in_some_seeds_as_real_ports_do() {
    let collided = (1..=24).filter(|&seed| shares_a_queue(seed)).count();
    // Binomial(24, 0.33): 8 expected; [2, 16] holds with probability > 0.999, and a key fixed per
    // flow id gives 0 or 24.
    println!("{collided} of 24 seeds had two flows in one queue");
    assert!((2..=16).contains(&collided), "{collided} of 24 seeds had two flows in one queue");
}
