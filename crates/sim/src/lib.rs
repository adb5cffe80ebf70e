//! ratekit-sim: see DEVELOPERS.md.
