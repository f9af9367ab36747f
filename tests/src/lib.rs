//! Shared helpers for rcute integration tests.
