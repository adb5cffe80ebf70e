//! Network namespaces and veth links for the testbed and the tests, torn down on every path:
//! each `Netns` deletes itself on drop (deleting a namespace deletes the links and qdiscs in
//! it), a SIGINT/SIGTERM handler deletes everything still registered before exiting, and
//! `sweep_stale` removes namespaces left by a process that was SIGKILLed (names carry the pid).
//! Everything is created inside namespaces named `rk-<pid>-...`; the root namespace is never
//! touched (besides /run/netns entries that `ip netns` manages).

use std::process::{Command, Stdio};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")]
    NotRoot,
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("running `{cmd}`: {source} (is iproute2 installed? run scripts/setup.sh)")]
    Spawn { cmd: String, source: std::io::Error },
}

/// Runs a command, turning a failure into an error that quotes it and its stderr.
pub fn run(args: &[&str]) -> Result<String, NetnsError> {
    let cmd = args.join(" ");
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn { cmd: cmd.clone(), source })?;
    if !out.status.success() {
        return Err(NetnsError::Command { cmd, stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command inside namespace `ns`.
pub fn run_in(ns: &str, args: &[&str]) -> Result<String, NetnsError> {
    let mut full = vec!["ip", "netns", "exec", ns];
    full.extend_from_slice(args);
    run(&full)
}

/// Namespaces alive in this process, for the signal handler.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn delete_ns(name: &str) {
    let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
}

/// A network namespace this process created; deleted on drop.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates `rk-<pid>-<tag>` with loopback up.
    pub fn create(tag: &str) -> Result<Netns, NetnsError> {
        if unsafe { libc::geteuid() } != 0 {
            return Err(NetnsError::NotRoot);
        }
        let name = format!("rk-{}-{tag}", std::process::id());
        // Registered before creation, so a signal that lands in between still cleans up.
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).push(name.clone());
        let ns = Netns { name };
        run(&["ip", "netns", "add", &ns.name])?;
        run_in(&ns.name, &["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn exec(&self, args: &[&str]) -> Result<String, NetnsError> {
        run_in(&self.name, args)
    }

    /// A `Command` that runs inside this namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Enters this namespace on the calling thread (only that thread; the process stays put).
    pub fn enter(&self) -> std::io::Result<()> {
        let f = std::fs::File::open(format!("/run/netns/{}", self.name))?;
        use std::os::fd::AsRawFd;
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        delete_ns(&self.name);
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).retain(|n| n != &self.name);
    }
}

/// Connects `a` and `b` with a veth pair `a_if` <-> `b_if`, addresses given in CIDR form, links
/// up, and TSO/GSO/GRO off on both ends so enforcers see wire-sized packets.
pub fn veth(a: &Netns, a_if: &str, a_addr: &str, b: &Netns, b_if: &str, b_addr: &str) -> Result<(), NetnsError> {
    veth_pair(a, a_if, Some(a_addr), b, b_if, Some(b_addr))
}

/// `veth` with optional addresses (a middlebox port has none). Checksum offload is off too:
/// a frame that a userspace forwarder relays must carry a complete checksum.
pub fn veth_pair(a: &Netns, a_if: &str, a_addr: Option<&str>, b: &Netns, b_if: &str, b_addr: Option<&str>) -> Result<(), NetnsError> {
    a.exec(&["ip", "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", &b.name])?;
    for (ns, ifname, addr) in [(a, a_if, a_addr), (b, b_if, b_addr)] {
        if let Some(addr) = addr {
            ns.exec(&["ip", "addr", "add", addr, "dev", ifname])?;
        }
        ns.exec(&["ip", "link", "set", ifname, "up"])?;
        ns.exec(&["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off"])?;
    }
    Ok(())
}

/// Deletes every namespace registered by this process (for signal handlers and panics).
pub fn cleanup_all() {
    let names = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
    for n in names {
        delete_ns(&n);
    }
}

/// Installs SIGINT/SIGTERM/SIGHUP handlers that tear down every namespace this process made and
/// then exit with 128 + signal. A watcher thread does the work (no allocation in the handler).
pub fn install_signal_cleanup() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let mut fds = [0i32; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        SIGNAL_PIPE.store(fds[1], std::sync::atomic::Ordering::SeqCst);
        std::thread::spawn(move || {
            let mut sig = [0u8; 1];
            let n = unsafe { libc::read(fds[0], sig.as_mut_ptr().cast(), 1) };
            if n == 1 {
                eprintln!("ratekit: caught signal {}, tearing down the testbed", sig[0]);
                crate::cleanup::run_hooks();
                cleanup_all();
                std::process::exit(128 + sig[0] as i32);
            }
        });
        extern "C" fn on_signal(sig: libc::c_int) {
            let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::SeqCst);
            let b = sig as u8;
            unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
        }
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        }
    });
}

static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Deletes `rk-<pid>-*` namespaces whose process no longer exists (left by a SIGKILL).
pub fn sweep_stale() -> Vec<String> {
    let Ok(out) = run(&["ip", "netns", "list"]) else { return Vec::new() };
    let mut removed = Vec::new();
    for line in out.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix("rk-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let alive = unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            delete_ns(name);
            removed.push(name.to_string());
        }
    }
    removed
}

/// Namespaces of a given process still present (for tests of teardown).
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("rk-{pid}-");
    run(&["ip", "netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// For tests marked `#[ignore = "needs root: ..."]`: once asked to run, a test without root fails
/// with the reason instead of passing without having run.
pub fn require_root(what: &str) {
    assert!(unsafe { libc::geteuid() } == 0, "{what} needs root; scripts/test.sh runs these tests only as root");
}
