//! Any byte string through the whole pipeline: container parsing, header decoding, connection
//! tracking, annotation and the detector. Bad input may be an error; it must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let report = ratekit_trace::analyze(data, &ratekit_trace::Options::default());
    // Keep the optimiser from discarding the work.
    std::hint::black_box(report.rows.len());
});
