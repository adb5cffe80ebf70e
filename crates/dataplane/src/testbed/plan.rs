//! What the testbed makes of a scenario (ratekit-lab's, the file `ratekit sim` reads): one list
//! of flows and the RTTs the middlebox emulates (one sender address per distinct RTT), once it
//! is checked that real Linux TCP between namespaces can run it. The simulator's model of the path (link_rate,
//! link_steps, buffer, host_rate) has no counterpart here and is ignored, except a `secondary` link,
//! which becomes a tbf behind the enforcer; what would change the traffic itself and the testbed
//! cannot do is refused, naming the field.

use ratekit_core::Duration;
use ratekit_lab::scenario::{self, AppConfig, CcKind, Placement, Resolved, ScenarioError, DEFAULT_ACK_JITTER, DEFAULT_ACK_JITTER_MEMORY, DEFAULT_ACK_JITTER_SLOW, DEFAULT_RECEIVER_WAKEUP};
use std::net::Ipv4Addr;
use std::path::Path;

/// The receiver namespace's address for an aggregate.
pub fn receiver_addr(aggregate: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 199, 0, 10 + aggregate as u8)
}

/// The sender's address for an RTT class: the middlebox delays by address.
pub fn sender_addr(rtt_class: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 199, 0, 1 + rtt_class as u8)
}

/// One flow as the testbed runs it.
#[derive(Debug, Clone)]
pub struct Flow {
    pub id: u32,
    pub aggregate: u32,
    pub cc: CcKind,
    pub start: Duration,
    /// Uniform extra start delay in [0, start_jitter), drawn from the run's seed.
    pub start_jitter: Duration,
    pub app: AppConfig,
    /// Carried as the DSCP.
    pub class: u8,
    pub rtt: Duration,
    /// Index into `Plan::rtts`: the flow is sent from that RTT's sender address.
    pub rtt_class: usize,
}

pub struct Plan {
    pub resolved: Resolved,
    /// In the simulator's order: by aggregate, then as listed.
    pub flows: Vec<Flow>,
    /// The distinct RTTs the flows ask for, ascending.
    pub rtts: Vec<Duration>,
}

/// The UDP payload starts with the receiver's 8-byte flow header, after 28 bytes of IP and UDP.
const MIN_DATAGRAM: u64 = 28 + 8;
/// Each aggregate is a receiver address 10.199.0.{10 + id}.
const MAX_AGGREGATES: usize = 200;
/// Each distinct RTT is a sender address 10.199.0.{1 + class}, below the receivers'.
pub const MAX_RTT_CLASSES: usize = 9;

pub fn load(path: &Path) -> Result<Plan, ScenarioError> {
    plan(scenario::load(path)?, &path.display().to_string())
}

/// Checks that the testbed can run `resolved`; `file` names it in errors.
pub fn plan(resolved: Resolved, file: &str) -> Result<Plan, ScenarioError> {
    let err = |field: String, message: &str| ScenarioError { file: file.into(), field, message: message.into() };
    let sc = &resolved.scenario;
    if sc.duration > Duration::from_secs(3600) {
        return Err(err("duration".into(), "the testbed runs at most 1 hour"));
    }
    if sc.measure.window < Duration::from_millis(10) {
        return Err(err("measure.window".into(), "the testbed's receivers count windows of at least 10ms"));
    }
    let mut rtts: Vec<Duration> = Vec::new();
    let machine_hz = host_hz();
    for (ai, a) in sc.aggregates.iter().enumerate() {
        for (fi, f) in a.flows.iter().enumerate() {
            let field = |k: &str| format!("aggregates[{ai}].flows[{fi}].{k}");
            if let Some(cc) = f.cc.as_slice().iter().find(|cc| !matches!(cc, CcKind::Cubic | CcKind::Reno | CcKind::Bbr)) {
                let why = match cc {
                    CcKind::Copa | CcKind::Vivace => "a user-space algorithm that only the simulator models",
                    _ => "not one the testbed runs",
                };
                return Err(err(field("cc"), &format!("'{}' is {why}: the testbed runs Linux's cubic, reno and bbr", cc.as_str())));
            }
            for &r in f.rtt.as_slice() {
                if !rtts.contains(&r) {
                    if rtts.len() == MAX_RTT_CLASSES {
                        return Err(err(field("rtt"), "the testbed gives each distinct RTT a sender address: at most 9 RTTs"));
                    }
                    rtts.push(r);
                }
            }
            if f.class > 63 {
                return Err(err(field("class"), "the testbed carries the class as the DSCP: 0..=63"));
            }
            check_app(&f.app).map_err(|(k, m)| err(field(&format!("app.{k}")), m))?;
            let unsupported = [
                ("stop", f.stop.is_some(), "the testbed's senders run to the end (or finish a finite transfer)"),
                ("via", !f.via.is_empty(), "the testbed has one enforcer on the path"),
                ("customer", f.customer.is_some(), "the testbed's aggregate is the receiver address"),
                ("pacing", f.pacing, "the testbed's sender namespace has no fq qdisc"),
                ("receiver_wakeup", f.receiver_wakeup != DEFAULT_RECEIVER_WAKEUP, "the testbed's receivers are real applications that wake when the machine wakes them"),
                ("ack_jitter", f.ack_jitter != DEFAULT_ACK_JITTER, "the testbed's timing noise is its machine's"),
                ("ack_jitter_slow", f.ack_jitter_slow != DEFAULT_ACK_JITTER_SLOW, "the testbed's timing noise is its machine's"),
                ("ack_jitter_memory", f.ack_jitter_memory != DEFAULT_ACK_JITTER_MEMORY, "the testbed's timing noise is its machine's"),
            ];
            if let Some((k, _, m)) = unsupported.into_iter().find(|(_, set, _)| *set) {
                return Err(err(field(k), m));
            }
            if let Some(hz) = machine_hz.filter(|&hz| hz != f.kernel_hz) {
                return Err(err(field("kernel_hz"), &format!("the testbed's flows run on this machine's kernel, CONFIG_HZ={hz}")));
            }
        }
    }
    let aggregates = &resolved.aggregates;
    if aggregates.len() > MAX_AGGREGATES {
        return Err(err("aggregates".into(), "the testbed gives each aggregate a receiver address: at most 200"));
    }
    let first = &aggregates[0];
    if aggregates.iter().any(|a| a.cfg.loss != first.cfg.loss || a.enforcer.kind() != first.enforcer.kind()) {
        return Err(err("aggregates".into(), "the testbed runs one enforcer config and loss for all aggregates"));
    }
    let placement = sc.testbed.enforcer_at;
    let kernel_kinds: &[&str] = match placement {
        Placement::Tbf => &["token_bucket", "fifo"],
        Placement::Htb => &["fifo"],
        Placement::Tc | Placement::Middlebox => &[],
    };
    if !kernel_kinds.is_empty() {
        if aggregates.len() != 1 {
            return Err(err("testbed.enforcer_at".into(), "the kernel tbf / htb baselines police one aggregate"));
        }
        if !kernel_kinds.contains(&first.enforcer.kind()) {
            let kinds: Vec<String> = kernel_kinds.iter().map(|k| format!("\"{k}\"")).collect();
            let m = format!("enforcer_at = \"{}\" needs kind = {}", placement.as_str(), kinds.join(" or "));
            return Err(err("enforcer.kind".into(), &m));
        }
    }
    if let Some(ai) = sc.aggregates.iter().position(|a| a.secondary.is_some()) {
        let field = format!("aggregates[{ai}].secondary");
        if !kernel_kinds.is_empty() {
            return Err(err(field, "the secondary link is a tbf at the root of the middlebox's egress, where the kernel baselines sit"));
        }
        if aggregates.len() != 1 {
            return Err(err(field, "the secondary link is one tbf on the middlebox's egress, which every aggregate would share: one aggregate only"));
        }
    }
    if placement == Placement::Tc {
        crate::bpf::BpfParams::from_config(&first.enforcer).map_err(|e| err("enforcer.kind".into(), &e.to_string()))?;
    }
    rtts.sort();
    let flows = aggregates
        .iter()
        .flat_map(|a| a.flows.iter().map(move |f| (a.id, f)))
        .enumerate()
        .map(|(id, (aggregate, f))| Flow {
            id: id as u32,
            aggregate,
            cc: f.cc,
            start: f.start,
            start_jitter: f.start_jitter,
            app: f.app.clone(),
            class: f.class as u8,
            rtt: f.rtt,
            rtt_class: rtts.binary_search(&f.rtt).expect("every flow's RTT was collected"),
        })
        .collect();
    Ok(Plan { resolved, flows, rtts })
}

/// (key in the app table, why) when the testbed has no sender for `app`.
fn check_app(app: &AppConfig) -> Result<(), (&'static str, &'static str)> {
    match app {
        AppConfig::Cbr { packet, .. } if packet.0 < MIN_DATAGRAM => {
            Err(("packet", "the testbed's datagrams hold IP, UDP and its 8-byte flow header: at least 36 bytes"))
        }
        AppConfig::Lognormal { .. } => Err(("kind", "the testbed has no sender for lognormal")),
        AppConfig::Video { .. } => Err(("kind", "the testbed has no video player (the simulator's player needs its receiver to send requests back); run it with `ratekit sim`")),
        _ => Ok(()),
    }
}

/// This kernel's CONFIG_HZ, from its config (/proc/config.gz or /boot/config-RELEASE) when one is there.
fn host_hz() -> Option<u32> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("zcat /proc/config.gz 2>/dev/null || cat /boot/config-{} 2>/dev/null", release.trim())])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.strip_prefix("CONFIG_HZ=")?.parse().ok())
}

#[cfg(test)]
pub(super) mod tests {
    use ratekit_lab::scenario::Resolved;

    /// One fifo-enforced aggregate at 1 Mbit/s holding `flows`, 5 s long (room for late starts).
    pub(in crate::testbed) fn resolve(flows: &str) -> Resolved {
        let text = format!("name = \"t\"\nduration = \"5s\"\n[enforcer]\nkind = \"fifo\"\nrate = \"1mbit\"\nburst = 1500\nlimit = 15000\n[[aggregates]]\nrate = \"1mbit\"\nflows = [{flows}]");
        ratekit_lab::scenario::parse(&text, "t.toml").unwrap()
    }

    /// Each flow keeps its own RTT and the class of it; the classes are the distinct RTTs in order.
    #[test]
    fn mixed_rtts_get_one_class_each() {
        let flows = r#"{ cc = "cubic", rtt = ["40ms", "10ms"], count = 4 }, { cc = "bbr", rtt = "10ms" }"#;
        let plan = super::plan(resolve(flows), "t.toml").unwrap();
        let ms = |d: ratekit_core::Duration| d.0 / 1_000_000;
        assert_eq!(plan.rtts.iter().map(|&d| ms(d)).collect::<Vec<_>>(), [10, 40]);
        let got: Vec<_> = plan.flows.iter().map(|f| (ms(f.rtt), f.rtt_class)).collect();
        assert_eq!(got, [(40, 1), (10, 0), (40, 1), (10, 0), (10, 0)]);
    }

    /// A flow that asks for another kernel's timer ticks than this machine's is refused by name;
    /// this machine's is accepted (on a machine whose kernel config is unreadable, both are).
    #[test]
    fn kernel_hz_must_be_the_machines() {
        let Some(hz) = super::host_hz() else { return };
        let other = if hz == 1000 { 250 } else { 1000 };
        assert!(super::plan(resolve(&format!(r#"{{ cc = "cubic", rtt = "10ms", kernel_hz = {hz} }}"#)), "t.toml").is_ok());
        let Err(e) = super::plan(resolve(&format!(r#"{{ cc = "cubic", rtt = "10ms", kernel_hz = {other} }}"#)), "t.toml") else {
            panic!("kernel_hz = {other} accepted on a CONFIG_HZ={hz} machine")
        };
        assert!(e.to_string().contains("kernel_hz") && e.to_string().contains(&format!("CONFIG_HZ={hz}")), "{e}");
    }

    /// A video player is the simulator's alone: the testbed refuses it by the flow's field.
    #[test]
    fn a_video_app_is_refused_by_name() {
        let flows = r#"{ cc = "cubic", rtt = "10ms" }, { cc = "bbr", rtt = "10ms", app = { kind = "video", length = "8s", ladder = ["300kbit"] } }"#;
        let Err(e) = super::plan(resolve(flows), "t.toml") else { panic!("a video app was accepted") };
        let e = e.to_string();
        assert!(e.contains("flows[1].app.kind") && e.contains("no video player"), "{e}");
    }

    /// Copa and PCC Vivace exist only in the simulator: the testbed refuses them by field.
    #[test]
    fn user_space_ccs_are_refused_by_name() {
        for cc in ["copa", "vivace"] {
            let flows = format!(r#"{{ cc = "cubic", rtt = "10ms" }}, {{ cc = "{cc}", rtt = "10ms" }}"#);
            let Err(e) = super::plan(resolve(&flows), "t.toml") else { panic!("{cc} accepted") };
            let e = e.to_string();
            assert!(e.contains("aggregates[0].flows[1].cc") && e.contains(cc) && e.contains("only the simulator"), "{e}");
        }
    }

    /// A secondary link is a tbf on the middlebox's egress: refused where a kernel baseline holds
    /// that root qdisc or where several aggregates would share it, accepted otherwise.
    #[test]
    fn a_secondary_link_needs_the_egress_root_and_one_aggregate() {
        let scenario = |at: &str, kind: &str, count: u32| {
            let text = format!("name = \"t\"\nduration = \"5s\"\n[testbed]\nenforcer_at = \"{at}\"\n[enforcer]\nkind = \"{kind}\"\nrate = \"1mbit\"\nburst = 1500\n[[aggregates]]\ncount = {count}\nrate = \"1mbit\"\nsecondary = {{ rate = \"2mbit\", buffer = \"20kb\" }}\nflows = [{{ cc = \"cubic\", rtt = \"10ms\" }}]");
            super::plan(ratekit_lab::scenario::parse(&text, "t.toml").unwrap(), "t.toml").map(|_| ()).map_err(|e| e.to_string())
        };
        assert_eq!(scenario("tc", "token_bucket", 1), Ok(()));
        assert_eq!(scenario("middlebox", "token_bucket", 1), Ok(()));
        let e = scenario("tbf", "token_bucket", 1).unwrap_err();
        assert!(e.contains("aggregates[0].secondary") && e.contains("kernel baselines"), "{e}");
        let e = scenario("tc", "token_bucket", 2).unwrap_err();
        assert!(e.contains("aggregates[0].secondary") && e.contains("one aggregate"), "{e}");
    }

    /// The testbed's own scenarios are ones it can run.
    #[test]
    fn the_testbed_scenarios_run_here() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/testbed");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            super::load(&path).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
        assert!(n > 0);
    }
}
