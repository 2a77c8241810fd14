//! When the member is at rest, the data file's pages it mapped while writing go back.
//!
//! Writing touches the data file's pages (the B-tree's branches and the pages written), and
//! they stay mapped into the process, counted in its RSS as `RssFile`, until the kernel evicts
//! them: 280-440 MiB after loading 20 GiB (`benches/beyond-large.sh`), though nothing holds
//! them but the page table. [`AtRest`] says when to let them go
//! ([`crate::LmdbEngine::release_mapped_pages`]): at the first tick of the backend's upkeep
//! timer that finds no commit since the one before, once per quiet spell. A member that only
//! reads after that maps what it reads back in and keeps it (the next release waits for a
//! commit and then quiet again), so a read-only load never pays for the release twice.

/// The decision, kept apart from the timer that drives it (ticks are messages).
#[derive(Debug, Default)]
pub struct AtRest {
    /// A commit since the last tick.
    committed: bool,
    /// Released since the last commit.
    released: bool,
}

impl AtRest {
    /// A commit was made.
    pub fn committed(&mut self) {
        self.committed = true;
        self.released = false;
    }

    /// A tick of the upkeep timer: whether to release the mapped pages now.
    pub fn tick(&mut self) -> bool {
        if std::mem::take(&mut self.committed) || self.released {
            return false;
        }
        self.released = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_once_a_quiet_tick_follows_commits_and_not_again_until_the_next_commit() {
        let mut r = AtRest::default();
        assert!(
            r.tick(),
            "a member that starts quiet releases (recovery released already)"
        );
        assert!(!r.tick(), "once per quiet spell");
        r.committed();
        r.committed();
        assert!(!r.tick(), "busy since the last tick");
        assert!(r.tick(), "a whole tick without a commit");
        assert!(!r.tick());
        assert!(!r.tick());
        r.committed();
        assert!(!r.tick());
        assert!(r.tick(), "quiet again after new commits");
    }
}
