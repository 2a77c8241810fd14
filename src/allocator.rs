//! Giving freed memory back to the system.
//!
//! The daemon allocates through mimalloc (`main.rs`). mimalloc returns a freed page to the
//! system ("purges" it) only some time after the free (1 s by default), and only when a thread
//! later passes through its allocator's slow path and notices the delay is over. A member that
//! goes quiet after a burst never passes there again, so everything the burst freed stays
//! resident. Measured (release, 100k keys × 256 B, RssAnon): right after a restart 129 MiB
//! where 46 MiB were live (the WAL's 64 MiB segment is read whole, and every entry before the
//! last snapshot mark is copied, then dropped); after three full-prefix ranges, idle, 154 MiB
//! against 97 MiB before them. Purging at once on every free (`purge_delay` 0) keeps RSS at
//! the live size but cost about 30% of put throughput at 100 clients, so the delay stays, and:
//! - [`give_back_freed`] purges everything freed so far, once, where a burst has just ended
//!   (after recovery): 129 → 46 MiB;
//! - [`start_housekeeping`] runs a thread that asks every second for the purges whose delay is
//!   over, which is what an allocating thread would have done: after the ranges, 87 MiB
//!   against 86 MiB before them. Under load the allocating threads do it already, so the
//!   thread adds one cheap check a second;
//! - [`tend_this_thread`] runs on each actor thread and collects that thread's own pages
//!   every second: a block freed by another thread is counted free only when its owner looks,
//!   and actors free much of what other actors allocated. At rest after the 100k-key load:
//!   78–82 MiB against 88 MiB without it.

//!
//! Transparent huge pages are off for the process ([`no_transparent_huge_pages`]): mimalloc
//! asks for them on its arenas, and a 2 MiB page is resident whole for one live block in it,
//! nor can a part of it be purged. An idle member with no keys held 21 MiB anonymous memory,
//! 16 MiB of it in huge pages. With them off (measured as `MIMALLOC_ALLOW_THP=0`, which makes
//! mimalloc do the same call): 100k keys at rest 80 → 55 MiB, after a restart 46 → 28 MiB.

use std::time::Duration;

// mimalloc's own entry point (linked through the `mimalloc` crate, whose build compiles it).
#[allow(unsafe_code)]
unsafe extern "C" {
    fn mi_collect(force: bool);
}

/// Turns transparent huge pages off for this process (Linux; elsewhere nothing to do), as
/// mimalloc's own `allow_thp` option would, which can only be read from the environment before
/// the first allocation. Call it first thing: pages faulted in before keep their size.
pub fn no_transparent_huge_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // PR_SET_THP_DISABLE takes integers only and touches no memory of ours.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// How often the housekeeping thread asks for due purges.
const PERIOD: Duration = Duration::from_secs(1);

/// Returns every page freed so far that holds no live allocation to the system, without
/// waiting for the purge delay.
pub fn give_back_freed() {
    collect(true);
}

/// Starts the thread that performs due purges every [`PERIOD`]. It lives as long as the
/// process and holds nothing.
pub fn start_housekeeping() -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("allocator".into())
        .spawn(|| {
            loop {
                std::thread::sleep(PERIOD);
                collect(false);
            }
        })
        .map(drop)
}

/// Every [`PERIOD`], collects this thread's own pages: blocks other threads freed into them
/// (an actor frees what another allocated) are counted as free only when the owning thread
/// looks, and pages left empty then go back to the system. Spawned on each actor thread.
pub async fn tend_this_thread() {
    let mut every = actix::clock::interval(PERIOD);
    loop {
        every.tick().await;
        collect(false);
    }
}

fn collect(force: bool) {
    // Names the crate so its static library is linked wherever this module is.
    let _: Option<mimalloc::MiMalloc> = None;
    // mi_collect takes no pointer and may be called from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        mi_collect(force)
    };
}
