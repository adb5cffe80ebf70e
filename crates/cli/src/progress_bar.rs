//! The terminal's view of a library run's progress: an indicatif bar on stderr, and notes.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ratekit_lab::progress::Progress;

pub struct Bar {
    bar: ProgressBar,
    template: &'static str,
}

impl Bar {
    /// A bar drawn with `template` (indicatif's syntax) once the run says how much work it has.
    pub fn new(template: &'static str) -> Self {
        Bar { bar: ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()), template }
    }

    /// Counts of whole steps, e.g. runs or bench cells.
    pub fn steps() -> Self {
        Self::new("{msg:<30} {bar:40} {pos}/{len} eta {eta}")
    }

    /// Bytes of an input file.
    pub fn bytes() -> Self {
        Self::new("{msg} {bar:40} {bytes}/{total_bytes} {per_sec} eta {eta}")
    }
}

impl Progress for Bar {
    fn start(&self, total: u64, what: &str) {
        self.bar.set_length(total);
        self.bar.set_style(ProgressStyle::with_template(self.template).expect("valid template"));
        self.bar.set_message(what.to_string());
    }
    fn set(&self, done: u64) {
        self.bar.set_position(done);
    }
    fn advance(&self, by: u64) {
        self.bar.inc(by);
    }
    fn message(&self, text: &str) {
        self.bar.set_message(text.to_string());
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
    fn note(&self, text: &str) {
        self.bar.suspend(|| eprintln!("note: {text}"));
    }
}
