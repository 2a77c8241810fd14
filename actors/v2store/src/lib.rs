//! The v2 store actor (being written).
