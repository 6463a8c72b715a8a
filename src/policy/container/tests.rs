//! Unit tests of the container rules.
