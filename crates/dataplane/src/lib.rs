//! ratekit-dataplane: see DEVELOPERS.md.
