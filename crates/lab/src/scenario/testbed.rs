//! The `[testbed]` table: how `ratekit testbed run` realises the scenario with real Linux TCP.

use serde::Deserialize;

/// Where the enforcer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Inside the userspace middlebox (any core enforcer).
    #[default]
    Middlebox,
    /// The tc-BPF program on the middlebox's egress towards the receiver.
    Tc,
    /// The kernel's tbf: with enforcer token_bucket, its queue one MTU (a policer that holds one
    /// packet); with enforcer fifo, the config's rate, burst and limit (what the simulator's FIFO
    /// shaper models exactly).
    Tbf,
    /// The kernel's htb class with a bfifo queue, as a shaper (enforcer: fifo).
    Htb,
}

impl Placement {
    /// The name in the scenario file and summary.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Middlebox => "middlebox",
            Placement::Tc => "tc",
            Placement::Tbf => "tbf",
            Placement::Htb => "htb",
        }
    }

    /// Whether the enforcer sees a flow's data after the forward one-way delay: on the
    /// middlebox's egress (tc-BPF, tbf, htb) it does; inside the middlebox it runs before the
    /// delay line.
    pub fn after_forward_delay(self) -> bool {
        self != Placement::Middlebox
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedTable {
    #[serde(default)]
    pub enforcer_at: Placement,
    /// Capture a pcap of the first `pcap_snaplen` bytes of each packet the sender sends or
    /// receives, at its veth peer (a tap on its own device changes how Linux sends).
    #[serde(default)]
    pub pcap: bool,
    /// Also capture at the receiver's veth peer: data as it reaches the receiver, after the
    /// delay line and the enforcer, and ACKs as they leave it. With `pcap`, a packet's forward
    /// delay and fate can be read from the two files.
    #[serde(default)]
    pub pcap_receiver: bool,
    #[serde(default = "default_snaplen")]
    pub pcap_snaplen: u32,
}

impl Default for TestbedTable {
    fn default() -> Self {
        TestbedTable { enforcer_at: Placement::Middlebox, pcap: false, pcap_receiver: false, pcap_snaplen: default_snaplen() }
    }
}

fn default_snaplen() -> u32 {
    128
}
