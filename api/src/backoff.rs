//! Retry timing of the process managers (raft cleanup, the upgrade
//! driver): exponential, from `first` up to `max`.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The wait after one of `previous` failed again: twice as long, at
    /// most `max`.
    pub fn after(&self, previous: Duration) -> Duration {
        (previous * 2).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_max() {
        let b = Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(5),
        };
        assert_eq!(b.after(b.first), Duration::from_secs(2));
        assert_eq!(b.after(Duration::from_secs(4)), Duration::from_secs(5));
        assert_eq!(b.after(b.max), b.max);
    }
}
