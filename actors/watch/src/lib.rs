//! placeholder

mod actor;
#[cfg(test)]
mod actor_tests;
mod fragment;
mod group;
mod hub;
#[cfg(test)]
mod hub_tests;
mod interval;

pub use actor::{
    CloseStream, GetHubStats, OpenStream, OpenedStream, ProgressTick, RejectWatch, RetryVictims,
    WatchHubActor, WatchRequestMsg,
};
pub use fragment::{GRPC_OVERHEAD_BYTES, fragment};
pub use hub::{
    ERR_DUPLICATE_ID, ERR_EMPTY_RANGE, HubConfig, HubStats, INVALID_WATCH_ID, SendError, StreamId,
    StreamResponse, StreamSink, WatchHub, WatchId,
};
