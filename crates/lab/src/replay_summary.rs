//! Per-aggregate and per-flow accounting of a replay: offered and passed rate, drop rate,
//! drops by reason, Jain's index over the flows of each aggregate.
//!
//! Offered rates are bytes over the whole trace's span (first to last arrival), the same
//! denominator for every flow, so flow rates add up to their aggregate's and shares compare
//! directly. Passed rates use the same span, stretched to the aggregate's last departure when a
//! queueing enforcer still sends after the last arrival (a shaper draining its queues), so that
//! a shaped aggregate shows its shaped rate; its flows share that denominator.

use crate::driver::Outcome;
use ratekit_core::metrics::jain;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub passed_packets: u64,
    pub passed_bytes: u64,
    /// Dropped packets by reason (`overlimit`, `burst_control`, ...; `held` for packets a queueing
    /// enforcer still held when the replay ended).
    pub drops: BTreeMap<&'static str, u64>,
}

impl Counts {
    fn record(&mut self, bytes: u32, outcome: Outcome) {
        self.offered_packets += 1;
        self.offered_bytes += bytes as u64;
        match outcome {
            Outcome::Pass { .. } => {
                self.passed_packets += 1;
                self.passed_bytes += bytes as u64;
            }
            Outcome::Drop(r) => *self.drops.entry(r.as_str()).or_default() += 1,
            Outcome::Held => *self.drops.entry("held").or_default() += 1,
        }
    }

    pub fn drop_rate(&self) -> f64 {
        if self.offered_packets == 0 {
            0.0
        } else {
            1.0 - self.passed_packets as f64 / self.offered_packets as f64
        }
    }
}

/// Names aggregates and flows with dense indices as they first appear.
#[derive(Default)]
pub struct Accounting {
    aggregates: Vec<(String, Counts, HashMap<String, u32>)>,
    /// Per aggregate, the latest departure seen (queueing enforcers).
    last_departure: Vec<u64>,
    aggregate_index: HashMap<String, u32>,
    flows: Vec<(String, Counts)>,
    span: Option<(u64, u64)>,
}

impl Accounting {
    /// The dense index of aggregate `name`, allocating it on first sight.
    pub fn aggregate(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.aggregate_index.get(name) {
            return i;
        }
        let i = self.aggregates.len() as u32;
        self.aggregates.push((name.to_string(), Counts::default(), HashMap::new()));
        self.last_departure.push(0);
        self.aggregate_index.insert(name.to_string(), i);
        i
    }

    /// The dense index of flow `name` within aggregate `agg`.
    pub fn flow(&mut self, agg: u32, name: &str) -> u32 {
        let index = &mut self.aggregates[agg as usize].2;
        if let Some(&i) = index.get(name) {
            return i;
        }
        let i = self.flows.len() as u32;
        self.flows.push((name.to_string(), Counts::default()));
        index.insert(name.to_string(), i);
        i
    }

    pub fn saw_arrival(&mut self, time_ns: u64) {
        self.span = Some(match self.span {
            None => (time_ns, time_ns),
            Some((first, last)) => (first.min(time_ns), last.max(time_ns)),
        });
    }

    pub fn record(&mut self, agg: u32, flow: u32, bytes: u32, outcome: Outcome) {
        if let Outcome::Pass { departure: Some(d) } = outcome {
            let last = &mut self.last_departure[agg as usize];
            *last = (*last).max(d.0);
        }
        self.aggregates[agg as usize].1.record(bytes, outcome);
        self.flows[flow as usize].1.record(bytes, outcome);
    }

    pub fn finish(self, enforcer: &str) -> Summary {
        let (first, last) = self.span.unwrap_or((0, 0));
        let duration_ns = last - first;
        let over = |ns: u64| move |bytes: u64| (ns > 0).then(|| bytes as f64 * 8e9 / ns as f64);
        let rate = over(duration_ns);
        let mut totals = Counts::default();
        let mut passed_span_ns = duration_ns;
        let aggregates = self
            .aggregates
            .into_iter()
            .zip(self.last_departure)
            .map(|((name, counts, flow_index), last_departure)| {
                let span = last.max(last_departure) - first;
                passed_span_ns = passed_span_ns.max(span);
                let passed_rate = over(span);
                add(&mut totals, &counts);
                let mut flow_ids: Vec<u32> = flow_index.into_values().collect();
                flow_ids.sort_unstable();
                let flows: Vec<FlowSummary> = flow_ids
                    .iter()
                    .map(|&f| {
                        let (fname, c) = &self.flows[f as usize];
                        FlowSummary {
                            flow: fname.clone(),
                            offered_bps: rate(c.offered_bytes),
                            passed_bps: passed_rate(c.passed_bytes),
                            drop_rate: c.drop_rate(),
                            counts: c.clone(),
                        }
                    })
                    .collect();
                let passed: Vec<f64> = flows.iter().map(|f| f.counts.passed_bytes as f64).collect();
                AggregateSummary {
                    aggregate: name,
                    offered_bps: rate(counts.offered_bytes),
                    passed_bps: passed_rate(counts.passed_bytes),
                    drop_rate: counts.drop_rate(),
                    jain_index: jain(&passed),
                    counts,
                    flows,
                }
            })
            .collect();
        Summary {
            enforcer: enforcer.to_string(),
            duration_ns,
            offered_bps: rate(totals.offered_bytes),
            passed_bps: over(passed_span_ns)(totals.passed_bytes),
            drop_rate: totals.drop_rate(),
            totals,
            aggregates,
        }
    }
}

fn add(into: &mut Counts, c: &Counts) {
    into.offered_packets += c.offered_packets;
    into.offered_bytes += c.offered_bytes;
    into.passed_packets += c.passed_packets;
    into.passed_bytes += c.passed_bytes;
    for (k, v) in &c.drops {
        *into.drops.entry(k).or_default() += v;
    }
}

#[derive(Debug, Serialize)]
pub struct FlowSummary {
    pub flow: String,
    /// Bits per second over the trace's span; absent for a trace shorter than 1 ns.
    pub offered_bps: Option<f64>,
    pub passed_bps: Option<f64>,
    /// Fraction of the flow's packets dropped.
    pub drop_rate: f64,
    #[serde(flatten)]
    pub counts: Counts,
}

#[derive(Debug, Serialize)]
pub struct AggregateSummary {
    pub aggregate: String,
    pub offered_bps: Option<f64>,
    pub passed_bps: Option<f64>,
    pub drop_rate: f64,
    /// Jain's index over the passed rates of the aggregate's flows (unnormalised: it measures
    /// equality, not conformance to a weighted or priority policy).
    pub jain_index: Option<f64>,
    #[serde(flatten)]
    pub counts: Counts,
    pub flows: Vec<FlowSummary>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub enforcer: String,
    pub duration_ns: u64,
    pub offered_bps: Option<f64>,
    pub passed_bps: Option<f64>,
    pub drop_rate: f64,
    #[serde(flatten)]
    pub totals: Counts,
    pub aggregates: Vec<AggregateSummary>,
}

/// A rate in bits per second in tc's units, three decimals (`9.984mbit`).
pub fn fmt_bps(bps: Option<f64>) -> String {
    let Some(b) = bps else { return "-".into() };
    let (v, unit) = if b >= 1e9 {
        (b / 1e9, "gbit")
    } else if b >= 1e6 {
        (b / 1e6, "mbit")
    } else if b >= 1e3 {
        (b / 1e3, "kbit")
    } else {
        (b, "bit")
    };
    format!("{v:.3}{unit}")
}

fn fmt_drops(d: &BTreeMap<&'static str, u64>) -> String {
    if d.is_empty() {
        return "-".into();
    }
    d.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

impl Summary {
    /// A human-readable table; at most `max_rows` aggregates and flows each (the JSON has all).
    pub fn render(&self, max_rows: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} packets over {:.3} s, offered {}, passed {}, drop rate {:.2}% ({})",
            self.enforcer,
            self.totals.offered_packets,
            self.duration_ns as f64 * 1e-9,
            fmt_bps(self.offered_bps),
            fmt_bps(self.passed_bps),
            100.0 * self.drop_rate,
            fmt_drops(&self.totals.drops)
        );
        let _ = writeln!(s, "{:<16} {:>14} {:>14} {:>8} {:>6}  drops", "aggregate", "offered", "passed", "drop%", "jain");
        for a in self.aggregates.iter().take(max_rows) {
            let _ = writeln!(
                s,
                "{:<16} {:>14} {:>14} {:>8.2} {:>6}  {}",
                a.aggregate,
                fmt_bps(a.offered_bps),
                fmt_bps(a.passed_bps),
                100.0 * a.drop_rate,
                a.jain_index.map(|j| format!("{j:.3}")).unwrap_or_else(|| "-".into()),
                fmt_drops(&a.counts.drops)
            );
        }
        if self.aggregates.len() > max_rows {
            let _ = writeln!(s, "... and {} more aggregates (see the summary JSON)", self.aggregates.len() - max_rows);
        }
        let _ = writeln!(s, "{:<16} {:<16} {:>14} {:>14} {:>8}  drops", "aggregate", "flow", "offered", "passed", "drop%");
        let mut shown = 0;
        let total_flows: usize = self.aggregates.iter().map(|a| a.flows.len()).sum();
        'outer: for a in &self.aggregates {
            for f in &a.flows {
                if shown == max_rows {
                    break 'outer;
                }
                shown += 1;
                let _ = writeln!(
                    s,
                    "{:<16} {:<16} {:>14} {:>14} {:>8.2}  {}",
                    a.aggregate,
                    f.flow,
                    fmt_bps(f.offered_bps),
                    fmt_bps(f.passed_bps),
                    100.0 * f.drop_rate,
                    fmt_drops(&f.counts.drops)
                );
            }
        }
        if total_flows > shown {
            let _ = writeln!(s, "... and {} more flows (see the summary JSON)", total_flows - shown);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratekit_core::Instant;

    #[test]
    fn passed_rate_stretches_to_the_last_departure() {
        let mut acc = Accounting::default();
        let (a, b) = (acc.aggregate("a"), acc.aggregate("b"));
        let (fa, fb) = (acc.flow(a, "1"), acc.flow(b, "1"));
        acc.saw_arrival(0);
        acc.saw_arrival(1_000_000_000);
        // a's shaper sends its second kilobyte a second after the last arrival.
        acc.record(a, fa, 1000, Outcome::Pass { departure: Some(Instant(500_000_000)) });
        acc.record(a, fa, 1000, Outcome::Pass { departure: Some(Instant(2_000_000_000)) });
        acc.record(b, fb, 1000, Outcome::Pass { departure: Some(Instant(900_000_000)) });
        let s = acc.finish("x");
        assert_eq!(s.aggregates[0].offered_bps, Some(16_000.0));
        assert_eq!(s.aggregates[0].passed_bps, Some(8_000.0));
        assert_eq!(s.aggregates[0].flows[0].passed_bps, Some(8_000.0));
        assert_eq!(s.aggregates[1].passed_bps, Some(8_000.0));
        assert_eq!(s.passed_bps, Some(12_000.0));
    }

    #[test]
    fn rates_use_the_trace_span() {
        let mut acc = Accounting::default();
        let a = acc.aggregate("a");
        let f = acc.flow(a, "1");
        acc.saw_arrival(0);
        acc.saw_arrival(1_000_000_000);
        acc.record(a, f, 1000, Outcome::Pass { departure: None });
        acc.record(a, f, 1000, Outcome::Drop(ratekit_core::DropReason::Overlimit));
        let s = acc.finish("x");
        assert_eq!(s.aggregates[0].flows[0].offered_bps, Some(16_000.0));
        assert_eq!(s.aggregates[0].passed_bps, Some(8_000.0));
        assert_eq!(s.drop_rate, 0.5);
        assert_eq!(fmt_bps(Some(9_984_000.0)), "9.984mbit");
    }
}
