//! `ratekit tc attach|detach|stats`: a BPF policer on an interface's clsact hook, its maps pinned
//! under /sys/fs/bpf/ratekit/<dev>-<direction>/<program>/ so that a later `attach` with a changed
//! config only rewrites the parameters (live state such as tokens and phantom queues is kept),
//! and `stats` can read the counters from any process.

use crate::bpf::{read_stats, BpfError, BpfParams, BpfPolicer, LoadOptions};
use crate::maps::{AggKey, Settings, Stats};
use libbpf_rs::{MapCore, MapFlags, MapHandle, TcHookBuilder, TC_EGRESS, TC_INGRESS};
use ratekit_core::EnforcerConfig;
use std::os::fd::AsFd;
use std::path::PathBuf;

/// The filter's handle and priority on the clsact hook: ours, so detach removes only our filter.
const FILTER_HANDLE: u32 = 0x726b;
const FILTER_PRIORITY: u32 = 0x726b;
pub const PIN_ROOT: &str = "/sys/fs/bpf/ratekit";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
    fn attach_point(self) -> libbpf_rs::TcAttachPoint {
        match self {
            Direction::Ingress => TC_INGRESS,
            Direction::Egress => TC_EGRESS,
        }
    }
}

/// An interface's index, or an error naming it.
pub fn ifindex(dev: &str) -> Result<u32, BpfError> {
    let c = std::ffi::CString::new(dev).map_err(|_| BpfError::NoSuchInterface(dev.into()))?;
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(BpfError::NoSuchInterface(dev.into())),
        i => Ok(i),
    }
}

fn require_root(what: &str) -> Result<(), BpfError> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(BpfError::Privileges {
            what: what.into(),
            source: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(libc::EPERM)),
        });
    }
    Ok(())
}

/// An interface hook, optionally inside a named network namespace (`ip netns` name).
#[derive(Debug, Clone)]
pub struct Hook {
    pub netns: Option<String>,
    pub dev: String,
    pub dir: Direction,
}

impl Hook {
    fn pin_dir(&self) -> PathBuf {
        let ns = self.netns.as_deref().map(|n| format!("{n}:")).unwrap_or_default();
        PathBuf::from(PIN_ROOT).join(format!("{ns}{}-{}", self.dev, self.dir.as_str()))
    }

    /// Enters the hook's namespace on this thread (callers are single-threaded CLIs or
    /// dedicated threads); pins stay in this process's mount namespace, so they persist.
    fn enter(&self) -> Result<u32, BpfError> {
        if let Some(ns) = &self.netns {
            let f = std::fs::File::open(format!("/run/netns/{ns}")).map_err(|_| BpfError::NoSuchInterface(format!("{} (no network namespace '{ns}')", self.dev)))?;
            use std::os::fd::AsRawFd;
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(BpfError::Kernel {
                    what: format!("entering network namespace {ns}"),
                    source: libbpf_rs::Error::from(std::io::Error::last_os_error()),
                });
            }
        }
        ifindex(&self.dev)
    }

    fn describe(&self) -> String {
        match &self.netns {
            Some(ns) => format!("{} {} in netns {ns}", self.dev, self.dir.as_str()),
            None => format!("{} {}", self.dev, self.dir.as_str()),
        }
    }
}

/// Mounts the BPF filesystem at /sys/fs/bpf if it is not there (as `tc` does).
fn ensure_bpffs() -> Result<(), BpfError> {
    let root = std::path::Path::new("/sys/fs/bpf");
    if crate::bpf::is_bpffs(root) {
        return Ok(());
    }
    let _ = std::fs::create_dir_all(root);
    let rc = unsafe { libc::mount(c"bpf".as_ptr(), c"/sys/fs/bpf".as_ptr(), c"bpf".as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(BpfError::Kernel {
            what: "mounting the BPF filesystem at /sys/fs/bpf".into(),
            source: libbpf_rs::Error::from(std::io::Error::last_os_error()),
        });
    }
    Ok(())
}

/// What `attach` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attached {
    /// A program was loaded and attached with fresh state.
    Loaded { program: &'static str },
    /// The same program was already attached: only its parameters and settings changed. The
    /// counters are kept; tokens, queues and flows too unless `state_kept` is false: the update
    /// changed what they are laid out for (e.g. the policy tree, the flow bound, the fair classes;
    /// `shape` in bpf.rs), and every aggregate starts them afresh at its next packet.
    Updated { program: &'static str, state_kept: bool },
}

/// Finds the program already pinned for (dev, dir), if any.
fn pinned_program(hook: &Hook) -> Option<String> {
    let entries = std::fs::read_dir(hook.pin_dir()).ok()?;
    entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).next()
}

/// Attaches `cfg` to `dev` in direction `dir`, or updates it live if the same kind is attached.
pub fn attach(hook: &Hook, cfg: &EnforcerConfig, settings: Settings, max_aggregates: u32) -> Result<Attached, BpfError> {
    let params = BpfParams::from_config(cfg)?;
    require_root("attaching a tc-BPF program")?;
    ensure_bpffs()?;
    let index = hook.enter()?;
    let dir = hook.dir;
    let program = params.program();
    let dir_path = hook.pin_dir();
    let prog_dir = dir_path.join(program);
    if pinned_program(hook).as_deref() == Some(program) && filter_present(index, dir) {
        let (params_map, _) = params.map_names();
        let open = |name: &str| MapHandle::from_pinned_path(prog_dir.join(name)).map_err(crate::bpf::kernel(format!("opening pinned {name}")));
        let pinned_params = open(params_map)?;
        let before = pinned_params.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).map_err(crate::bpf::kernel("reading parameters"))?;
        let state_kept = match (params.shape_bytes(), before) {
            (Some(shape), Some(before)) => before.get(shape.clone()) == params.bytes().get(shape),
            _ => true,
        };
        pinned_params.update(&0u32.to_ne_bytes(), params.bytes(), MapFlags::ANY).map_err(crate::bpf::kernel("updating parameters"))?;
        open("rk_settings")?
            .update(&0u32.to_ne_bytes(), bytemuck::bytes_of(&settings), MapFlags::ANY)
            .map_err(crate::bpf::kernel("updating settings"))?;
        return Ok(Attached::Updated { program, state_kept });
    }
    // A different kind (or a stale pin): start over with fresh state.
    let _ = std::fs::remove_dir_all(&dir_path);
    std::fs::create_dir_all(&prog_dir).map_err(|e| BpfError::Kernel {
        what: format!("creating {}", prog_dir.display()),
        source: libbpf_rs::Error::from(e),
    })?;
    let opts = LoadOptions { settings, max_aggregates, pin_dir: Some(prog_dir) };
    let policer = BpfPolicer::load(cfg, &opts).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&dir_path);
    })?;
    policer.attach(index, dir).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&dir_path);
    })?;
    Ok(Attached::Loaded { program })
}

fn filter_present(index: u32, dir: Direction) -> bool {
    // Any fd will do for a query; the hook only uses it to attach.
    let null = std::fs::File::open("/dev/null").expect("/dev/null");
    let mut hook = TcHookBuilder::new(null.as_fd())
        .ifindex(index as i32)
        .handle(FILTER_HANDLE)
        .priority(FILTER_PRIORITY)
        .hook(dir.attach_point());
    hook.query().is_ok()
}

impl BpfPolicer {
    /// Attaches the program on `ifindex`'s clsact hook (created if missing), replacing our own
    /// earlier filter if there is one. The filter keeps the program alive after we exit.
    pub fn attach(&self, ifindex: u32, dir: Direction) -> Result<(), BpfError> {
        let prog = self.prog();
        let mut builder = TcHookBuilder::new(prog.as_fd());
        builder.ifindex(ifindex as i32).replace(true).handle(FILTER_HANDLE).priority(FILTER_PRIORITY);
        let mut hook = builder.hook(dir.attach_point());
        // EEXIST: the clsact qdisc is already there, which is fine.
        if let Err(e) = hook.create() {
            if e.kind() != libbpf_rs::ErrorKind::AlreadyExists {
                return Err(crate::bpf::kernel("creating the clsact qdisc")(e));
            }
        }
        hook.attach().map_err(crate::bpf::kernel(format!("attaching to {} of ifindex {ifindex}", dir.as_str())))?;
        Ok(())
    }
}

/// Removes our filter from `dev` and the pinned state. The clsact qdisc is left in place (other
/// filters may use it; without filters it does nothing). Returns whether anything was attached.
pub fn detach(hook: &Hook) -> Result<bool, BpfError> {
    require_root("detaching a tc-BPF program")?;
    let index = hook.enter()?;
    let dir = hook.dir;
    let present = filter_present(index, dir);
    if present {
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        let mut hook = TcHookBuilder::new(null.as_fd())
            .ifindex(index as i32)
            .handle(FILTER_HANDLE)
            .priority(FILTER_PRIORITY)
            .hook(dir.attach_point());
        hook.detach().map_err(crate::bpf::kernel("detaching the filter"))?;
    }
    let pinned = hook.pin_dir().exists();
    let _ = std::fs::remove_dir_all(hook.pin_dir());
    // The shared root goes with the last hook; remove_dir refuses while other hooks are pinned.
    let _ = std::fs::remove_dir(PIN_ROOT);
    Ok(present || pinned)
}

/// Counters per aggregate of the program attached to (dev, dir).
pub struct TcStats {
    pub program: String,
    pub aggregates: Vec<(AggKey, Stats)>,
    pub untracked_packets: u64,
}

pub fn stats(hook: &Hook) -> Result<TcStats, BpfError> {
    require_root("reading tc-BPF counters")?;
    hook.enter()?;
    let program = pinned_program(hook).ok_or_else(|| BpfError::NotAttached(hook.describe()))?;
    let prog_dir = hook.pin_dir().join(&program);
    let state_name = BpfParams::state_map_of(&program);
    let map = MapHandle::from_pinned_path(prog_dir.join(state_name)).map_err(crate::bpf::kernel("opening pinned state"))?;
    let aggregates = read_stats(&map, &program)?;
    let untracked_packets = MapHandle::from_pinned_path(prog_dir.join("rk_untracked"))
        .ok()
        .and_then(|m| m.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY).ok().flatten())
        .map(|per_cpu| per_cpu.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum())
        .unwrap_or(0);
    Ok(TcStats { program, aggregates, untracked_packets })
}
