//! An AF_PACKET socket bound to one interface, receiving through a TPACKET_V2 mmap ring (no
//! copy per packet into a socket buffer, bounded memory: the ring is the buffer) and sending
//! with `send`. Our own transmissions are not looped back (PACKET_IGNORE_OUTGOING).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const FRAME_SIZE: u32 = 2048; // one MTU-sized frame plus the TPACKET_V2 header
const BLOCK_SIZE: u32 = 1 << 16;
const BLOCKS: u32 = 64; // 4 MiB of ring, 2048 frames
/// Bytes of frames (kernel truesize) in flight between `send` and the wire: 64 MiB, enough
/// for several MB of queue behind the socket, which is what the qdisc limits are for.
const SEND_BUFFER: u32 = 64 << 20;

pub struct PacketSocket {
    fd: OwnedFd,
    ring: *mut u8,
    ring_len: usize,
    frames: u32,
    next: u32,
    ifindex: u32,
}

// The ring is owned by this socket alone.
unsafe impl Send for PacketSocket {}

fn check(rc: libc::c_int, what: &str) -> io::Result<()> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T, what: &str) -> io::Result<()> {
    check(
        unsafe { libc::setsockopt(fd, level, name, (v as *const T).cast(), std::mem::size_of::<T>() as u32) },
        what,
    )
}

impl PacketSocket {
    pub fn open(ifindex: u32) -> io::Result<Self> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, proto as i32) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            let hint = if e.raw_os_error() == Some(libc::EPERM) { " (AF_PACKET needs root / CAP_NET_RAW)" } else { "" };
            return Err(io::Error::new(e.kind(), format!("opening an AF_PACKET socket: {e}{hint}")));
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &(libc::tpacket_versions::TPACKET_V2 as i32), "PACKET_VERSION")?;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32, "PACKET_IGNORE_OUTGOING")?;
        // A sent frame is charged to the socket until the egress qdisc releases it; with the
        // default send buffer (~200 kB of truesize) a deep qdisc (htb + a 1 MB bfifo) behind
        // us would be cut short by EAGAIN here instead of by its own limit. FORCE needs root
        // (which AF_PACKET needs anyway); the plain option is the fallback.
        let sndbuf = SEND_BUFFER as i32;
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf, "SO_SNDBUFFORCE").is_err() {
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf, "SO_SNDBUF")?;
        }
        let req = libc::tpacket_req {
            tp_block_size: BLOCK_SIZE,
            tp_block_nr: BLOCKS,
            tp_frame_size: FRAME_SIZE,
            tp_frame_nr: BLOCK_SIZE / FRAME_SIZE * BLOCKS,
        };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req, "PACKET_RX_RING")?;
        let ring_len = (BLOCK_SIZE * BLOCKS) as usize;
        let ring = unsafe {
            libc::mmap(std::ptr::null_mut(), ring_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, raw, 0)
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::new(io::ErrorKind::Other, format!("mmap of the packet ring: {}", io::Error::last_os_error())));
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        let me = PacketSocket { fd, ring: ring.cast(), ring_len, frames: req.tp_frame_nr, next: 0, ifindex };
        check(
            unsafe { libc::bind(raw, (&sll as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32) },
            "binding the AF_PACKET socket",
        )?;
        Ok(me)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Hands every frame waiting in the ring to `f` with the time the kernel received it
    /// (CLOCK_REALTIME, ns), at most `budget`, returning how many.
    pub fn recv_batch(&mut self, budget: usize, mut f: impl FnMut(&[u8], u64)) -> usize {
        let mut n = 0;
        while n < budget {
            let frame = unsafe { self.ring.add(self.next as usize * FRAME_SIZE as usize) };
            let hdr = frame.cast::<libc::tpacket2_hdr>();
            let status = unsafe { std::ptr::read_volatile(&(*hdr).tp_status) };
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let (mac, snap) = unsafe { ((*hdr).tp_mac as usize, (*hdr).tp_snaplen as usize) };
            let received = unsafe { (*hdr).tp_sec as u64 * 1_000_000_000 + (*hdr).tp_nsec as u64 };
            f(unsafe { std::slice::from_raw_parts(frame.add(mac), snap) }, received);
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            unsafe { std::ptr::write_volatile(&mut (*hdr).tp_status, libc::TP_STATUS_KERNEL) };
            self.next = (self.next + 1) % self.frames;
            n += 1;
        }
        n
    }

    /// Frames the kernel dropped because the ring was full, since the last call
    /// (PACKET_STATISTICS resets on read).
    pub fn ring_drops(&self) -> io::Result<u64> {
        let mut st = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        check(
            unsafe {
                libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS, (&mut st as *mut libc::tpacket_stats).cast(), &mut len)
            },
            "PACKET_STATISTICS",
        )?;
        Ok(st.tp_drops as u64)
    }

    /// Transmits one frame on the bound interface (a full queue drops it, like a NIC would).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex as i32;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ring.cast(), self.ring_len) };
    }
}
