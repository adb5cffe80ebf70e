//! Packet colours of the RFC 2697 / 2698 meters, shared by srTCM and trTCM.
//!
//! How a colour reaches a colour-aware meter: ratekit's `Packet` has no DSCP field, so the
//! incoming colour travels in `Packet::class`: 0 = green, 1 = yellow, 2 or more = red (the
//! order of AF drop precedences: AFx1, AFx2, AFx3). In colour-blind mode the class is ignored.

use crate::{DropReason, Packet, Verdict};
use serde::{Deserialize, Serialize};

/// A meter's result (RFC 2697 §1, RFC 2698 §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Colour {
    Green,
    Yellow,
    Red,
}

impl Colour {
    /// The pre-colour a colour-aware meter reads from `Packet::class` (see the module doc).
    #[inline]
    pub fn of_class(class: u16) -> Colour {
        match class {
            0 => Colour::Green,
            1 => Colour::Yellow,
            _ => Colour::Red,
        }
    }

    /// The class value that carries this colour (inverse of `of_class`).
    pub fn as_class(self) -> u16 {
        self as u16
    }
}

/// What a meter does with colours: the settings common to srTCM and trTCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ColourPolicy {
    /// Read the packet's pre-colour from its class (RFC 2697 §3 colour-aware mode).
    pub colour_aware: bool,
    /// Drop yellow packets too; by default a policer drops red only and passes yellow
    /// (which a real router would re-mark to a higher drop precedence).
    pub drop_yellow: bool,
}

impl ColourPolicy {
    /// The pre-colour of `pkt`: its class when colour-aware, green (no constraint) when blind.
    #[inline]
    pub fn pre_colour(self, pkt: &Packet) -> Colour {
        if self.colour_aware {
            Colour::of_class(pkt.class)
        } else {
            Colour::Green
        }
    }

    #[inline]
    pub fn verdict(self, colour: Colour) -> Verdict {
        match colour {
            Colour::Green => Verdict::Pass,
            Colour::Yellow if !self.drop_yellow => Verdict::Pass,
            _ => Verdict::Drop(DropReason::Colour),
        }
    }
}

/// Packets and bytes per colour, as a meter reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColourStats {
    /// Indexed by `Colour as usize`.
    pub packets: [u64; 3],
    pub bytes: [u64; 3],
}

impl ColourStats {
    #[inline]
    pub(crate) fn count(&mut self, colour: Colour, len: u32) {
        self.packets[colour as usize] += 1;
        self.bytes[colour as usize] += len as u64;
    }
}
