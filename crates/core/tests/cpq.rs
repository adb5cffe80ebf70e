//! Congestion Policing Queues (003): each variant's drain and drop rule on hand-made sequences.
//!
//! Every test holds RED's average at a chosen level: w_q = 1 makes the average the instantaneous
//! queue, and the queue is held constant by dequeuing one packet per admitted one. All arrivals
//! happen at t = 0, so no congestion tokens refill in between.

use ratekit_core::cpq::{Cpq, CpqConfig, CpqVariant};
use ratekit_core::red::RedConfig;
use ratekit_core::{Bytes, DropReason, Dropped, EnforcerConfig, Instant, Packet, QueueDiscipline, Rate};

const LINK: Rate = Rate(1_250_000);
const LEN: u32 = 1000;
const FILLER_BASE: u64 = 1 << 40;

fn cpq(variant: CpqVariant, bucket: Option<u64>) -> Cpq {
    let cfg = CpqConfig {
        variant,
        bucket_size: bucket.map(Bytes),
        fill_rate: None,
        knee: 0.25,
        p_max: 0.5,
        p_ratio_thresh: 0.25,
        quantum: Bytes(1500),
        red: RedConfig {
            min_th: Bytes(30_000),
            max_th: Bytes(90_000),
            max_p: 0.1,
            w_q: 1.0,
            limit: Bytes(300_000),
            mean_pkt_size: Bytes(1000),
            seed: 5,
        },
    };
    Cpq::new(&cfg, Some(LINK)).unwrap()
}

struct Bench {
    q: Cpq,
    next_id: u64,
    fillers: u64,
}

impl Bench {
    fn new(q: Cpq) -> Self {
        Bench { q, next_id: 0, fillers: 0 }
    }

    /// Fills the queue to at least `level` bytes with packets of fresh customers (full buckets).
    fn fill(&mut self, level: u64) {
        let mut drops = Vec::new();
        while self.q.backlog_bytes() < level {
            self.fillers += 1;
            let p = Packet { id: self.next_id, len: LEN, aggregate: FILLER_BASE + self.fillers, ..Default::default() };
            self.next_id += 1;
            self.q.enqueue(Instant::ZERO, p, &mut drops);
            assert!(self.fillers < 1_000_000, "cannot fill to {level}");
        }
    }

    /// Offers one packet of `customer`; keeps the queue level by dequeuing one if it was admitted.
    fn offer(&mut self, customer: u64) -> Option<DropReason> {
        let mut drops: Vec<Dropped> = Vec::new();
        let p = Packet { id: self.next_id, len: LEN, aggregate: customer, ..Default::default() };
        self.next_id += 1;
        self.q.enqueue(Instant::ZERO, p, &mut drops);
        match drops.pop() {
            Some(d) => Some(d.reason),
            None => {
                self.q.dequeue(Instant::ZERO, &mut drops);
                None
            }
        }
    }

    fn tokens(&self, customer: u64) -> f64 {
        self.q.tokens(customer).unwrap()
    }
}

#[test]
fn table_i_defaults() {
    assert_eq!(CpqVariant::IcpSlope.table_i(), (350_000, 550));
    assert_eq!(CpqVariant::AfcpA.table_i(), (225_000, 300));
    assert_eq!(CpqVariant::AicpB.table_i(), (225_000, 300));
    let mut b = Bench::new(cpq(CpqVariant::IcpStep, None));
    b.offer(1);
    assert_eq!(b.tokens(1), 350_000.0);
    let mut b = Bench::new(cpq(CpqVariant::AfcpB, None));
    b.offer(1);
    assert_eq!(b.tokens(1), 225_000.0);
}

/// Drains customer 1's ICP bucket (S = 10 000) with forced AQM drops down to `tokens`.
fn icp_at(variant: CpqVariant, tokens: u64) -> Bench {
    let mut b = Bench::new(cpq(variant, Some(10_000)));
    b.fill(90_000); // avg ≥ max_th: RED drops everything
    for k in 1..=(10_000 - tokens) / LEN as u64 {
        assert_eq!(b.offer(1), Some(DropReason::RedForced));
        assert_eq!(b.tokens(1), (10_000 - k * LEN as u64) as f64, "each AQM drop drains its size");
    }
    // Now let the queue empty below min_th: the AQM stops dropping, only the policer decides.
    let mut drops = Vec::new();
    while b.q.backlog_bytes() > 10_000 {
        b.q.dequeue(Instant::ZERO, &mut drops);
    }
    b
}

#[test]
fn icp_step_drops_everything_below_the_knee() {
    let mut b = icp_at(CpqVariant::IcpStep, 3_000); // fill 0.3 ≥ knee 0.25
    assert!((0..500).all(|_| b.offer(1).is_none()));
    assert_eq!(b.tokens(1), 3_000.0, "forwarded packets the AQM keeps cost nothing");
    let mut b = icp_at(CpqVariant::IcpStep, 2_000); // fill 0.2 < knee
    assert!((0..500).all(|_| b.offer(1) == Some(DropReason::CongestionPolicer)));
    assert!(b.offer(2).is_none(), "other customers are not policed");
}

#[test]
fn icp_drops_never_reach_reds_average() {
    // 003 §IV-A: ICP is a device in front of the queue, so RED (w_q = 1 here: avg = the queue
    // at the last arrival it saw) must not see the packets ICP drops.
    let mut b = icp_at(CpqVariant::IcpStep, 2_000); // fill 0.2 < knee; queue 10 000 B
    let seen = b.q.red_avg();
    assert!(seen >= 90_000.0, "the last arrival RED saw found the queue full: {seen}");
    assert!((0..50).all(|_| b.offer(1) == Some(DropReason::CongestionPolicer)));
    assert_eq!(b.q.red_avg(), seen, "policed packets moved RED's average");
    assert!(b.offer(2).is_none(), "another customer's packet reaches RED");
    assert_eq!(b.q.red_avg(), 10_000.0);
}

fn policed_fraction(b: &mut Bench, customer: u64, n: usize) -> f64 {
    let mut policed = 0;
    for _ in 0..n {
        match b.offer(customer) {
            Some(DropReason::CongestionPolicer) => policed += 1,
            Some(other) => panic!("unexpected AQM drop {other:?}"),
            None => {}
        }
    }
    policed as f64 / n as f64
}

#[test]
fn icp_slope_and_squared_follow_their_curves() {
    // fill 0.1, knee 0.25: slope 1 − 0.4 = 0.6, squared 0.36.
    for (variant, want) in [(CpqVariant::IcpSlope, 0.6), (CpqVariant::IcpSquared, 0.36)] {
        let mut b = icp_at(variant, 1_000);
        let got = policed_fraction(&mut b, 1, 20_000);
        assert!((got - want).abs() < 0.015, "{variant:?}: {got} vs {want}");
        assert_eq!(b.tokens(1), 1_000.0);
    }
    let mut b = icp_at(CpqVariant::IcpSlope, 3_000);
    assert_eq!(policed_fraction(&mut b, 1, 2_000), 0.0);
}

#[test]
fn afcp_drains_size_times_red_probability_and_polices_when_short() {
    // Queue held at 60 000 B: p_b = 0.1·(60 000 − 30 000)/60 000 = 0.05 → drain 50 B per packet.
    for variant in [CpqVariant::AfcpA, CpqVariant::AfcpB] {
        let mut b = Bench::new(cpq(variant, Some(1_000_000)));
        b.fill(60_000);
        let (mut forwarded, mut aqm_drops) = (0u32, 0u32);
        for _ in 0..4_000 {
            match b.offer(1) {
                None => forwarded += 1,
                Some(DropReason::RedEarly) => aqm_drops += 1,
                Some(r) => panic!("{variant:?}: unexpected {r:?}"),
            }
        }
        assert!(aqm_drops > 50, "RED must drop some ({aqm_drops})");
        let charged = if variant == CpqVariant::AfcpA { forwarded + aqm_drops } else { forwarded };
        let want = 1_000_000.0 - 50.0 * charged as f64;
        assert!((b.tokens(1) - want).abs() < 1e-6, "{variant:?}: {} vs {want}", b.tokens(1));
    }
    // Forward only if tokens ≥ drain: with S = 120, 120 → 70 → 20, then the policer drops.
    let mut b = Bench::new(cpq(CpqVariant::AfcpA, Some(120)));
    b.fill(60_000);
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let r = b.offer(7);
        if r != Some(DropReason::RedEarly) {
            seen.push((r, b.tokens(7)));
        }
    }
    let policed = Some(DropReason::CongestionPolicer);
    assert_eq!(seen, vec![(None, 70.0), (None, 20.0), (policed, 20.0), (policed, 20.0), (policed, 20.0), (policed, 20.0)]);
}

#[test]
fn aicp_a_shifts_the_thresholds_by_the_fill() {
    // A full bucket doubles both thresholds: 60 000..180 000. At avg 100 000 (above the plain
    // max_th, where RED drops everything) the customer sees p = 0.1·40 000/120 000 = 1/30.
    let mut b = Bench::new(cpq(CpqVariant::AicpA, Some(1_000_000_000)));
    b.fill(100_000);
    let got = policed_fraction(&mut b, 1, 30_000);
    assert!((got - 1.0 / 30.0).abs() < 0.005, "{got}");
    // Tokens drain by size × RED's own p_b, which is 1 above max_th.
    let forwarded = (30_000.0 * (1.0 - got)).round();
    assert!((b.tokens(1) - (1e9 - 1000.0 * forwarded)).abs() < 1.0);
    // Each forwarded packet pays size × RED's plain p_b: 50 B at avg 60 000.
    let mut b = Bench::new(cpq(CpqVariant::AicpA, Some(1_000)));
    b.fill(60_000);
    b.offer(3); // 1000 − 1000·0.05 = 950 tokens
    assert_eq!(b.tokens(3), 950.0);
}

#[test]
fn aicp_b_adds_the_bucket_probability_to_squared_red() {
    // avg 60 000: p_red = 0.05, p_red² = 0.0025.
    let mut b = Bench::new(cpq(CpqVariant::AicpB, Some(1_000_000_000)));
    b.fill(60_000);
    let got = policed_fraction(&mut b, 1, 40_000);
    assert!((got - 0.0025).abs() < 0.001, "full bucket: {got}");
    // Bucket of 20 000 drained to fill 1/8 (2 500 tokens) by 350 forwarded packets at 50 each:
    // p_prob = 0.5·(1 − 0.125/0.25) = 0.25.
    let mut b = Bench::new(cpq(CpqVariant::AicpB, Some(20_000)));
    b.fill(60_000);
    let mut forwarded = 0;
    while forwarded < 350 {
        if b.offer(1).is_none() {
            forwarded += 1;
        }
    }
    assert!((b.tokens(1) - 2_500.0).abs() < 1e-6);
    // Lower the queue to min_th, where p_red = 0: the fill no longer moves and p = p_prob.
    let mut drops = Vec::new();
    while b.q.backlog_bytes() > 30_000 {
        b.q.dequeue(Instant::ZERO, &mut drops);
    }
    let got = policed_fraction(&mut b, 1, 20_000);
    assert!((got - 0.25).abs() < 0.015, "fill 1/8: {got}");
    assert_eq!(b.tokens(1), 2_500.0);
    // Above p_ratio_thresh the bucket adds nothing.
    assert_eq!(policed_fraction(&mut b, 2, 2_000), 0.0);
}

#[test]
fn references_red_and_drr() {
    // Plain RED ignores customers: at avg 60 000 both customers see the same drop fraction.
    let mut b = Bench::new(cpq(CpqVariant::Red, None));
    b.fill(60_000);
    assert!(b.q.tokens(1).is_none());
    let drops = (0..10_000).filter(|_| b.offer(1).is_some()).count();
    assert!(drops > 500 && drops < 1500, "{drops}");
    // DRR: customer 1 queues five times as many packets; the link alternates fairly.
    let mut q = cpq(CpqVariant::Drr, None);
    let mut drops = Vec::new();
    for i in 0..360u64 {
        let customer = if i % 6 == 0 { 2 } else { 1 };
        q.enqueue(Instant::ZERO, Packet { id: i, len: LEN, aggregate: customer, ..Default::default() }, &mut drops);
    }
    assert!(drops.is_empty());
    let first: Vec<u64> = (0..120).map(|_| q.dequeue(Instant::ZERO, &mut drops).unwrap().aggregate).collect();
    let twos = first.iter().filter(|&&c| c == 2).count();
    assert_eq!(twos, 60, "equal bytes while both are backlogged");
}

#[test]
fn bad_input_names_the_field() {
    let red = "[red]\nmin_th = 30000\nmax_th = 90000\nlimit = 300000\n";
    let e = EnforcerConfig::from_toml(&format!("kind = \"cpq\"\nvariant = \"icp_step\"\nknee = 0\n{red}")).unwrap_err();
    assert_eq!(e.field, "knee", "{e}");
    let e = EnforcerConfig::from_toml("kind = \"cpq\"\nvariant = \"afcp_a\"\n[red]\nmin_th = 9\nmax_th = 9\nlimit = 300000\n").unwrap_err();
    assert_eq!(e.field, "red.min_th", "{e}");
    let e = EnforcerConfig::from_toml(&format!("kind = \"cpq\"\nvariant = \"afcp_c\"\n{red}")).unwrap_err();
    assert!(e.message.contains("afcp_c"), "{e}");
    let ok = EnforcerConfig::from_toml(&format!("kind = \"cpq\"\nvariant = \"aicp_b\"\nfill_rate = \"300bps\"\n{red}")).unwrap();
    assert_eq!(ok.build(None).err().unwrap().field, "link_rate");
    assert!(ok.build(Some(LINK)).is_ok());
}
