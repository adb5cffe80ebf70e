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
    /// rk_lock's word: owned by the program.
    pub lock: u32,
    pub _pad: u32,
    pub tokens_nb: u64,
    pub last_ns: u64,
    pub stats: Stats,
}

/// `struct pq_node` (bpf/phantom.h): one node of the compiled policy tree.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PqNode {
    pub weight: u32,
    pub kind: u8,
    pub parent: u8,
    pub rank: u8,
    pub index: u8,
    pub first_slot: u8,
    pub n_children: u8,
    pub _pad: [u8; 2],
}

/// Bounds of the BPF PQP / BC-PQP (bpf/phantom.h).
pub const PQ_QUEUES: usize = 16;
pub const PQ_NODES: usize = 32;
pub const PQ_INNER: usize = 8;
pub const PQ_SLOTS: usize = 32;
pub const PQ_LEAF: u8 = 0;
pub const PQ_SHARE: u8 = 1;
pub const PQ_PRIORITY: u8 = 2;

/// `struct pq_params`: PQP's and BC-PQP's parameters (the burst fields are zero for PQP).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct PqParams {
    pub rate: u64,
    pub queue_size_nb: u64,
    pub theta_plus: u64,
    pub theta_minus: u64,
    pub window_ns: u64,
    pub window_budget_nb: u64,
    pub shape: u64,
    pub queues: u32,
    pub classify: u32,
    pub flat_share: u32,
    pub flat_fair: u32,
    /// Always 0 (the programs start loop cursors from it; see phantom.h).
    pub zero: u32,
    pub _pad: u32,
    pub nodes: [PqNode; PQ_NODES],
    pub children: [u8; PQ_SLOTS],
    pub leaf_of_queue: [u8; PQ_QUEUES],
    pub inner_node: [u8; PQ_INNER],
}

/// `struct pq_queues`: one aggregate's phantom queues (nano-bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct PqQueues {
    pub occupancy: [u64; PQ_QUEUES],
    pub backlog: [u64; PQ_INNER],
    pub active_weight: [u64; PQ_INNER],
    pub deferred: u64,
    pub defer_limit: u64,
    pub pending: [u64; PQ_INNER],
    pub active_len: [u8; PQ_INNER],
    pub slots: [u8; PQ_SLOTS],
}

/// `struct pqp_state` (bpf/pqp.c).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct PqpState {
    /// rk_lock's word: owned by the program.
    pub lock: u32,
    pub _pad: u32,
    pub last_ns: u64,
    pub shape: u64,
    pub q: PqQueues,
    pub stats: Stats,
}

/// `struct pq_burst`: BC-PQP's per-queue burst state.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PqBurst {
    pub magic_nb: u64,
    pub accepted: u64,
    pub accepted_prev: u64,
    pub window_end: u64,
}

/// `struct bcpqp_state` (bpf/bcpqp.c).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct BcpqpState {
    pub lock: u32,
    pub _pad: u32,
    pub last_ns: u64,
    pub shape: u64,
    pub magic_deadline: u64,
    pub burst_fills: u64,
    pub magic_removals: u64,
    pub q: PqQueues,
    pub burst: [PqBurst; PQ_QUEUES],
    pub stats: Stats,
}

/// Bounds of the BPF FairPolicer (bpf/fair_policer.c).
pub const FP_DEPTH: usize = 4;
pub const FP_WIDTH: usize = 4096;
pub const FP_ACTIVE: usize = 256;
pub const FP_CLASSES: usize = 64;
/// The allocation loop's cap (bpf_loop's largest count).
pub const FP_STEPS: u64 = 1 << 23;

/// `struct fp_params` (bpf/fair_policer.c).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct FpParams {
    pub rate: u64,
    pub bucket: u64,
    pub unit: u64,
    pub row_a: [u64; FP_DEPTH],
    pub row_b: [u64; FP_DEPTH],
    pub shape: u64,
    pub depth: u32,
    pub shift: u32,
    pub weights: [u32; FP_CLASSES],
}

/// `struct fp_flow`: an entry of the active list.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct FpFlow {
    pub flow: u64,
    pub quantum: u64,
}

/// `struct fp_state` (bpf/fair_policer.c).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct FpState {
    /// rk_lock's word: owned by the program.
    pub lock: u32,
    pub _pad: u32,
    pub last_ns: u64,
    pub shape: u64,
    pub credit_nb: u64,
    pub occupied: u64,
    pub owed: u64,
    pub head: u32,
    pub len: u32,
    pub allocation_steps: u64,
    pub residue_clears: u64,
    pub residue_bytes: u64,
    pub list_full_drops: u64,
    pub stats: Stats,
    pub active: [FpFlow; FP_ACTIVE],
    /// Row-major: `sketch[r][c]` is C's `sketch[r·FP_WIDTH + c]`.
    pub sketch: [[u32; FP_WIDTH]; FP_DEPTH],
}

/// Bounds of the BPF exact per-flow PQP / BC-PQP (bpf/flows.h).
pub const FQ_MAX_FLOWS: usize = 1024;
pub const FQ_CLASSES: usize = 16;
pub const FQ_SLOTS: usize = FQ_MAX_FLOWS + FQ_CLASSES;
pub const FQ_SLOTS_PADDED: usize = 1040;
pub const FQ_TABLE: usize = 2048;
/// `pos`, `overflow`, list links: none.
pub const FQ_NONE: u32 = u32::MAX;

/// `struct fq_params` (bpf/flows.h): the burst fields are zero for PQP.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct FqParams {
    pub rate: u64,
    pub queue_size_nb: u64,
    pub theta_plus: u64,
    pub theta_minus: u64,
    pub window_ns: u64,
    pub window_budget_nb: u64,
    pub shape: u64,
    pub max_flows: u32,
    pub burst: u32,
}

/// `struct fq_slot`: one flow's phantom queue and burst state.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct FqSlot {
    pub flow: u64,
    pub finish: u64,
    pub key: u64,
    pub magic_nb: u64,
    pub accepted: u64,
    pub window_end: u64,
    pub pos: u32,
    pub prev: u32,
    pub next: u32,
    pub listed: u16,
    pub cls: u16,
}

/// `struct fq_class`: one class's level, carry and heap.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct FqClass {
    pub level: u64,
    pub carry: u64,
    pub synced: u64,
    pub heap_len: u32,
    pub heap_base: u32,
    pub mapped: u32,
    pub overflow: u32,
}

/// `struct fq_flows` (bpf/flows.h): one aggregate's exact per-flow queues, by class.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct FqFlows {
    pub burst_fills: u64,
    pub magic_removals: u64,
    pub flows_created: u64,
    pub flows_reclaimed: u64,
    pub overflow_packets: u64,
    pub slots_used: u32,
    pub free_len: u32,
    pub win_head: u32,
    pub win_tail: u32,
    pub cursor: u32,
    pub _pad: u32,
    pub cls: [FqClass; FQ_CLASSES],
    pub heap: [u16; FQ_SLOTS_PADDED],
    pub free: [u16; FQ_SLOTS_PADDED],
    pub table: [u16; FQ_TABLE],
    pub slots: [FqSlot; FQ_SLOTS],
}

impl FqFlows {
    /// Occupancy of slot `s` in nano-bytes (FlowQueues::occupancy).
    pub fn occupancy(&self, s: usize) -> u64 {
        let q = &self.slots[s];
        if q.pos == FQ_NONE { 0 } else { q.finish - self.cls[q.cls as usize].level }
    }

    /// The slot of every flow in the table, by (class, flow).
    pub fn slots_by_flow(&self) -> std::collections::HashMap<(u16, u64), usize> {
        self.table.iter().filter(|&&e| e != 0).map(|&e| e as usize - 1).map(|s| ((self.slots[s].cls, self.slots[s].flow), s)).collect()
    }

    /// The non-empty slots of class `c` (its heap).
    pub fn heap_of(&self, c: usize) -> &[u16] {
        let k = &self.cls[c];
        &self.heap[k.heap_base as usize..(k.heap_base + k.heap_len) as usize]
    }
}

/// `struct fq_state` (bpf/pqp_flows.c): the flat program's aggregate, class 0 of `f`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct FqState {
    /// rk_lock's word: owned by the program.
    pub lock: u32,
    pub _pad: u32,
    pub last_ns: u64,
    pub shape: u64,
    pub stats: Stats,
    pub f: FqFlows,
}

/// `struct cf_params` (bpf/pqp_class_flows.c): classes of exact flows.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct CfParams {
    pub f: FqParams,
    pub fair_mask: u32,
    pub _pad: u32,
    pub heap_base: [u16; FQ_CLASSES],
    pub tree: PqParams,
}

/// `struct cf_state` (bpf/pqp_class_flows.c): the class tree, each class's demand, the flows.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct CfState {
    /// rk_lock's word: owned by the program.
    pub lock: u32,
    pub _pad: u32,
    pub last_ns: u64,
    pub shape: u64,
    pub stats: Stats,
    pub tree: PqQueues,
    pub demand: [PqBurst; PQ_QUEUES],
    pub f: FqFlows,
}

const _: () = assert!(std::mem::size_of::<PqNode>() == 12);
const _: () = assert!(std::mem::size_of::<PqParams>() == 520);
const _: () = assert!(std::mem::size_of::<PqQueues>() == 376);
const _: () = assert!(std::mem::size_of::<PqpState>() == 464);
const _: () = assert!(std::mem::size_of::<PqBurst>() == 32);
const _: () = assert!(std::mem::size_of::<BcpqpState>() == 1000);
const _: () = assert!(std::mem::size_of::<Settings>() == 16);
const _: () = assert!(std::mem::size_of::<AggKey>() == 16);
const _: () = assert!(std::mem::size_of::<Stats>() == 64);
const _: () = assert!(std::mem::size_of::<TbParams>() == 24);
const _: () = assert!(std::mem::size_of::<TbState>() == 88);
const _: () = assert!(std::mem::size_of::<FpParams>() == 360);
const _: () = assert!(std::mem::size_of::<FpFlow>() == 16);
const _: () = assert!(std::mem::size_of::<FpState>() == 69784);
const _: () = assert!(std::mem::size_of::<FqParams>() == 64);
const _: () = assert!(std::mem::size_of::<FqSlot>() == 64);
const _: () = assert!(std::mem::size_of::<FqClass>() == 40);
const _: () = assert!(std::mem::size_of::<FqFlows>() == 64 + 40 * FQ_CLASSES + 2 * 2 * FQ_SLOTS_PADDED + 2 * FQ_TABLE + 64 * FQ_SLOTS);
const _: () = assert!(std::mem::size_of::<FqState>() == 88 + std::mem::size_of::<FqFlows>());
const _: () = assert!(std::mem::size_of::<CfParams>() == 64 + 8 + 2 * FQ_CLASSES + 520);
const _: () = assert!(std::mem::size_of::<CfState>() == 88 + 376 + 32 * PQ_QUEUES + std::mem::size_of::<FqFlows>());

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
