//! Loading the tc-BPF policers (libbpf-rs), feeding them their configuration, running them
//! through BPF_PROG_TEST_RUN and attaching them to interfaces.
//!
//! Why libbpf-rs rather than aya: it exposes BPF_PROG_TEST_RUN (`Program::test_run`), which the
//! conformance tests need and aya 0.14 does not; it attaches through libbpf's own clsact/tc
//! netlink code (`TcHook`); and it loads the objects with libbpf itself, so map pinning and
//! BTF-defined maps behave exactly as every C user of libbpf sees them.

use crate::maps::{AggKey, CfParams, FpParams, FqParams, PqNode, PqParams, Settings, Stats, TbParams, PQ_INNER, PQ_LEAF, PQ_NODES, PQ_PRIORITY, PQ_QUEUES, PQ_SHARE, PQ_SLOTS};
use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder, ProgramInput};
use ratekit_core::pqp::FlowQueuing;
use ratekit_core::{Classify, DropReason, EnforcerConfig, Verdict};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const TOKEN_BUCKET_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/token_bucket.bpf.o"));
const PQP_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pqp.bpf.o"));
const BCPQP_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bcpqp.bpf.o"));
const FAIR_POLICER_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fair_policer.bpf.o"));
const PQP_FLOWS_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pqp_flows.bpf.o"));
const PQP_CLASS_FLOWS_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pqp_class_flows.bpf.o"));

/// Offset of `tstamp` in `struct __sk_buff` (linux/bpf.h, stable UAPI), and the struct's size.
const SKB_TSTAMP_OFFSET: usize = 152;
const SKB_CTX_SIZE: usize = 192;
const TC_ACT_OK: u32 = 0;
const TC_ACT_SHOT: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    #[error("the BPF objects were not built (clang was missing at build time): run scripts/setup.sh and rebuild")]
    NotBuilt,
    #[error("'{0}' has no tc-BPF program: the data plane runs token_bucket, pqp, bcpqp (hashed or exact flows) and fair_policer (use the middlebox for the others)")]
    Unsupported(&'static str),
    #[error("{what} needs root (CAP_BPF and CAP_NET_ADMIN): {source}")]
    Privileges { what: String, source: libbpf_rs::Error },
    #[error("the kernel rejected the {program} program (verifier or missing feature): {source}\n{log}")]
    Load { program: String, source: libbpf_rs::Error, log: String },
    #[error("no ratekit tc-BPF program is attached to {0}")]
    NotAttached(String),
    #[error("no network interface named '{0}'")]
    NoSuchInterface(String),
    #[error("{what}: {source}")]
    Kernel { what: String, source: libbpf_rs::Error },
    #[error("{0}: the tc-BPF PQP/BC-PQP hold at most 16 queues and 8 inner policy nodes, nest at most one level below the root, and need rate × window × largest weight < 2^64 nano-bytes; use the middlebox for larger trees")]
    OutOfBounds(String),
    #[error("{0}: the tc-BPF FairPolicer holds a sketch of at most 4 x 4096 counters and at most 256 active flows per aggregate, and needs 256 x (bucket / token_unit + 1) <= 2^23 allocation steps; use the middlebox beyond that")]
    FairPolicerBounds(String),
    #[error("{0}: the tc-BPF exact per-flow PQP/BC-PQP holds at most 1024 flows per aggregate (over classes: fair classes × max_flows); use the middlebox beyond that")]
    FlowBounds(String),
    #[error("config: {0}")]
    Config(#[from] ratekit_core::ConfigError),
}

pub(crate) fn kernel(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> BpfError {
    let what = what.into();
    move |source| {
        if source.kind() == libbpf_rs::ErrorKind::PermissionDenied && unsafe { libc::geteuid() } != 0 {
            BpfError::Privileges { what, source }
        } else {
            BpfError::Kernel { what, source }
        }
    }
}

/// libbpf's messages (the verifier log among them), kept so a rejected program's error says why.
static LIBBPF_LOG: Mutex<String> = Mutex::new(String::new());

fn capture_libbpf_log() {
    fn print(level: libbpf_rs::PrintLevel, msg: String) {
        if level != libbpf_rs::PrintLevel::Debug {
            let mut log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
            if log.len() < 64 << 10 {
                log.push_str(&msg);
            }
        }
    }
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Info, print)));
}

/// Which BPF program implements a config, and its parameters as the program's params map holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BpfParams {
    TokenBucket(TbParams),
    Pqp(Box<PqParams>),
    Bcpqp(Box<PqParams>),
    FairPolicer(Box<FpParams>),
    /// PQP or BC-PQP with `flows = "exact"` (one program; `burst` tells them apart).
    PqpFlows(Box<FqParams>),
    /// The same with `classify = "class"`: a policy tree over classes of exact flows.
    PqpClassFlows(Box<CfParams>),
}

impl BpfParams {
    pub fn from_config(cfg: &EnforcerConfig) -> Result<Self, BpfError> {
        cfg.validate()?;
        match cfg {
            EnforcerConfig::TokenBucket(c) => Ok(BpfParams::TokenBucket(TbParams {
                rate: c.rate.bytes_per_sec(),
                burst: c.burst.0,
                initial: c.initial.unwrap_or(c.burst).0,
            })),
            EnforcerConfig::Pqp(c) if c.flows == FlowQueuing::Exact && c.classify == Classify::Class => {
                Ok(BpfParams::PqpClassFlows(Box::new(cf_params(c, None)?)))
            }
            EnforcerConfig::Bcpqp(c) if c.flows == FlowQueuing::Exact && c.classify == Classify::Class => {
                Ok(BpfParams::PqpClassFlows(Box::new(cf_params(&c.pqp(), Some(c))?)))
            }
            EnforcerConfig::Pqp(c) if c.flows == FlowQueuing::Exact => Ok(BpfParams::PqpFlows(Box::new(fq_params(c, None)?))),
            EnforcerConfig::Bcpqp(c) if c.flows == FlowQueuing::Exact => Ok(BpfParams::PqpFlows(Box::new(fq_params(&c.pqp(), Some(c))?))),
            EnforcerConfig::Pqp(c) => Ok(BpfParams::Pqp(Box::new(pq_params(c)?))),
            EnforcerConfig::Bcpqp(c) => Ok(BpfParams::Bcpqp(Box::new(bc_tree_params(c)?))),
            EnforcerConfig::FairPolicer(c) => Ok(BpfParams::FairPolicer(Box::new(fp_params(c)?))),
            other => Err(BpfError::Unsupported(other.kind())),
        }
    }

    /// The program's name, also the name of its object and of the pinned-state directory tag.
    pub fn program(&self) -> &'static str {
        match self {
            BpfParams::TokenBucket(_) => "token_bucket",
            BpfParams::Pqp(_) => "pqp",
            BpfParams::Bcpqp(_) => "bcpqp",
            BpfParams::FairPolicer(_) => "fair_policer",
            BpfParams::PqpFlows(_) => "pqp_flows",
            BpfParams::PqpClassFlows(_) => "pqp_class_flows",
        }
    }

    /// The state map's name of a program (as pinned).
    pub(crate) fn state_map_of(program: &str) -> &'static str {
        match program {
            "token_bucket" => "tb_state",
            "pqp" => "pqp_state",
            "bcpqp" => "bcpqp_state",
            "fair_policer" => "fp_state",
            "pqp_flows" => "fq_state",
            "pqp_class_flows" => "cf_state",
            _ => "unknown_state",
        }
    }

    fn object(&self) -> &'static [u8] {
        match self {
            BpfParams::TokenBucket(_) => TOKEN_BUCKET_OBJ,
            BpfParams::Pqp(_) => PQP_OBJ,
            BpfParams::Bcpqp(_) => BCPQP_OBJ,
            BpfParams::FairPolicer(_) => FAIR_POLICER_OBJ,
            BpfParams::PqpFlows(_) => PQP_FLOWS_OBJ,
            BpfParams::PqpClassFlows(_) => PQP_CLASS_FLOWS_OBJ,
        }
    }

    pub(crate) fn map_names(&self) -> (&'static str, &'static str) {
        match self {
            BpfParams::TokenBucket(_) => ("tb_params", Self::state_map_of(self.program())),
            BpfParams::Pqp(_) => ("pqp_params", Self::state_map_of(self.program())),
            BpfParams::Bcpqp(_) => ("bcpqp_params", Self::state_map_of(self.program())),
            BpfParams::FairPolicer(_) => ("fp_params", Self::state_map_of(self.program())),
            BpfParams::PqpFlows(_) => ("fq_params", Self::state_map_of(self.program())),
            BpfParams::PqpClassFlows(_) => ("cf_params", Self::state_map_of(self.program())),
        }
    }

    /// Where the params hold their `shape`: the programs restart an aggregate's queues (keeping
    /// its counters) at its next packet when it differs from the shape they were built under.
    /// The token bucket has none: a live update keeps its tokens whatever changes.
    pub(crate) fn shape_bytes(&self) -> Option<std::ops::Range<usize>> {
        let at = match self {
            BpfParams::TokenBucket(_) => return None,
            BpfParams::Pqp(_) | BpfParams::Bcpqp(_) => std::mem::offset_of!(PqParams, shape),
            BpfParams::FairPolicer(_) => std::mem::offset_of!(FpParams, shape),
            BpfParams::PqpFlows(_) => std::mem::offset_of!(FqParams, shape),
            BpfParams::PqpClassFlows(_) => std::mem::offset_of!(CfParams, f) + std::mem::offset_of!(FqParams, shape),
        };
        Some(at..at + 8)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            BpfParams::TokenBucket(p) => bytemuck::bytes_of(p),
            BpfParams::Pqp(p) | BpfParams::Bcpqp(p) => bytemuck::bytes_of(&**p),
            BpfParams::FairPolicer(p) => bytemuck::bytes_of(&**p),
            BpfParams::PqpFlows(p) => bytemuck::bytes_of(&**p),
            BpfParams::PqpClassFlows(p) => bytemuck::bytes_of(&**p),
        }
    }
}

/// PQP's parameters with its policy tree compiled as ratekit_core::phantom compiles it (same
/// depth-first node order), within the BPF program's bounds.
fn pq_params(c: &ratekit_core::pqp::PqpConfig) -> Result<PqParams, BpfError> {
    c.validate()?;
    if c.queues as usize > PQ_QUEUES {
        return Err(BpfError::OutOfBounds(format!("queues = {}", c.queues)));
    }
    let root = ratekit_core::policy::PolicyNode::resolve(&c.policy, c.queues as usize, c.weights.as_deref())
        .map_err(|e| BpfError::OutOfBounds(format!("policy: {e}")))?;
    let mut p: PqParams = bytemuck::Zeroable::zeroed();
    let mut tree = TreeBuilder { p: &mut p, nodes: 0, inner: 0, slots: 0, depth: 0 };
    tree.add(&root, 0, 1, 0, 1)?;
    let (depth, nodes) = (tree.depth, tree.nodes);
    if p.nodes[0].kind == PQ_LEAF {
        return Err(BpfError::OutOfBounds("policy: a single queue as the whole tree".into()));
    }
    p.rate = c.rate.bytes_per_sec();
    p.queue_size_nb = c.queue_size.0 * ratekit_core::units::NANOS_PER_SEC;
    p.queues = c.queues;
    p.classify = matches!(c.classify, ratekit_core::Classify::Class) as u32;
    p.flat_share = (depth <= 2 && p.nodes[0].kind == PQ_SHARE) as u32;
    p.flat_fair = (p.flat_share == 1 && p.nodes[..nodes].iter().all(|n| n.weight == 1)) as u32;
    // Live updates keep the queues only under the same tree (the lists name its nodes).
    let mut h = 0u64;
    for chunk in bytemuck::bytes_of(&p.nodes).chunks(8).chain(p.children.chunks(8)).chain(p.leaf_of_queue.chunks(8)) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = ratekit_core::packet::mix64(h ^ u64::from_le_bytes(w));
    }
    p.shape = ratekit_core::packet::mix64(h ^ ((p.queues as u64) << 1 | p.classify as u64)) | 1;
    Ok(p)
}

/// BC-PQP's θ+ and θ− in 2^-16 fixed point, T and r·T, as ratekit_core::bcpqp::BurstParams has them.
fn burst_params(c: &ratekit_core::bcpqp::BcPqpConfig) -> (u64, u64, u64, u64) {
    let fixed = |theta: f64| (theta * ratekit_core::bcpqp::THETA_ONE as f64).round() as u64;
    (fixed(c.theta_plus), fixed(c.theta_minus), c.window.0, c.rate.credit(c.window))
}

/// BC-PQP's tree: PQP's with θ±, T and r·T, within the bound on r·T·weight.
fn bc_tree_params(c: &ratekit_core::bcpqp::BcPqpConfig) -> Result<PqParams, BpfError> {
    let mut p = pq_params(&c.pqp())?;
    (p.theta_plus, p.theta_minus, p.window_ns, p.window_budget_nb) = burst_params(c);
    let max_weight = p.nodes.iter().map(|n| n.weight as u64).max().unwrap_or(1);
    if p.window_budget_nb.checked_mul(max_weight).is_none() {
        return Err(BpfError::OutOfBounds(format!("window: rate × window × weight {max_weight} overflows")));
    }
    Ok(p)
}

/// The exact per-flow program's parameters: PQP's, plus BC-PQP's burst control when `burst` is
/// given; `max_flows` per class (the flat program has one).
fn fq_params(c: &ratekit_core::pqp::PqpConfig, burst: Option<&ratekit_core::bcpqp::BcPqpConfig>) -> Result<FqParams, BpfError> {
    use crate::maps::FQ_MAX_FLOWS;
    c.validate()?;
    if c.max_flows() as usize > FQ_MAX_FLOWS {
        return Err(BpfError::FlowBounds(format!("max_flows: {} > {FQ_MAX_FLOWS}", c.max_flows())));
    }
    let mut p = FqParams {
        rate: c.rate.bytes_per_sec(),
        queue_size_nb: c.queue_size.0 * ratekit_core::units::NANOS_PER_SEC,
        max_flows: c.max_flows(),
        ..Default::default()
    };
    if let Some(b) = burst {
        (p.theta_plus, p.theta_minus, p.window_ns, p.window_budget_nb) = burst_params(b);
        p.burst = 1;
    }
    // Live updates keep the flows' queues only under the same queue size, flow bound and kind
    // (a rate or burst-control change keeps them, as the hashed programs' do).
    let mix = ratekit_core::packet::mix64;
    p.shape = mix(p.queue_size_nb ^ mix(u64::from(p.max_flows) << 1 | u64::from(p.burst))) | 1;
    Ok(p)
}

/// Classes of exact flows: the class tree within the hashed programs' bounds, and every class's
/// heap placed in the pool's (a fair class holds max_flows flows and its overflow queue, any
/// other class one queue), at most FQ_MAX_FLOWS flows over the fair classes.
fn cf_params(c: &ratekit_core::pqp::PqpConfig, burst: Option<&ratekit_core::bcpqp::BcPqpConfig>) -> Result<CfParams, BpfError> {
    use crate::maps::FQ_MAX_FLOWS;
    let tree = match burst {
        Some(b) => bc_tree_params(b)?,
        None => pq_params(c)?,
    };
    let fair: Vec<bool> = (0..c.queues).map(|q| c.is_fair_class(q)).collect();
    let flows = fair.iter().filter(|&&f| f).count() * c.max_flows() as usize;
    if flows > FQ_MAX_FLOWS {
        return Err(BpfError::FlowBounds(format!("max_flows: {} fair classes × max_flows {} = {flows} > {FQ_MAX_FLOWS}", flows / c.max_flows() as usize, c.max_flows())));
    }
    let mut p = CfParams { f: fq_params(c, burst)?, tree, ..bytemuck::Zeroable::zeroed() };
    let mut base = 0u16;
    for (q, &is_fair) in fair.iter().enumerate() {
        p.heap_base[q] = base;
        p.fair_mask |= u32::from(is_fair) << q;
        base += if is_fair { c.max_flows() as u16 + 1 } else { 1 };
    }
    // Another tree, flow bound, queue size or fair_classes restarts the queues (the tree's lists
    // and the heaps' places depend on them); a rate or burst-control change keeps them.
    p.f.shape = ratekit_core::packet::mix64(p.f.shape ^ p.tree.shape ^ u64::from(p.fair_mask) << 32) | 1;
    Ok(p)
}

/// FairPolicer's parameters within the BPF program's bounds: the sketch's row constants are
/// ratekit_core::count_min's, so both compute the same columns.
fn fp_params(c: &ratekit_core::fair_policer::FairPolicerConfig) -> Result<FpParams, BpfError> {
    use crate::maps::{FP_ACTIVE, FP_DEPTH, FP_STEPS, FP_WIDTH};
    c.validate()?;
    let out_of_bounds = |field: &str, why: String| Err(BpfError::FairPolicerBounds(format!("{field}: {why}")));
    if c.sketch_depth as usize > FP_DEPTH {
        return out_of_bounds("sketch_depth", format!("{} > {FP_DEPTH}", c.sketch_depth));
    }
    if c.sketch_width as usize > FP_WIDTH {
        return out_of_bounds("sketch_width", format!("{} > {FP_WIDTH}", c.sketch_width));
    }
    // Every allocation step removes a flow or lowers its estimate (≤ B) by a unit, so this
    // keeps the allocation loop within bpf_loop's cap: it always runs to where the core's stops.
    let steps = FP_ACTIVE as u64 * (c.bucket.0 / c.token_unit.0 + 1);
    if steps > FP_STEPS {
        return out_of_bounds("token_unit", format!("bucket / token_unit = {} must be at most {}", c.bucket.0 / c.token_unit.0, FP_STEPS / FP_ACTIVE as u64 - 1));
    }
    let mut p: FpParams = bytemuck::Zeroable::zeroed();
    for (r, (a, b)) in ratekit_core::count_min::row_constants(c.seed, c.sketch_depth as usize).into_iter().enumerate() {
        p.row_a[r] = a;
        p.row_b[r] = b;
    }
    p.rate = c.rate.bytes_per_sec();
    p.bucket = c.bucket.0;
    p.unit = c.token_unit.0;
    p.depth = c.sketch_depth;
    p.shift = 64 - c.sketch_width.trailing_zeros();
    // DSCP is the class the data plane sees; entries beyond it name classes no packet carries.
    for (i, w) in p.weights.iter_mut().enumerate() {
        *w = c.weights.get(i).copied().unwrap_or(1);
    }
    // Live updates keep the flows' tokens only under the same sketch and bucket.
    let mut h = ratekit_core::packet::mix64(p.bucket ^ (u64::from(p.depth) << 40 | u64::from(p.shift) << 48));
    for w in p.row_a.iter().chain(&p.row_b) {
        h = ratekit_core::packet::mix64(h ^ w);
    }
    p.shape = h | 1;
    Ok(p)
}

struct TreeBuilder<'a> {
    p: &'a mut PqParams,
    nodes: usize,
    inner: usize,
    slots: usize,
    depth: usize,
}

impl TreeBuilder<'_> {
    /// phantom.rs `PhantomPolicy::add`, into the fixed arrays of `struct pq_params`.
    fn add(&mut self, node: &ratekit_core::policy::PolicyNode, parent: u8, weight: u32, rank: u8, depth: usize) -> Result<u8, BpfError> {
        use ratekit_core::policy::PolicyNode;
        if depth > 3 {
            return Err(BpfError::OutOfBounds(format!("policy nests {depth} levels deep")));
        }
        if self.nodes >= PQ_NODES {
            return Err(BpfError::OutOfBounds(format!("policy has more than {PQ_NODES} nodes")));
        }
        self.depth = self.depth.max(depth);
        let id = self.nodes as u8;
        self.nodes += 1;
        let (kind, children): (u8, Vec<(&PolicyNode, u32)>) = match node {
            PolicyNode::Queue(q) => {
                self.p.leaf_of_queue[*q] = id;
                self.p.nodes[id as usize] = PqNode { weight, kind: PQ_LEAF, parent, rank, index: *q as u8, ..Default::default() };
                return Ok(id);
            }
            PolicyNode::Fair(c) => (PQ_SHARE, c.iter().map(|n| (n, 1)).collect()),
            PolicyNode::Weighted(c) => (PQ_SHARE, c.iter().map(|(n, w)| (n, *w)).collect()),
            PolicyNode::Priority(c) => (PQ_PRIORITY, c.iter().map(|n| (n, 1)).collect()),
        };
        if self.inner >= PQ_INNER {
            return Err(BpfError::OutOfBounds(format!("policy has more than {PQ_INNER} inner nodes")));
        }
        let index = self.inner as u8;
        self.inner += 1;
        self.p.inner_node[index as usize] = id;
        let first_slot = self.slots;
        self.slots += children.len();
        if self.slots > PQ_SLOTS {
            return Err(BpfError::OutOfBounds(format!("policy has more than {PQ_SLOTS} edges")));
        }
        self.p.nodes[id as usize] =
            PqNode { weight, kind, parent, rank, index, first_slot: first_slot as u8, n_children: children.len() as u8, ..Default::default() };
        for (r, (child, w)) in children.into_iter().enumerate() {
            let child_id = self.add(child, id, w, r as u8, depth + 1)?;
            self.p.children[first_slot + r] = child_id;
        }
        Ok(id)
    }
}

/// Where a policer's stats come from: each program keeps `struct rk_stats` at a fixed offset
/// in its per-aggregate state value.
fn stats_offset(program: &str) -> usize {
    match program {
        "token_bucket" => std::mem::offset_of!(crate::maps::TbState, stats),
        "pqp" => std::mem::offset_of!(crate::maps::PqpState, stats),
        "bcpqp" => std::mem::offset_of!(crate::maps::BcpqpState, stats),
        "fair_policer" => std::mem::offset_of!(crate::maps::FpState, stats),
        "pqp_flows" => std::mem::offset_of!(crate::maps::FqState, stats),
        "pqp_class_flows" => std::mem::offset_of!(crate::maps::CfState, stats),
        _ => unreachable!("unknown program {program}"),
    }
}

/// Options that decide how packets map to aggregates and where state lives.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub settings: Settings,
    /// Most aggregates tracked at once (a hash map, not LRU: eviction would reset a live
    /// aggregate); packets of aggregates beyond this pass unpoliced, counted in the untracked counter.
    pub max_aggregates: u32,
    /// Pin the maps here and reuse maps already pinned (live config updates keep state).
    pub pin_dir: Option<PathBuf>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            settings: Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 0 },
            max_aggregates: 65536,
            pin_dir: None,
        }
    }
}

/// A loaded BPF policer.
pub struct BpfPolicer {
    obj: Object,
    params: BpfParams,
}

impl BpfPolicer {
    pub fn load(cfg: &EnforcerConfig, opts: &LoadOptions) -> Result<Self, BpfError> {
        let params = BpfParams::from_config(cfg)?;
        if params.object().is_empty() {
            return Err(BpfError::NotBuilt);
        }
        capture_libbpf_log();
        LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
        // libelf wants the image aligned; a fresh Vec is.
        let image = params.object().to_vec();
        let mut open = ObjectBuilder::default().open_memory(&image).map_err(kernel("opening the BPF object"))?;
        let (params_map, state_map) = params.map_names();
        for mut map in open.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            if name == state_map {
                map.set_max_entries(opts.max_aggregates.max(1)).map_err(kernel("sizing the state map"))?;
            }
            if let Some(dir) = &opts.pin_dir {
                if [params_map, state_map, "rk_settings", "rk_untracked"].contains(&name.as_str()) {
                    map.set_pin_path(dir.join(&name)).map_err(kernel("pinning maps"))?;
                }
            }
        }
        let obj = open.load().map_err(|source| {
            let log = std::mem::take(&mut *LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()));
            // The verifier also answers EACCES; only a non-root caller lacks privileges.
            if source.kind() == libbpf_rs::ErrorKind::PermissionDenied && unsafe { libc::geteuid() } != 0 {
                BpfError::Privileges { what: format!("loading {}", params.program()), source }
            } else {
                BpfError::Load { program: params.program().into(), source, log }
            }
        })?;
        let me = BpfPolicer { obj, params };
        me.set_settings(&opts.settings)?;
        me.set_params(&me.params.clone())?;
        Ok(me)
    }

    pub fn program_name(&self) -> &'static str {
        self.params.program()
    }

    fn map(&self, name: &str) -> libbpf_rs::Map<'_> {
        self.obj.maps().find(|m| m.name() == name).unwrap_or_else(|| panic!("BPF object has no map {name}"))
    }

    pub fn set_settings(&self, s: &Settings) -> Result<(), BpfError> {
        self.map("rk_settings")
            .update(&0u32.to_ne_bytes(), bytemuck::bytes_of(s), MapFlags::ANY)
            .map_err(kernel("writing rk_settings"))
    }

    /// Replaces the parameters; per-aggregate state (tokens, queues, counters) is kept.
    pub fn set_params(&self, p: &BpfParams) -> Result<(), BpfError> {
        if p.program() != self.params.program() {
            return Err(BpfError::Unsupported("a different kind (detach first)"));
        }
        self.map(self.params.map_names().0)
            .update(&0u32.to_ne_bytes(), p.bytes(), MapFlags::ANY)
            .map_err(kernel("writing parameters"))
    }

    pub(crate) fn prog(&self) -> libbpf_rs::ProgramMut<'_> {
        self.obj.progs_mut().next().expect("every object holds one program")
    }

    /// Runs one frame through the program with `now` as its clock (settings.test_clock must be 1).
    pub fn test_run(&self, frame: &[u8], now_ns: u64) -> Result<Verdict, BpfError> {
        let mut ctx = [0u8; SKB_CTX_SIZE];
        ctx[SKB_TSTAMP_OFFSET..SKB_TSTAMP_OFFSET + 8].copy_from_slice(&now_ns.to_ne_bytes());
        let mut input = ProgramInput::default();
        input.context_in = Some(&mut ctx);
        input.data_in = Some(frame);
        let out = self.prog().test_run(input).map_err(kernel("BPF_PROG_TEST_RUN"))?;
        Ok(match out.return_value {
            TC_ACT_OK => Verdict::Pass,
            TC_ACT_SHOT => Verdict::Drop(self.last_drop_reason()),
            other => panic!("program returned {other}, neither TC_ACT_OK nor TC_ACT_SHOT"),
        })
    }

    /// The reason of the most recent drop is not returned by tc; tests compare reasons through
    /// the per-reason counters instead, so a drop reads as the program's primary reason here.
    fn last_drop_reason(&self) -> DropReason {
        DropReason::Overlimit
    }

    /// A `Send + Sync` handle that runs frames through this program from any thread (the
    /// BPF_PROG_TEST_RUN syscall on a duplicate of the program fd), to exercise the program from
    /// several CPUs at once.
    pub fn runner(&self) -> Result<TestRunner, BpfError> {
        use std::os::fd::AsFd;
        let fd = self.prog().as_fd().try_clone_to_owned().map_err(|e| BpfError::Kernel { what: "dup".into(), source: e.into() })?;
        Ok(TestRunner { fd })
    }

    /// Runs one frame `repeat` times and returns the kernel's mean ns per run.
    pub fn time_run(&self, frame: &[u8], repeat: u32) -> Result<std::time::Duration, BpfError> {
        let mut input = ProgramInput::default();
        input.data_in = Some(frame);
        input.repeat = repeat;
        Ok(self.prog().test_run(input).map_err(kernel("BPF_PROG_TEST_RUN"))?.duration)
    }

    /// Every aggregate's raw state value (e.g. `maps::TbState`), for exact comparisons.
    pub fn states(&self) -> Result<Vec<(AggKey, Vec<u8>)>, BpfError> {
        let map = self.map(self.params.map_names().1);
        let mut out = Vec::new();
        for key in map.keys() {
            if let Some(v) = map.lookup(&key, MapFlags::ANY).map_err(kernel("reading state"))? {
                out.push((bytemuck::pod_read_unaligned(&key), v));
            }
        }
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Overwrites one aggregate's raw state value, for tests that stage a state (e.g. a lock left
    /// held by a stalled CPU).
    pub fn set_state(&self, key: &AggKey, raw: &[u8]) -> Result<(), BpfError> {
        self.map(self.params.map_names().1).update(bytemuck::bytes_of(key), raw, MapFlags::ANY).map_err(kernel("writing state"))
    }

    /// Packets passed unpoliced: no room for their aggregate, or its lock given up.
    pub fn untracked(&self) -> Result<u64, BpfError> {
        let per_cpu = self.map("rk_untracked").lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY).map_err(kernel("reading rk_untracked"))?;
        Ok(per_cpu.unwrap_or_default().iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum())
    }

    /// Per-aggregate counters.
    pub fn stats(&self) -> Result<Vec<(AggKey, Stats)>, BpfError> {
        read_stats(&self.map(self.params.map_names().1), self.params.program())
    }
}

pub struct TestRunner {
    fd: std::os::fd::OwnedFd,
}

/// Pins the calling thread to CPU `cpu` (modulo the CPUs online), so that [`TestRunner`]s on
/// two threads run the program on two CPUs at once. Best effort: a failure leaves it unpinned.
pub fn pin_thread_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data (zeroed is a valid empty set), CPU_SET indexes it within
    // its size after the modulo, and sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// `union bpf_attr` as BPF_PROG_TEST_RUN reads it (linux/bpf.h, `test` member).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

impl TestRunner {
    /// Like `BpfPolicer::test_run`: true if the program passed the frame.
    pub fn passes(&self, frame: &[u8], now_ns: u64) -> std::io::Result<bool> {
        let mut ctx = [0u8; SKB_CTX_SIZE];
        ctx[SKB_TSTAMP_OFFSET..SKB_TSTAMP_OFFSET + 8].copy_from_slice(&now_ns.to_ne_bytes());
        Ok(self.run(frame, Some(&mut ctx), 1)?.retval == TC_ACT_OK)
    }

    /// Like `BpfPolicer::time_run`, from any thread: the kernel's mean ns per run.
    pub fn time_run(&self, frame: &[u8], repeat: u32) -> std::io::Result<std::time::Duration> {
        Ok(std::time::Duration::from_nanos(self.run(frame, None, repeat)?.duration.into()))
    }

    fn run(&self, frame: &[u8], ctx: Option<&mut [u8]>, repeat: u32) -> std::io::Result<TestRunAttr> {
        use std::os::fd::AsRawFd;
        let (ctx_size_in, ctx_in) = ctx.map_or((0, 0), |c| (c.len() as u32, c.as_mut_ptr() as u64));
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            ctx_size_in,
            ctx_in,
            repeat,
            ..Default::default()
        };
        const BPF_PROG_TEST_RUN: libc::c_long = 10;
        let rc = unsafe {
            libc::syscall(libc::SYS_bpf, BPF_PROG_TEST_RUN, &mut attr as *mut TestRunAttr, std::mem::size_of::<TestRunAttr>())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(attr)
    }
}

pub(crate) fn read_stats(map: &dyn MapCore, program: &str) -> Result<Vec<(AggKey, Stats)>, BpfError> {
    let off = stats_offset(program);
    let mut out = Vec::new();
    for key in map.keys() {
        if let Some(v) = map.lookup(&key, MapFlags::ANY).map_err(kernel("reading state"))? {
            let agg: AggKey = bytemuck::pod_read_unaligned(&key);
            let stats: Stats = bytemuck::pod_read_unaligned(&v[off..off + std::mem::size_of::<Stats>()]);
            out.push((agg, stats));
        }
    }
    out.sort_by_key(|(k, _)| *k);
    Ok(out)
}

/// Whether `path` is on a BPF filesystem (where maps can be pinned).
pub fn is_bpffs(path: &Path) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe4a11;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == BPF_FS_MAGIC }
}
