//! ratekit-trace: see DEVELOPERS.md.
