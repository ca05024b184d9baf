//! Where the writer's decision state stands against the log, and how it
//! moves: one [`State`], changed only by [`State::next`], a pure `match`
//! without the store or a task in it. The writer (`writer.rs`) does the
//! [`Action`] each step answers and reports what came of it as the next
//! [`Event`].
//!
//! The states, with what the decision state (the writer's read models) is
//! in each:
//! - [`State::InStep`]: the log as stored (what other processes appended
//!   since is folded in under the log's lock); no commit in flight.
//! - [`State::Committing`]: a batch's commit is in flight; the decision
//!   state is what it leaves.
//! - [`State::Ahead`]: a batch was decided ahead of the commit in flight;
//!   the decision state is what that batch leaves, and the one the commit
//!   in flight leaves is kept to fall back to.
//! - [`State::AheadOfStored`]: the commit before the batch decided ahead
//!   was stored; the batch begins its own write, which must find the log's
//!   head where that commit left it, as it begins (SQLite, under the lock)
//!   or in its commit's one statement (PostgreSQL). Else another process
//!   wrote in between, nothing of the batch is stored, and the writer falls
//!   back to what that commit left and decides the batch again.
//! - [`State::MustReload`]: the decision state may be ahead of the log (a
//!   commit that failed, or a decision under the lock that has not ended);
//!   the log is loaded again before the next decision or fold.
//!
//! `F` is a commit in flight, `B` the read models a commit leaves, `D` a
//! batch decided ahead, `E` why a commit failed: the writer's own types,
//! and the tests' plain values.

/// Where the writer's decision state stands against the log.
#[derive(Debug, PartialEq)]
pub(super) enum State<F, B, D> {
    /// The decision state is the log as stored; no commit in flight.
    InStep,
    /// A batch's commit is in flight; the decision state is `leaves`,
    /// published once the commit is stored. `began_at` is what the log
    /// held when a batch decided ahead began its write at the head (see
    /// [`Event::LostRace`]); `None` for a batch decided under the lock.
    Committing {
        in_flight: F,
        leaves: B,
        began_at: Option<B>,
    },
    /// A batch was decided ahead of the commit in flight: the decision
    /// state is what it leaves (`None` when its decision failed part-way,
    /// and what was decided of it is to be dropped); `base` is what the
    /// commit in flight leaves, where the writer falls back to.
    Ahead {
        in_flight: F,
        base: B,
        batch: Option<D>,
        began_at: Option<B>,
    },
    /// The commit before the batch decided ahead was stored (`base` is what
    /// it left); the batch's own write is beginning.
    AheadOfStored { base: B },
    /// The decision state may be ahead of the log: it is loaded again
    /// before the next decision or fold.
    MustReload,
}

/// What happened to the writer.
#[derive(Debug, PartialEq)]
pub(super) enum Event<F, B, D, E> {
    /// A batch of commands is to be decided: it arrived, or it lost a race
    /// on the log and is decided again.
    Decide,
    /// The writer is asked to fold in what other processes committed.
    Follow,
    /// The batch was decided against what the commit in flight leaves
    /// (`None`: a kept answer could not be looked up).
    DecidedAhead(Option<D>),
    /// The commit in flight ended: stored, or not (an outcome not known
    /// counts as not stored).
    Landed(Result<(), E>),
    /// The commit in flight stored nothing because another process moved
    /// the log's head first: a write begun at the head found it moved.
    LostRace(E),
    /// The log as the database holds it was loaded.
    Reloaded,
    /// A transaction began under the log's lock: from here, the decision
    /// state runs ahead of the log.
    Locked,
    /// A batch's commit began.
    Began { in_flight: F, leaves: B },
    /// A batch ended without a commit (refusals, kept answers given again):
    /// the decision state is the log's.
    Answered,
    /// A batch could not be decided or written: none of it began to commit.
    Failed,
    /// Folding in the log failed part-way through an event.
    Broken,
}

/// What the writer does next.
#[derive(Debug, PartialEq)]
pub(super) enum Action<F, B, D, E> {
    /// Nothing.
    None,
    /// Decide the batch against what the commit in flight leaves, while it
    /// runs.
    DecideAhead,
    /// Decide the batch under the log's lock, loading the log first when
    /// `reload`.
    Decide { reload: bool },
    /// Fold in what other processes committed, loading the log first when
    /// `reload`.
    Follow { reload: bool },
    /// Answer the commit that ended: when stored, publish what it leaves
    /// and then send its answers; when not, answer every command of it the
    /// error, or, when `then` is [`Then::DecideAgain`], decide them again.
    /// Then do `then` (the writer may begin a [`Then::CommitAhead`] just
    /// before the stored commit's answers go out).
    Land {
        in_flight: F,
        landed: Result<B, E>,
        then: Then<B, D>,
    },
    /// Go back to the read models a stored commit left: what was decided
    /// after it is dropped.
    FallBack(B),
}

/// What follows the answers of a commit that ended (or, for a batch
/// decided ahead, what may begin just before them).
#[derive(Debug, PartialEq)]
pub(super) enum Then<B, D> {
    /// Nothing more (a batch being decided goes on under the lock).
    Nothing,
    /// Go back to `B`, then decide the batch under the lock.
    FallBack(B),
    /// The commit lost a race on the log: go back to `B` (what the log held
    /// when it began), then decide its commands again under the lock, and
    /// the batch being decided.
    DecideAgain(B),
    /// Commit the batch decided ahead.
    CommitAhead(D),
}

impl<F, B: Clone, D> State<F, B, D> {
    /// The next state on `event`, and what the writer does.
    ///
    /// # Panics
    /// On an event the writer never reports in that state (a commit
    /// landing with none in flight, say): a fault of the writer's, which
    /// stops it (every command is then answered that it has stopped)
    /// rather than deciding on a state it cannot place.
    pub(super) fn next<E>(self, event: Event<F, B, D, E>) -> (Self, Action<F, B, D, E>) {
        use Action as A;
        use Event as E;
        use State as S;
        match (self, event) {
            (S::InStep, E::Decide) => (S::InStep, A::Decide { reload: false }),
            (S::MustReload, E::Decide) => (S::MustReload, A::Decide { reload: true }),
            (s @ S::Committing { .. }, E::Decide) => (s, A::DecideAhead),
            (S::InStep, E::Follow) => (S::InStep, A::Follow { reload: false }),
            (S::MustReload, E::Follow) => (S::MustReload, A::Follow { reload: true }),
            (
                S::Committing {
                    in_flight,
                    leaves,
                    began_at,
                },
                E::DecidedAhead(batch),
            ) => (
                S::Ahead {
                    in_flight,
                    base: leaves,
                    batch,
                    began_at,
                },
                A::None,
            ),
            // Nothing was stored, and what the log held when the commit
            // began is known: the commands are decided again from there,
            // under the lock (folding in what the other process wrote).
            (
                S::Committing {
                    in_flight,
                    began_at: Some(began_at),
                    ..
                }
                | S::Ahead {
                    in_flight,
                    began_at: Some(began_at),
                    ..
                },
                E::LostRace(e),
            ) => (
                S::InStep,
                A::Land {
                    in_flight,
                    landed: Err(e),
                    then: Then::DecideAgain(began_at),
                },
            ),
            // A commit begun under the lock cannot lose a race: whatever
            // its error says, the state is loaded again.
            (
                S::Committing {
                    in_flight,
                    began_at: None,
                    ..
                }
                | S::Ahead {
                    in_flight,
                    began_at: None,
                    ..
                },
                E::LostRace(e),
            ) => (
                S::MustReload,
                A::Land {
                    in_flight,
                    landed: Err(e),
                    then: Then::Nothing,
                },
            ),
            (
                S::Committing {
                    in_flight, leaves, ..
                },
                E::Landed(landed),
            ) => match landed {
                Ok(()) => (
                    S::InStep,
                    A::Land {
                        in_flight,
                        landed: Ok(leaves),
                        then: Then::Nothing,
                    },
                ),
                Err(e) => (
                    S::MustReload,
                    A::Land {
                        in_flight,
                        landed: Err(e),
                        then: Then::Nothing,
                    },
                ),
            },
            (
                S::Ahead {
                    in_flight,
                    base,
                    batch,
                    ..
                },
                E::Landed(landed),
            ) => match (landed, batch) {
                (Ok(()), Some(batch)) => (
                    S::AheadOfStored { base: base.clone() },
                    A::Land {
                        in_flight,
                        landed: Ok(base),
                        then: Then::CommitAhead(batch),
                    },
                ),
                (Ok(()), None) => (
                    S::InStep,
                    A::Land {
                        in_flight,
                        landed: Ok(base.clone()),
                        then: Then::FallBack(base),
                    },
                ),
                // What was decided ahead followed a state that was not
                // stored: it is decided again from the log.
                (Err(e), _) => (
                    S::MustReload,
                    A::Land {
                        in_flight,
                        landed: Err(e),
                        then: Then::Nothing,
                    },
                ),
            },
            (S::InStep | S::MustReload, E::Reloaded) => (S::InStep, A::None),
            (S::InStep, E::Locked) => (S::MustReload, A::None),
            (S::MustReload, E::Began { in_flight, leaves }) => (
                S::Committing {
                    in_flight,
                    leaves,
                    began_at: None,
                },
                A::None,
            ),
            (S::AheadOfStored { base }, E::Began { in_flight, leaves }) => (
                S::Committing {
                    in_flight,
                    leaves,
                    began_at: Some(base),
                },
                A::None,
            ),
            (S::MustReload | S::AheadOfStored { .. }, E::Answered) => (S::InStep, A::None),
            (S::InStep, E::Failed) => (S::InStep, A::None),
            (S::MustReload, E::Failed) => (S::MustReload, A::None),
            // The write failed to begin, or found another process's events
            // where the stored commit left the log's head as it began.
            (S::AheadOfStored { base }, E::Failed) => (S::InStep, A::FallBack(base)),
            (S::InStep, E::Broken) => (S::MustReload, A::None),
            (
                s @ (S::Ahead { .. } | S::AheadOfStored { .. }),
                e @ (E::Decide | E::Follow | E::Reloaded | E::Locked | E::Broken),
            )
            | (
                s @ S::Committing { .. },
                e @ (E::Follow
                | E::Reloaded
                | E::Locked
                | E::Began { .. }
                | E::Answered
                | E::Failed
                | E::Broken),
            )
            | (s @ S::Ahead { .. }, e @ (E::Began { .. } | E::Answered | E::Failed))
            | (
                s @ (S::InStep | S::MustReload | S::Ahead { .. } | S::AheadOfStored { .. }),
                e @ E::DecidedAhead(_),
            )
            | (
                s @ (S::InStep | S::MustReload | S::AheadOfStored { .. }),
                e @ (E::Landed(_) | E::LostRace(_)),
            )
            | (s @ S::MustReload, e @ (E::Locked | E::Broken))
            | (s @ S::InStep, e @ (E::Began { .. } | E::Answered)) => {
                panic!("the writer reported {} in state {}", e.name(), s.name())
            }
        }
    }

    /// Moves to the next state on `event`, answering what to do.
    pub(super) fn step<E>(&mut self, event: Event<F, B, D, E>) -> Action<F, B, D, E> {
        // Must reload, should `next` not return.
        let (next, action) = std::mem::replace(self, State::MustReload).next(event);
        *self = next;
        action
    }

    /// Moves to the next state on an event that asks for nothing to be
    /// done.
    pub(super) fn note<E>(&mut self, event: Event<F, B, D, E>) {
        let action = self.step(event);
        assert!(
            matches!(action, Action::None),
            "an event that asks for nothing asked for something"
        );
    }

    /// The commit in flight, if any.
    pub(super) fn in_flight(&self) -> Option<&F> {
        match self {
            State::Committing { in_flight, .. } | State::Ahead { in_flight, .. } => Some(in_flight),
            State::InStep | State::AheadOfStored { .. } | State::MustReload => None,
        }
    }

    pub(super) fn in_flight_mut(&mut self) -> Option<&mut F> {
        match self {
            State::Committing { in_flight, .. } | State::Ahead { in_flight, .. } => Some(in_flight),
            State::InStep | State::AheadOfStored { .. } | State::MustReload => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            State::InStep => "InStep",
            State::Committing { .. } => "Committing",
            State::Ahead { .. } => "Ahead",
            State::AheadOfStored { .. } => "AheadOfStored",
            State::MustReload => "MustReload",
        }
    }
}

impl<F, B, D, E> Event<F, B, D, E> {
    fn name(&self) -> &'static str {
        match self {
            Event::Decide => "Decide",
            Event::Follow => "Follow",
            Event::DecidedAhead(_) => "DecidedAhead",
            Event::Landed(_) => "Landed",
            Event::LostRace(_) => "LostRace",
            Event::Reloaded => "Reloaded",
            Event::Locked => "Locked",
            Event::Began { .. } => "Began",
            Event::Answered => "Answered",
            Event::Failed => "Failed",
            Event::Broken => "Broken",
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every transition the writer makes, with plain values: a commit in
    //! flight is its name, the read models a commit leaves are the position
    //! they are at, a batch decided ahead is its name, and a failure its
    //! message.

    use super::*;

    type S = State<&'static str, u64, &'static str>;
    type Ev = Event<&'static str, u64, &'static str, &'static str>;
    type Act = Action<&'static str, u64, &'static str, &'static str>;

    fn committing(in_flight: &'static str, leaves: u64) -> S {
        State::Committing {
            in_flight,
            leaves,
            began_at: None,
        }
    }

    fn ahead(batch: Option<&'static str>) -> S {
        State::Ahead {
            in_flight: "commit 1",
            base: 10,
            batch,
            began_at: None,
        }
    }

    fn next(s: S, e: Ev) -> (S, Act) {
        s.next(e)
    }

    #[test]
    fn in_step_a_batch_is_decided_under_the_lock_without_a_reload() {
        assert_eq!(
            next(State::InStep, Event::Decide),
            (State::InStep, Action::Decide { reload: false })
        );
    }

    #[test]
    fn a_state_that_must_be_reloaded_is_reloaded_before_a_decision() {
        assert_eq!(
            next(State::MustReload, Event::Decide),
            (State::MustReload, Action::Decide { reload: true })
        );
    }

    #[test]
    fn reload_done_is_in_step() {
        assert_eq!(
            next(State::MustReload, Event::Reloaded),
            (State::InStep, Action::None)
        );
        // A fold that found the database lost its tail reloads in step too.
        assert_eq!(
            next(State::InStep, Event::Reloaded),
            (State::InStep, Action::None)
        );
    }

    #[test]
    fn a_transaction_under_the_lock_runs_ahead_of_the_log_until_it_ends() {
        assert_eq!(
            next(State::InStep, Event::Locked),
            (State::MustReload, Action::None)
        );
        assert_eq!(
            next(
                State::MustReload,
                Event::Began {
                    in_flight: "commit 1",
                    leaves: 10
                }
            ),
            (committing("commit 1", 10), Action::None)
        );
        assert_eq!(
            next(State::MustReload, Event::Answered),
            (State::InStep, Action::None)
        );
        assert_eq!(
            next(State::MustReload, Event::Failed),
            (State::MustReload, Action::None)
        );
    }

    #[test]
    fn a_batch_that_fails_before_the_lock_leaves_the_state_in_step() {
        assert_eq!(
            next(State::InStep, Event::Failed),
            (State::InStep, Action::None)
        );
    }

    #[test]
    fn a_batch_arriving_while_a_commit_is_in_flight_is_decided_ahead_of_it() {
        assert_eq!(
            next(committing("commit 1", 10), Event::Decide),
            (committing("commit 1", 10), Action::DecideAhead)
        );
        assert_eq!(
            next(
                committing("commit 1", 10),
                Event::DecidedAhead(Some("batch 2"))
            ),
            (ahead(Some("batch 2")), Action::None)
        );
        assert_eq!(
            next(committing("commit 1", 10), Event::DecidedAhead(None)),
            (ahead(None), Action::None)
        );
    }

    #[test]
    fn a_commit_landed_is_answered_and_published_in_step() {
        assert_eq!(
            next(committing("commit 1", 10), Event::Landed(Ok(()))),
            (
                State::InStep,
                Action::Land {
                    in_flight: "commit 1",
                    landed: Ok(10),
                    then: Then::Nothing
                }
            )
        );
    }

    #[test]
    fn a_commit_failed_is_answered_its_error_and_the_log_reloaded() {
        assert_eq!(
            next(committing("commit 1", 10), Event::Landed(Err("lost"))),
            (
                State::MustReload,
                Action::Land {
                    in_flight: "commit 1",
                    landed: Err("lost"),
                    then: Then::Nothing
                }
            )
        );
    }

    #[test]
    fn a_commit_landed_with_a_batch_decided_ahead_has_that_batch_committed() {
        assert_eq!(
            next(ahead(Some("batch 2")), Event::Landed(Ok(()))),
            (
                State::AheadOfStored { base: 10 },
                Action::Land {
                    in_flight: "commit 1",
                    landed: Ok(10),
                    then: Then::CommitAhead("batch 2")
                }
            )
        );
    }

    #[test]
    fn a_commit_failed_while_a_later_batch_was_decided_ahead_has_it_decided_again_from_the_log() {
        for batch in [Some("batch 2"), None] {
            let (s, a) = next(ahead(batch), Event::Landed(Err("lost")));
            assert_eq!(
                (&s, a),
                (
                    &State::MustReload,
                    Action::Land {
                        in_flight: "commit 1",
                        landed: Err("lost"),
                        then: Then::Nothing
                    }
                )
            );
            assert_eq!(
                next(s, Event::Decide),
                (State::MustReload, Action::Decide { reload: true })
            );
        }
    }

    #[test]
    fn a_batch_that_could_not_be_decided_ahead_falls_back_to_the_stored_commit() {
        let (s, a) = next(ahead(None), Event::Landed(Ok(())));
        assert_eq!(
            (&s, a),
            (
                &State::InStep,
                Action::Land {
                    in_flight: "commit 1",
                    landed: Ok(10),
                    then: Then::FallBack(10)
                }
            )
        );
        assert_eq!(
            next(s, Event::Decide),
            (State::InStep, Action::Decide { reload: false })
        );
    }

    #[test]
    fn another_process_wrote_in_between_falls_back_and_decides_again_under_the_lock() {
        let (s, a) = next(State::AheadOfStored { base: 10 }, Event::Failed);
        assert_eq!((&s, a), (&State::InStep, Action::FallBack(10)));
        assert_eq!(
            next(s, Event::Decide),
            (State::InStep, Action::Decide { reload: false })
        );
    }

    #[test]
    fn a_batch_decided_ahead_commits_or_is_answered() {
        assert_eq!(
            next(
                State::AheadOfStored { base: 10 },
                Event::Began {
                    in_flight: "commit 2",
                    leaves: 12
                }
            ),
            (
                State::Committing {
                    in_flight: "commit 2",
                    leaves: 12,
                    began_at: Some(10)
                },
                Action::None
            )
        );
        assert_eq!(
            next(State::AheadOfStored { base: 10 }, Event::Answered),
            (State::InStep, Action::None)
        );
    }

    #[test]
    fn a_commit_begun_at_the_head_that_lost_the_race_is_decided_again_from_where_it_began() {
        let began = State::Committing {
            in_flight: "commit 2",
            leaves: 12,
            began_at: Some(10),
        };
        let (s, a) = next(began, Event::LostRace("moved"));
        assert_eq!(
            (&s, a),
            (
                &State::InStep,
                Action::Land {
                    in_flight: "commit 2",
                    landed: Err("moved"),
                    then: Then::DecideAgain(10)
                }
            )
        );
        assert_eq!(
            next(s, Event::Decide),
            (State::InStep, Action::Decide { reload: false })
        );
        // A batch decided ahead of it followed a state that was not
        // stored: it goes back to the same place.
        for batch in [Some("batch 3"), None] {
            let ahead_of_it = State::Ahead {
                in_flight: "commit 2",
                base: 12,
                batch,
                began_at: Some(10),
            };
            assert_eq!(
                next(ahead_of_it, Event::LostRace("moved")),
                (
                    State::InStep,
                    Action::Land {
                        in_flight: "commit 2",
                        landed: Err("moved"),
                        then: Then::DecideAgain(10)
                    }
                )
            );
        }
    }

    #[test]
    fn a_commit_begun_under_the_lock_that_says_it_lost_a_race_has_the_log_loaded_again() {
        for s in [committing("commit 1", 10), ahead(Some("batch 2"))] {
            assert_eq!(
                next(s, Event::LostRace("moved")),
                (
                    State::MustReload,
                    Action::Land {
                        in_flight: "commit 1",
                        landed: Err("moved"),
                        then: Then::Nothing
                    }
                )
            );
        }
    }

    #[test]
    fn following_the_log_reloads_only_when_it_must() {
        assert_eq!(
            next(State::InStep, Event::Follow),
            (State::InStep, Action::Follow { reload: false })
        );
        assert_eq!(
            next(State::MustReload, Event::Follow),
            (State::MustReload, Action::Follow { reload: true })
        );
        assert_eq!(
            next(State::InStep, Event::Broken),
            (State::MustReload, Action::None)
        );
    }

    #[test]
    fn a_pipelined_run() {
        let mut s = S::InStep;
        assert_eq!(
            s.step::<&str>(Event::Decide),
            Action::Decide { reload: false }
        );
        s.note::<&str>(Event::Locked);
        s.note::<&str>(Event::Began {
            in_flight: "commit 1",
            leaves: 10,
        });
        assert_eq!(s.step::<&str>(Event::Decide), Action::DecideAhead);
        assert_eq!(s.in_flight(), Some(&"commit 1"));
        s.note::<&str>(Event::DecidedAhead(Some("batch 2")));
        assert_eq!(
            s.step::<&str>(Event::Landed(Ok(()))),
            Action::Land {
                in_flight: "commit 1",
                landed: Ok(10),
                then: Then::CommitAhead("batch 2")
            }
        );
        assert_eq!(s.in_flight(), None);
        s.note::<&str>(Event::Began {
            in_flight: "commit 2",
            leaves: 12,
        });
        assert_eq!(
            s.step::<&str>(Event::Landed(Ok(()))),
            Action::Land {
                in_flight: "commit 2",
                landed: Ok(12),
                then: Then::Nothing
            }
        );
        assert_eq!(s, State::InStep);
    }

    #[test]
    #[should_panic(expected = "the writer reported Landed in state InStep")]
    fn a_commit_landing_with_none_in_flight_stops_the_writer() {
        let _ = next(State::InStep, Event::Landed(Ok(())));
    }

    #[test]
    #[should_panic(expected = "the writer reported Follow in state Committing")]
    fn following_during_a_commit_stops_the_writer() {
        let _ = next(committing("commit 1", 10), Event::Follow);
    }

    #[test]
    fn a_failed_transition_leaves_the_state_to_be_reloaded() {
        let mut s = S::InStep;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.step::<&str>(Event::Answered)
        }));
        assert!(caught.is_err());
        assert_eq!(s, State::MustReload);
    }
}
