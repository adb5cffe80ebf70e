//! `ratekit testbed run`: real Linux TCP between network namespaces through ratekit's data
//! plane (issue 5, deliverable 5).
//!
//! ```text
//!  sender ns               middlebox ns                         receiver ns
//!  snd0 10.199.0.{1+c} ── mb-s ─[ratekit middlebox: loss, delay]─ mb-r ── rcv0 10.199.0.{10+a}
//!                                 (enforcer here: middlebox)     (tc-BPF / tbf / htb on mb-r egress)
//! ```
//! The middlebox always runs (it is the delay: this kernel has no netem), forwarding Ethernet
//! frames both ways with RTT/2 of delay each way. The enforcer sits in the middlebox, or on the
//! egress of mb-r towards the receiver (the middlebox's AF_PACKET transmissions pass the clsact
//! and root qdisc hooks there). Aggregate a is the receiver address 10.199.0.{10+a}; RTT class c
//! (the c-th smallest distinct RTT) is the sender address 10.199.0.{1+c}, whose frames the
//! middlebox delays by that RTT/2 each way (docs/testbed.md, "Mixed RTTs").
//! Teardown: the namespaces are RAII guards (deleting a namespace deletes its links, qdiscs and
//! BPF attachments), a signal handler deletes them on SIGINT/SIGTERM/SIGHUP, tcpdump dies with
//! us (PR_SET_PDEATHSIG), and a later run sweeps namespaces of a SIGKILLed one.

pub mod plan;
pub mod summary;
pub mod tcp_counters;
pub mod traffic;

use crate::bpf::{BpfPolicer, LoadOptions};
use crate::maps::{Settings, BPF_DROP_REASONS};
use crate::netns::{self, veth_pair, Netns};
use crate::pipeline::PipelineConfig;
use crate::tc::Direction;
use ratekit_core::{DropReason, EnforcerConfig};
use plan::{receiver_addr, sender_addr, Plan};
use ratekit_lab::scenario::{Placement, ScenarioError};
use ratekit_lab::summary::{EnforcerCounts, LinkCounts, Summary};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    #[error("{0}")]
    Netns(#[from] netns::NetnsError),
    #[error("tc-BPF: {0}")]
    Bpf(#[from] crate::bpf::BpfError),
    #[error("middlebox: {0}")]
    Middlebox(#[from] crate::middlebox::MiddleboxError),
    #[error("traffic: {0}")]
    Send(#[from] traffic::SendError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestbedError {
    let what = what.into();
    move |source| TestbedError::Io { what, source }
}

/// Runs `sc` and writes summary.json (and windows.csv, sender.pcap, receiver.pcap) into `out`.
pub fn run(plan: &Plan, out: &Path, progress: impl Fn(&str)) -> Result<Summary, TestbedError> {
    netns::install_signal_cleanup();
    for stale in netns::sweep_stale() {
        progress(&format!("removed stale namespace {stale}"));
    }
    std::fs::create_dir_all(out).map_err(io(format!("creating {}", out.display())))?;
    let sc = &plan.resolved;
    let s = &sc.scenario;
    let placement = s.testbed.enforcer_at;
    let first = &sc.aggregates[0];

    progress("building namespaces");
    let snd = Netns::create("snd")?;
    let mb = Netns::create("mb")?;
    let rcv = Netns::create("rcv")?;
    veth_pair(&snd, "snd0", None, &mb, "mb-s", None)?;
    veth_pair(&mb, "mb-r", None, &rcv, "rcv0", None)?;
    for c in 0..plan.rtts.len() {
        snd.exec(&["ip", "addr", "add", &format!("{}/24", sender_addr(c)), "dev", "snd0"])?;
    }
    for a in &sc.aggregates {
        rcv.exec(&["ip", "addr", "add", &format!("{}/24", receiver_addr(a.id)), "dev", "rcv0"])?;
    }
    // Permanent neighbours: ARP would cross the middlebox's delay line, so each run's first SYN
    // would wait a round trip for it and Linux would start from twice the path's RTT (its SYN's
    // timestamp precedes neighbour resolution): min_rtt, srtt and the first RTO all doubled. A
    // server talks to a gateway whose address it has cached.
    let (snd_mac, rcv_mac) = (mac(&snd, "snd0")?, mac(&rcv, "rcv0")?);
    for a in &sc.aggregates {
        snd.exec(&["ip", "neigh", "replace", &receiver_addr(a.id).to_string(), "lladdr", &rcv_mac, "dev", "snd0", "nud", "permanent"])?;
    }
    for c in 0..plan.rtts.len() {
        rcv.exec(&["ip", "neigh", "replace", &sender_addr(c).to_string(), "lladdr", &snd_mac, "dev", "rcv0", "nud", "permanent"])?;
    }

    let mut bpf = None;
    match placement {
        Placement::Tc => {
            let opts = LoadOptions { settings: Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 0 }, ..Default::default() };
            let policer = BpfPolicer::load(&first.enforcer, &opts)?;
            let ifindex = in_ns(&mb, || crate::tc::ifindex("mb-r"))??;
            in_ns(&mb, || policer.attach(ifindex, Direction::Egress))??;
            bpf = Some(policer);
        }
        Placement::Tbf => {
            // A token bucket runs as tbf with a queue of one MTU, which then drops what finds no
            // tokens, as a policer does (but holds one packet); a FIFO shaper is tbf itself.
            let (rate, burst, limit, overhead) = match &first.enforcer {
                EnforcerConfig::TokenBucket(c) => (c.rate, c.burst.0, 1514, 0),
                EnforcerConfig::Fifo(c) => (c.rate, c.burst.0, c.limit.0, c.overhead.0),
                _ => unreachable!("checked by the plan"),
            };
            let (rate, burst, limit) = (format!("{}bit", rate.bits_per_sec()), burst.to_string(), limit.to_string());
            add_root_qdisc(&mb, overhead, &["tbf", "rate", &rate, "burst", &burst, "limit", &limit])?;
        }
        Placement::Htb => {
            let EnforcerConfig::Fifo(c) = &first.enforcer else { unreachable!("checked by the plan") };
            let rate = format!("{}bit", c.rate.bits_per_sec());
            add_root_qdisc(&mb, c.overhead.0, &["handle", "1:", "htb", "default", "1"])?;
            mb.exec(&["tc", "class", "add", "dev", "mb-r", "parent", "1:", "classid", "1:1", "htb", "rate", &rate, "ceil", &rate,
                "burst", &c.burst.0.to_string()])?;
            mb.exec(&["tc", "qdisc", "add", "dev", "mb-r", "parent", "1:1", "handle", "10:", "bfifo", "limit", &c.limit.0.to_string()])?;
        }
        Placement::Middlebox => {}
    }
    if let Some(link) = &s.aggregates[0].secondary {
        // The plan allows it only with the enforcer in tc-BPF or the middlebox, both before the
        // root qdisc, and for one aggregate. A link has no burst: two packets is the least that
        // tbf passes every packet with.
        let rate = format!("{}bit", link.rate.bits_per_sec());
        add_root_qdisc(&mb, 0, &["tbf", "rate", &rate, "burst", "3000", "limit", &link.buffer.0.to_string()])?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mb_stop = Arc::new(AtomicBool::new(false));
    let pipeline = PipelineConfig {
        enforcer: (placement == Placement::Middlebox).then(|| first.enforcer.clone()),
        delay: ratekit_core::Duration(plan.rtts[0].0 / 2),
        host_delays: plan.rtts.iter().enumerate().map(|(c, rtt)| (sender_addr(c).into(), ratekit_core::Duration(rtt.0 / 2))).collect(),
        loss: first.cfg.loss,
        seed: s.seed,
        link_rate: match first.enforcer.kind() {
            "red" | "cpq" | "dscd" => Some(first.rate),
            _ => None,
        },
        ..Default::default()
    };
    let middlebox = {
        let mb_name = mb.name.clone();
        let mb_stop = mb_stop.clone();
        std::thread::spawn(move || {
            enter(&mb_name)?;
            crate::middlebox::run("mb-s", "mb-r", pipeline, &mb_stop).map_err(TestbedError::from)
        })
    };

    // On the veth peers in the middlebox namespace, not on snd0 or rcv0: a packet socket on the
    // sender's own device changes how Linux sends (docs/testbed.md, "Captures"), while its peer
    // sees every frame at the instant it leaves or reaches the host, a veth having no wire.
    let mut captures = Vec::new();
    for (wanted, dev, file) in [(s.testbed.pcap, "mb-s", "sender.pcap"), (s.testbed.pcap_receiver, "mb-r", "receiver.pcap")] {
        if wanted {
            let mut cmd = mb.command("tcpdump");
            // -Z root: dropping privileges would clear PR_SET_PDEATHSIG.
            cmd.args(["-Z", "root", "-i", dev, "-s", &s.testbed.pcap_snaplen.to_string(), "-w"]).arg(out.join(file));
            captures.push(spawn_child(cmd, "tcpdump")?);
        }
    }

    // Time 0 is a moment after the receivers listen; windows count from there.
    let duration = Duration::from_nanos(s.duration.0);
    let window = Duration::from_nanos(s.measure.window.0);
    let windows = (duration.as_nanos() / window.as_nanos()) as usize + 1;
    let t0 = Instant::now() + Duration::from_millis(300);
    let end = t0 + duration;
    let rec = Arc::new(traffic::Recorder::new(t0, end, window, plan.flows.len(), windows + 8));
    let mut receivers = Vec::new();
    for a in &sc.aggregates {
        let (tx, rx) = std::sync::mpsc::channel();
        let (rec, stop, name, addr) = (rec.clone(), stop.clone(), rcv.name.clone(), receiver_addr(a.id));
        receivers.push(std::thread::spawn(move || {
            if let Err(e) = enter(&name) {
                let _ = tx.send(Err(std::io::Error::other(e.to_string())));
                return;
            }
            traffic::receive(addr, rec, stop, tx)
        }));
        rx.recv().map_err(|_| io("receiver")(std::io::Error::other("receiver thread died")))?.map_err(io(format!("listening on {addr}")))?;
    }

    let tcp_before = tcp_counters::read(&snd)?;
    progress(&format!("running {} flows for {:.1} s", plan.flows.len(), duration.as_secs_f64()));
    let senders: Vec<_> = plan
        .flows
        .iter()
        .map(|f| {
            let (f, name, stop, seed, rec) = (f.clone(), snd.name.clone(), stop.clone(), s.seed, rec.clone());
            std::thread::spawn(move || -> Result<_, TestbedError> {
                enter(&name)?;
                Ok(traffic::send(&f, sender_addr(f.rtt_class), receiver_addr(f.aggregate), end, seed, &rec, &stop)?)
            })
        })
        .collect();
    let mut first_error = None;
    let mut flow_tcp = Vec::new();
    for h in senders {
        match h.join().expect("sender thread panicked") {
            Ok(info) => flow_tcp.extend(info),
            Err(e) => drop(first_error.get_or_insert(e)),
        }
    }
    // The writers stopped at `end` (each within one write timeout); what their buffers still
    // send belongs to no window and to no count, as the simulator's run ends at its duration.
    let sender_tcp = tcp_counters::delta(&tcp_before, &tcp_counters::read(&snd)?);
    // Closing connections drain for an RTT or so before the receivers and the middlebox stop.
    let longest_rtt = plan.rtts.last().expect("a plan has flows");
    std::thread::sleep(Duration::from_millis(200) + Duration::from_nanos(longest_rtt.0 * 2));
    stop.store(true, Ordering::Relaxed);
    for r in receivers {
        let _ = r.join();
    }
    mb_stop.store(true, Ordering::Relaxed);
    let mb_report = middlebox.join().expect("middlebox thread panicked")?;
    if let Some(e) = first_error {
        return Err(e);
    }

    let counts: Vec<EnforcerCounts> = match placement {
        Placement::Middlebox => sc
            .aggregates
            .iter()
            .map(|a| {
                let ip = receiver_addr(a.id).to_string();
                mb_report.aggregates.iter().find(|(k, _)| *k == ip).map_or(EnforcerCounts::default(), |(_, st)| EnforcerCounts {
                    arrivals: st.arrivals,
                    drops: st.dropped_packets,
                    drops_by_reason: st.drops_by_reason.clone(),
                })
            })
            .collect(),
        Placement::Tc => {
            let stats = bpf.as_ref().unwrap().stats()?;
            sc.aggregates
                .iter()
                .map(|a| {
                    let ip = std::net::IpAddr::V4(receiver_addr(a.id));
                    stats.iter().find(|(k, _)| k.ip() == ip).map_or(EnforcerCounts::default(), |(_, st)| EnforcerCounts {
                        arrivals: st.passed_packets + st.dropped_packets,
                        drops: st.dropped_packets,
                        drops_by_reason: BPF_DROP_REASONS
                            .iter()
                            .zip(st.drops_by_reason)
                            .filter(|&(_, n)| n > 0)
                            .map(|(r, n)| (r.as_str(), n))
                            .collect(),
                    })
                })
                .collect()
        }
        // tbf drops what finds no tokens (a policer's overlimit); htb's bfifo what finds no room.
        Placement::Tbf => vec![qdisc_counts(&mb, "mb-r", DropReason::Overlimit)?],
        Placement::Htb => vec![qdisc_counts(&mb, "mb-r", DropReason::QueueFull)?],
    };
    let secondary_link = match &s.aggregates[0].secondary {
        Some(_) => {
            let c = qdisc_counts(&mb, "mb-r", DropReason::QueueFull)?;
            Some(LinkCounts { packets: c.arrivals, drops: c.drops })
        }
        None => None,
    };
    let summary = summary::build(plan, &rec, &counts, &mb_report, sender_tcp, flow_tcp, secondary_link);
    summary::write(&summary, &rec, plan, out).map_err(io(format!("writing results to {}", out.display())))?;
    drop(bpf);
    Ok(summary)
}

/// The MAC address of `dev` in `ns`.
fn mac(ns: &Netns, dev: &str) -> Result<String, TestbedError> {
    let out = ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")])?;
    Ok(out.trim().to_string())
}

/// Runs `f` on a scoped thread inside `ns` (setns affects only the calling thread).
fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> Result<T, TestbedError> {
    std::thread::scope(|s| s.spawn(|| -> Result<T, TestbedError> {
        ns.enter().map_err(io(format!("entering {}", ns.name)))?;
        Ok(f())
    }).join().expect("namespace thread panicked"))
}

fn enter(name: &str) -> Result<(), TestbedError> {
    let f = std::fs::File::open(format!("/run/netns/{name}")).map_err(io(format!("opening netns {name}")))?;
    use std::os::fd::AsRawFd;
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io(format!("entering netns {name}"))(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A child process killed when this guard drops, and when we die (PR_SET_PDEATHSIG).
pub struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(mut cmd: std::process::Command, what: &str) -> Result<Child, TestbedError> {
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let child = cmd.spawn().map_err(io(format!("starting {what} (run scripts/setup.sh)")))?;
    std::thread::sleep(Duration::from_millis(300)); // let it open the interface before traffic starts
    Ok(Child(child))
}

/// The root qdisc's packets sent and dropped on `dev` (`tc -s qdisc`), its drops named `reason`.
fn qdisc_counts(ns: &Netns, dev: &str, reason: DropReason) -> Result<EnforcerCounts, TestbedError> {
    let text = ns.exec(&["tc", "-s", "qdisc", "show", "dev", dev])?;
    let line = text.lines().find(|l| l.trim_start().starts_with("Sent ")).unwrap_or("");
    let words: Vec<&str> =
        line.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')').filter(|w| !w.is_empty()).collect();
    // "Sent 1234 bytes 56 pkt (dropped 7, overlimits 8 requeues 0)"
    let before = |key: &str| words.windows(2).find(|w| w[1] == key).and_then(|w| w[0].parse().ok()).unwrap_or(0u64);
    let after = |key: &str| words.windows(2).find(|w| w[0] == key).and_then(|w| w[1].parse().ok()).unwrap_or(0u64);
    let sent = before("pkt");
    let dropped = after("dropped");
    let drops_by_reason = (dropped > 0).then(|| (reason.as_str(), dropped)).into_iter().collect();
    Ok(EnforcerCounts { arrivals: sent + dropped, drops: dropped, drops_by_reason })
}

/// Adds `qdisc` as the root of the middlebox's egress, with the size table that makes the kernel's
/// tbf or htb count a packet as ratekit's enforcers do, its IP length plus `overhead`: on an
/// Ethernet device they count the frame (IP + 14 bytes) unless told otherwise, so `overhead = 14`
/// needs none.
fn add_root_qdisc(mb: &Netns, overhead: u64, qdisc: &[&str]) -> Result<String, netns::NetnsError> {
    const ETHERNET_HEADER: i64 = 14;
    let delta = overhead as i64 - ETHERNET_HEADER;
    let delta_text = delta.to_string();
    let stab: &[&str] = if delta == 0 { &[] } else { &["stab", "overhead", &delta_text] };
    mb.exec(&[&["tc", "qdisc", "add", "dev", "mb-r", "root"], stab, qdisc].concat())
}
