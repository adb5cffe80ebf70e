//! Rust mirrors of the BPF map structs in `bpf/common.h` and each program's file: same field
//! names, same order, explicit padding, and a compile-time size check per struct so a change on
//! one side that is not made on the other fails the build.

use bytemuck::{Pod, Zeroable};

/// Drop reasons as numbered in `bpf/common.h` (`enum rk_drop_reason`).
pub const BPF_DROP_REASONS: [ratekit_core::DropReason; 3] = [
    ratekit_core::DropReason::Overlimit,
    ratekit_core::DropReason::BurstControl,
    ratekit_core::DropReason::FlowThreshold,
];
/// Slots in `rk_stats.drops_by_reason` (one spare).
pub const RK_DROP_REASONS: usize = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Settings {
    pub match_dst: u32,
    pub prefix4: u32,
    pub prefix6: u32,
    pub test_clock: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Pod, Zeroable)]
pub struct AggKey {
    pub addr: [u8; 16],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Stats {
    pub passed_packets: u64,
    pub passed_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub drops_by_reason: [u64; RK_DROP_REASONS],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TbParams {
    pub rate: u64,
    pub burst: u64,
    pub initial: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TbState {
    /// `struct bpf_spin_lock`: owned by the kernel, never written from userspace.
    pub lock: u32,
    pub _pad: u32,
    pub tokens_nb: u64,
    pub last_ns: u64,
    pub stats: Stats,
}

const _: () = assert!(std::mem::size_of::<Settings>() == 16);
const _: () = assert!(std::mem::size_of::<AggKey>() == 16);
const _: () = assert!(std::mem::size_of::<Stats>() == 64);
const _: () = assert!(std::mem::size_of::<TbParams>() == 24);
const _: () = assert!(std::mem::size_of::<TbState>() == 88);

impl AggKey {
    /// The aggregate key the BPF programs derive: IPv4 as ::ffff:a.b.c.d, masked to the prefix.
    pub fn from_ip(ip: std::net::IpAddr, prefix4: u32, prefix6: u32) -> AggKey {
        let (v6, prefix) = match ip {
            std::net::IpAddr::V4(a) => (a.to_ipv6_mapped(), 96 + prefix4.min(32)),
            std::net::IpAddr::V6(a) => (a, prefix6.min(128)),
        };
        let bits = u128::from(v6);
        let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
        AggKey { addr: (bits & mask).to_be_bytes() }
    }

    pub fn ip(&self) -> std::net::IpAddr {
        let v6 = std::net::Ipv6Addr::from(self.addr);
        match v6.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => std::net::IpAddr::V6(v6),
        }
    }

    /// The aggregate id ratekit-core sees (`Packet::aggregate`): the folded address.
    pub fn id(&self) -> u64 {
        let v = u128::from_be_bytes(self.addr);
        (v as u64) ^ ((v >> 64) as u64)
    }
}
