//! Progress of a long run, reported to whoever drives it: the command line draws a bar, the
//! Python package and tests draw nothing. The library never writes to the terminal itself.

/// Receives the progress of one long run. Every method has a do-nothing default.
pub trait Progress: Sync {
    /// The amount of work, in the run's own unit (bytes read, runs, steps).
    fn start(&self, _total: u64, _what: &str) {}
    /// Work done so far, in the unit given to `start`.
    fn set(&self, _done: u64) {}
    fn advance(&self, _by: u64) {}
    /// What is being worked on now.
    fn message(&self, _text: &str) {}
    fn finish(&self) {}
    /// Something the user should know that is not an error (e.g. a flag the run ignores).
    fn note(&self, _text: &str) {}
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {}
