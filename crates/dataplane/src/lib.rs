//! ratekit-dataplane: ratekit-core's enforcers on real Linux packets.
//!
//! - `bpf`: the tc-BPF policers (C in `bpf/`), loaded with libbpf-rs, bit-exact mirrors of the
//!   core's policers (checked by the conformance tests through BPF_PROG_TEST_RUN).
//! - `maps`: the BPF map structs mirrored as `#[repr(C)]` with compile-time size checks.
//! - `tc`: attach / detach / stats on an interface, with pinned state for live config updates.
//! - `netns`, `cleanup`: namespaces, veths, sysctls, all torn down on drop, panic or signal.
//! - `packet`: Ethernet frames to core `Packet`s, exactly as the BPF programs parse them.

pub mod afpacket;
pub mod bpf;
pub mod cleanup;
pub mod maps;
pub mod middlebox;
pub mod netns;
pub mod packet;
pub mod pipeline;
pub mod tc;
pub mod testbed;
