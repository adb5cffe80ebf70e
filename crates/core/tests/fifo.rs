//! The tbf-style FIFO shaper and the statistics wrapper.

use ratekit_core::fifo_shaper::{FifoShaper, FifoShaperConfig};
use ratekit_core::queue_stats::WithStats;
use ratekit_core::{Bytes, DropReason, Duration, EnforcerConfig, Instant, Packet, QueueDiscipline, Rate};

fn pkt(id: u64, len: u32) -> Packet {
    Packet { id, len, ..Default::default() }
}

fn shaper(rate: u64, burst: u64, limit: u64) -> WithStats<FifoShaper> {
    let cfg = FifoShaperConfig { rate: Rate(rate), burst: Bytes(burst), limit: Bytes(limit), overhead: Bytes(0) };
    WithStats::new(FifoShaper::new(&cfg, None).unwrap())
}

/// Drains `q` by always calling at its next wake-up; returns (id, departure ns).
fn drain(q: &mut impl QueueDiscipline, mut now: Instant) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut drops = Vec::new();
    loop {
        while let Some(p) = q.dequeue(now, &mut drops) {
            out.push((p.id, now.0));
        }
        match q.next_wakeup() {
            Some(t) => {
                assert!(t > now, "a wake-up must make progress");
                now = t;
            }
            None => return out,
        }
    }
}

#[test]
fn burst_then_rate() {
    // 1 MB/s, burst 3000 B: two 1500 B packets leave at once, then one every 1.5 ms.
    let mut q = shaper(1_000_000, 3000, 100_000);
    let mut drops = Vec::new();
    for i in 0..6 {
        q.enqueue(Instant::ZERO, pkt(i, 1500), &mut drops);
    }
    assert!(drops.is_empty());
    let out = drain(&mut q, Instant::ZERO);
    let times: Vec<u64> = out.iter().map(|&(_, t)| t).collect();
    assert_eq!(times, vec![0, 0, 1_500_000, 3_000_000, 4_500_000, 6_000_000]);
    let s = q.stats();
    assert_eq!((s.enqueued.packets, s.dequeued.packets, s.dequeued.bytes), (6, 6, 9000));
    assert_eq!(s.sojourn_max, Duration(6_000_000));
    assert_eq!(s.mean_sojourn(), Some(Duration(15_000_000 / 6)));
}

#[test]
fn tokens_accumulate_only_up_to_burst() {
    let mut q = shaper(1_000_000, 3000, 100_000);
    let mut drops = Vec::new();
    // A long idle period fills the bucket to 3000 B, not more.
    let t0 = Instant(Duration::from_secs(10).0);
    for i in 0..3 {
        q.enqueue(t0, pkt(i, 1500), &mut drops);
    }
    let out = drain(&mut q, t0);
    assert_eq!(out.iter().map(|&(_, t)| t - t0.0).collect::<Vec<_>>(), vec![0, 0, 1_500_000]);
}

#[test]
fn drops_are_counted_by_reason() {
    let mut q = shaper(1_000_000, 2000, 4000);
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, pkt(0, 3000), &mut drops); // longer than the bucket: can never leave
    for i in 1..5 {
        q.enqueue(Instant::ZERO, pkt(i, 1500), &mut drops); // the 3rd and 4th overflow 4000 B
    }
    assert_eq!(drops.len(), 3);
    let s = q.stats();
    assert_eq!(s.drops(DropReason::Overlimit).packets, 1);
    assert_eq!(s.drops(DropReason::QueueFull).packets, 2);
    assert_eq!(s.dropped.bytes, 6000);
    assert_eq!(q.backlog_bytes(), 3000);
}

#[test]
fn config_errors_name_the_field() {
    let e = EnforcerConfig::from_toml("kind = \"fifo\"\nrate = \"10mbit\"\nburst = \"10kb\"").unwrap_err();
    assert!(e.message.contains("limit"), "{e}");
    let zero = FifoShaperConfig { rate: Rate(0), burst: Bytes(10_000), limit: Bytes(64_000), overhead: Bytes(0) };
    assert_eq!(zero.validate().unwrap_err().field, "rate");
    let zero = FifoShaperConfig { rate: Rate(1000), burst: Bytes(0), limit: Bytes(64_000), overhead: Bytes(0) };
    assert_eq!(zero.validate().unwrap_err().field, "burst");
    let zero = FifoShaperConfig { rate: Rate(1000), burst: Bytes(10_000), limit: Bytes(0), overhead: Bytes(0) };
    assert_eq!(FifoShaper::new(&zero, None).err().unwrap().field, "limit");
    let c = EnforcerConfig::from_toml("kind = \"fifo\"\nrate = \"10mbit\"\nburst = \"10kb\"\nlimit = \"64kb\"").unwrap();
    assert!(c.is_queueing());
    assert!(c.build(None).is_ok());
}

/// With `overhead = 14` a 1500-byte packet counts as the 1514-byte frame Linux's tbf and htb count:
/// a 15 kB queue holds nine of them, not ten, and at 1 MB/s they leave 1.514 ms apart.
#[test]
fn overhead_counts_against_the_limit_and_the_rate() {
    let with = |overhead: u64| {
        let cfg = FifoShaperConfig { rate: Rate(1_000_000), burst: Bytes(1514), limit: Bytes(15_000), overhead: Bytes(overhead) };
        let mut q = FifoShaper::new(&cfg, None).unwrap();
        let mut drops = Vec::new();
        for i in 0..12 {
            q.enqueue(Instant::ZERO, pkt(i, 1500), &mut drops);
        }
        (drops.len(), drain(&mut q, Instant::ZERO))
    };
    let (dropped_ip, sent_ip) = with(0);
    let (dropped_l2, sent_l2) = with(14);
    assert_eq!((dropped_ip, sent_ip.len()), (2, 10));
    assert_eq!((dropped_l2, sent_l2.len()), (3, 9));
    assert_eq!(sent_l2[1].1 - sent_l2[0].1, 1_514_000, "each frame's 1514 bytes at 1 MB/s");
    let parsed = EnforcerConfig::from_toml("kind = \"fifo\"\nrate = \"8mbit\"\nburst = 3000\nlimit = 15000\n").unwrap();
    let EnforcerConfig::Fifo(c) = parsed else { panic!("a fifo") };
    assert_eq!(c.overhead, Bytes(0), "IP bytes unless configured");
}
