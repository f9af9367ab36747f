//! # rcute-layout
//!
//! CuTe's layout algebra in Rust.
