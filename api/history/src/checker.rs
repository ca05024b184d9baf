//! The checker: Wing & Gong's search over the entries of a history with
//! Lowe's memoization, one partition (key) at a time. See the crate's
//! documentation for the algorithm.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Debug, Write as _};
use std::hash::Hash;

use crate::history::{Operation, Outcome, Time};

/// A sequential specification: the object a history is checked against,
/// as a state machine.
///
/// `step` must be deterministic: the same state, operation and answer
/// always give the same result (the checker remembers results, and its
/// cache assumes it). Operations whose answers may legitimately differ in
/// one state are modeled by letting `step` accept each of those answers.
pub trait Model {
    /// What histories are partitioned by: operations on different keys
    /// never affect each other (P-compositionality: a history is
    /// linearizable if and only if each key's sub-history is). A model
    /// without keys answers `()`.
    type Key: Ord + Debug;
    type Op: Debug;
    type Ret: Debug;
    /// Compared and hashed by the checker's cache: two states must be
    /// equal exactly when no sequence of operations can tell them apart
    /// (equal states that could be told apart would make the checker
    /// unsound; states that cannot be told apart but are unequal only cost
    /// time).
    type State: Clone + Eq + Hash + Debug;

    /// The state before any operation, for every key.
    fn init(&self) -> Self::State;

    /// The partition `op` belongs to.
    fn key(&self, op: &Self::Op) -> Self::Key;

    /// The state after `op` takes effect in `state`, if it answers `ret`
    /// there; `None` if `ret` is not what `op` answers in `state` (or `op`
    /// cannot happen in it at all). `ret` is `None` for an operation whose
    /// outcome is unknown: its answer is unconstrained, and the result is
    /// the state it leaves whatever it answered.
    fn step(
        &self,
        state: &Self::State,
        op: &Self::Op,
        ret: Option<&Self::Ret>,
    ) -> Option<Self::State>;
}

/// How far the checker may search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    max_steps: u64,
    memoize: bool,
}

impl Default for Options {
    /// A million steps per partition: a linearizable partition of a few
    /// dozen operations takes a few hundred.
    fn default() -> Self {
        Self {
            max_steps: 1_000_000,
            memoize: true,
        }
    }
}

impl Options {
    /// The most search steps one partition may take (each step tries one
    /// entry of its history); a partition that needs more is inconclusive.
    pub fn with_max_steps(mut self, max_steps: u64) -> Self {
        self.max_steps = max_steps;
        self
    }

    pub fn max_steps(&self) -> u64 {
        self.max_steps
    }

    /// Plain Wing & Gong, without Lowe's cache: for the test that shows
    /// what the cache is worth.
    #[cfg(test)]
    pub(crate) fn without_memoization(mut self) -> Self {
        self.memoize = false;
        self
    }
}

/// What the checker did, summed over the partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub partitions: usize,
    pub operations: usize,
    /// Operations whose outcome is unknown.
    pub unknown: usize,
    /// The operations of the largest partition.
    pub largest_partition: usize,
    /// Search steps: entries tried.
    pub steps: u64,
    /// Configurations (set of operations linearized, model state) the
    /// cache holds: the distinct places the search reached.
    pub configurations: u64,
    /// Calls of [`Model::step`] (each state and operation is stepped
    /// once; later tries are answered from memory).
    pub model_steps: u64,
}

/// Whether a history is linearizable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every partition has a linearization.
    Linearizable,
    /// At least one partition has none.
    Violation,
    /// No partition has been shown to have none, but at least one ran out
    /// of steps before a linearization was found.
    Inconclusive,
}

/// A partition (key) whose history has no linearization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation<K> {
    pub key: K,
    /// The partition's operations, as indices into the checked history,
    /// in order of invocation.
    pub operations: Vec<usize>,
    /// The longest prefix of a linearization the search found (indices
    /// into the history, in the order they took effect): every operation
    /// in it can take effect in that order, consistently with real time.
    pub longest_prefix: Vec<usize>,
    /// The operation the search was stuck on after that prefix: it
    /// answered before it could take effect (no operation invoked before
    /// its answer, itself included, can take effect next).
    pub blocked: usize,
    /// All of it, for a person: the partition's operations with their
    /// times and answers, the prefix with the state after each, and what
    /// could not follow it.
    pub description: String,
}

impl<K> fmt::Display for Violation<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

/// The answer of [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report<K> {
    /// The partitions shown not linearizable, by key.
    pub violations: Vec<Violation<K>>,
    /// The partitions whose search ran out of steps, by key.
    pub inconclusive: Vec<K>,
    pub stats: Stats,
}

impl<K> Report<K> {
    pub fn verdict(&self) -> Verdict {
        if !self.violations.is_empty() {
            Verdict::Violation
        } else if !self.inconclusive.is_empty() {
            Verdict::Inconclusive
        } else {
            Verdict::Linearizable
        }
    }

    pub fn is_linearizable(&self) -> bool {
        self.verdict() == Verdict::Linearizable
    }
}

impl<K: Debug> fmt::Display for Report<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "{:?}: {} operations ({} of unknown outcome) in {} partitions; {} steps, {} configurations",
            self.verdict(),
            s.operations,
            s.unknown,
            s.partitions,
            s.steps,
            s.configurations
        )?;
        for v in &self.violations {
            writeln!(f, "{v}")?;
        }
        if !self.inconclusive.is_empty() {
            writeln!(
                f,
                "out of steps (inconclusive) for keys {:?}",
                self.inconclusive
            )?;
        }
        Ok(())
    }
}

/// Checks `history` against `model`: partitions it by [`Model::key`] and
/// searches each partition for a linearization, within
/// [`Options::max_steps`] steps per partition.
///
/// # Panics
///
/// If an operation answered before it was invoked: the history was
/// recorded wrong (the times come from different clocks, or were read in
/// the wrong order).
pub fn check<M: Model, T: Time>(
    model: &M,
    history: &[Operation<M::Op, M::Ret, T>],
    options: &Options,
) -> Report<M::Key> {
    for (i, o) in history.iter().enumerate() {
        if let Outcome::Returned { at, .. } = &o.outcome {
            assert!(
                *at >= o.invoked,
                "operation #{i} answered ({at:?}) before it was invoked ({:?})",
                o.invoked
            );
        }
    }
    let mut partitions: BTreeMap<M::Key, Vec<usize>> = BTreeMap::new();
    for (i, o) in history.iter().enumerate() {
        partitions.entry(model.key(&o.op)).or_default().push(i);
    }
    let origin = history.iter().map(|o| o.invoked).min();
    let mut report = Report {
        violations: Vec::new(),
        inconclusive: Vec::new(),
        stats: Stats {
            partitions: partitions.len(),
            operations: history.len(),
            unknown: history.iter().filter(|o| o.ret().is_none()).count(),
            ..Stats::default()
        },
    };
    for (key, mut indices) in partitions {
        indices.sort_by_key(|&i| (history[i].invoked, i));
        let stats = &mut report.stats;
        stats.largest_partition = stats.largest_partition.max(indices.len());
        let mut search = Search::new(model, history, &indices);
        let found = search.run(options);
        stats.steps += search.steps;
        stats.configurations += search.seen.len() as u64;
        stats.model_steps += search.model_steps;
        match found {
            Found::Linearization => {}
            Found::Nothing(stuck) => {
                let origin = origin.expect("a partition has operations");
                let v = search.violation(key, &indices, stuck, origin);
                report.violations.push(v);
            }
            Found::OutOfSteps => report.inconclusive.push(key),
        }
    }
    report
}

/// No node: the end of the list.
const NIL: usize = usize::MAX;
/// The list's head, before every entry.
const HEAD: usize = 0;

/// An entry of the history: the invocation or the answer of an operation,
/// in a doubly linked list in time order that the search lifts entries
/// out of and puts back.
struct Node {
    /// The operation, as its index in the partition.
    op: usize,
    call: bool,
    /// A call's return entry.
    matching: usize,
    prev: usize,
    next: usize,
}

/// When an entry happens: an unknown outcome's answer comes after every
/// other entry.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum When<T> {
    At(T),
    Never,
}

/// A set of operations (partition indices).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Where the deepest search got stuck.
struct Stuck {
    /// The operations linearized, in order, with the state after each.
    prefix: Vec<(usize, u32)>,
    /// The known operation whose answer came before it could take effect.
    blocked: usize,
    /// The operations invoked before that answer and not in the prefix:
    /// the ones that could have come next.
    candidates: Vec<usize>,
}

enum Found {
    Linearization,
    Nothing(Stuck),
    OutOfSteps,
}

/// The search over one partition.
struct Search<'a, M: Model, T> {
    model: &'a M,
    /// The partition's operations (in order of invocation).
    ops: Vec<&'a Operation<M::Op, M::Ret, T>>,
    nodes: Vec<Node>,
    /// Every model state met, interned: the cache and the transitions
    /// hold their numbers.
    states: Vec<M::State>,
    ids: HashMap<M::State, u32>,
    /// What `Model::step` answered for (state, operation).
    transitions: HashMap<(u32, usize), Option<u32>>,
    /// Lowe's cache: the configurations reached.
    seen: HashSet<(Bits, u32)>,
    steps: u64,
    model_steps: u64,
}

impl<'a, M: Model, T: Time> Search<'a, M, T> {
    fn new(model: &'a M, history: &'a [Operation<M::Op, M::Ret, T>], indices: &[usize]) -> Self {
        let ops: Vec<_> = indices.iter().map(|&i| &history[i]).collect();
        // Calls before returns at the same instant: operations that touch
        // are taken as concurrent (the lenient reading).
        let mut entries: Vec<(When<T>, bool, usize)> = Vec::with_capacity(2 * ops.len());
        for (i, o) in ops.iter().enumerate() {
            entries.push((When::At(o.invoked), false, i));
            let at = o.returned_at().map_or(When::Never, When::At);
            entries.push((at, true, i));
        }
        entries.sort();
        let mut nodes = vec![Node {
            op: NIL,
            call: false,
            matching: NIL,
            prev: NIL,
            next: NIL,
        }];
        let mut call_of = vec![NIL; ops.len()];
        for (n, &(_, is_return, op)) in entries.iter().enumerate() {
            let at = n + 1;
            nodes[at - 1].next = at;
            nodes.push(Node {
                op,
                call: !is_return,
                matching: NIL,
                prev: at - 1,
                next: NIL,
            });
            if is_return {
                nodes[call_of[op]].matching = at;
            } else {
                call_of[op] = at;
            }
        }
        let mut search = Self {
            model,
            ops,
            nodes,
            states: Vec::new(),
            ids: HashMap::new(),
            transitions: HashMap::new(),
            seen: HashSet::new(),
            steps: 0,
            model_steps: 0,
        };
        search.intern(model.init());
        search
    }

    fn intern(&mut self, state: M::State) -> u32 {
        if let Some(&id) = self.ids.get(&state) {
            return id;
        }
        let id = u32::try_from(self.states.len()).expect("fewer than 2^32 states");
        self.states.push(state.clone());
        self.ids.insert(state, id);
        id
    }

    /// The state `op` leads to from `state`, asking the model once.
    fn step(&mut self, state: u32, op: usize) -> Option<u32> {
        if let Some(&next) = self.transitions.get(&(state, op)) {
            return next;
        }
        self.model_steps += 1;
        let o = self.ops[op];
        let next = self
            .model
            .step(&self.states[state as usize], &o.op, o.ret())
            .map(|s| self.intern(s));
        self.transitions.insert((state, op), next);
        next
    }

    /// Takes a call and its return out of the list.
    fn lift(&mut self, call: usize) {
        for n in [call, self.nodes[call].matching] {
            let (prev, next) = (self.nodes[n].prev, self.nodes[n].next);
            self.nodes[prev].next = next;
            if next != NIL {
                self.nodes[next].prev = prev;
            }
        }
    }

    /// Puts them back: the reverse of [`Self::lift`], in reverse order.
    fn unlift(&mut self, call: usize) {
        for n in [self.nodes[call].matching, call] {
            let (prev, next) = (self.nodes[n].prev, self.nodes[n].next);
            self.nodes[prev].next = n;
            if next != NIL {
                self.nodes[next].prev = n;
            }
        }
    }

    /// Wing & Gong's search with Lowe's cache. Walks the list from the
    /// head: a call whose operation can take effect now (and reaches a
    /// configuration not seen before) is linearized, lifted out, and the
    /// walk starts again from the head; a call that cannot is passed over;
    /// reaching the return of an operation not linearized means the
    /// choices so far cannot be extended, so the last one is undone and
    /// the walk goes on after it. The walk succeeds when it reaches the end
    /// of the list or the return of an operation of unknown outcome: those
    /// come after every known return, so every known operation was
    /// linearized, and the unknown ones left may never have taken effect.
    fn run(&mut self, options: &Options) -> Found {
        let mut linearized = Bits::new(self.ops.len());
        let mut state = 0;
        // The calls linearized, with the state before each.
        let mut stack: Vec<(usize, u32)> = Vec::new();
        let mut stuck: Option<Stuck> = None;
        let mut entry = self.nodes[HEAD].next;
        loop {
            if entry == NIL {
                return Found::Linearization;
            }
            if self.steps >= options.max_steps {
                return Found::OutOfSteps;
            }
            self.steps += 1;
            let op = self.nodes[entry].op;
            if self.nodes[entry].call {
                if let Some(next) = self.step(state, op) {
                    linearized.set(op);
                    let fresh = !options.memoize || self.seen.insert((linearized.clone(), next));
                    if fresh {
                        stack.push((entry, state));
                        state = next;
                        self.lift(entry);
                        entry = self.nodes[HEAD].next;
                        continue;
                    }
                    linearized.clear(op);
                }
                entry = self.nodes[entry].next;
                continue;
            }
            if self.ops[op].ret().is_none() {
                return Found::Linearization;
            }
            if stuck.as_ref().is_none_or(|s| stack.len() > s.prefix.len()) {
                stuck = Some(self.stuck(&stack, state, entry));
            }
            let Some((call, before)) = stack.pop() else {
                return Found::Nothing(stuck.expect("recorded just above"));
            };
            linearized.clear(self.nodes[call].op);
            state = before;
            self.unlift(call);
            entry = self.nodes[call].next;
        }
    }

    fn stuck(&self, stack: &[(usize, u32)], state: u32, blocked: usize) -> Stuck {
        let prefix = stack
            .iter()
            .enumerate()
            .map(|(i, &(call, _))| {
                let after = stack.get(i + 1).map_or(state, |&(_, before)| before);
                (self.nodes[call].op, after)
            })
            .collect();
        let mut candidates = Vec::new();
        let mut n = self.nodes[HEAD].next;
        while n != blocked && n != NIL {
            if self.nodes[n].call {
                candidates.push(self.nodes[n].op);
            }
            n = self.nodes[n].next;
        }
        Stuck {
            prefix,
            blocked: self.nodes[blocked].op,
            candidates,
        }
    }

    /// The violation, for a person.
    fn violation<K: Debug>(
        &self,
        key: K,
        indices: &[usize],
        stuck: Stuck,
        origin: T,
    ) -> Violation<K> {
        let show = |op: usize| {
            let o = self.ops[op];
            let ret = o
                .ret()
                .map_or("unknown outcome".to_owned(), |r| format!("{r:?}"));
            let until = o
                .returned_at()
                .map_or("never".to_owned(), |t| t.show(origin));
            format!(
                "#{} client {} [{} .. {}] {:?} -> {}",
                indices[op],
                o.client,
                o.invoked.show(origin),
                until,
                o.op,
                ret
            )
        };
        let mut d = String::new();
        let n = self.ops.len();
        let _ = writeln!(
            d,
            "key {key:?}: no linearization of its {n} operations exists."
        );
        let _ = writeln!(d, "  operations, by invocation ([invoked .. answered]):");
        for op in 0..n {
            let _ = writeln!(d, "    {}", show(op));
        }
        let _ = writeln!(
            d,
            "  longest linearizable prefix ({} of {n}), with the state after each:",
            stuck.prefix.len()
        );
        let _ = writeln!(d, "    (initial)  => {:?}", self.states[0]);
        for &(op, after) in &stuck.prefix {
            let _ = writeln!(d, "    {}  => {:?}", show(op), self.states[after as usize]);
        }
        let _ = writeln!(
            d,
            "  then {} answered before it could take effect: none of the operations invoked before that answer can follow the prefix:",
            show(stuck.blocked)
        );
        for &op in &stuck.candidates {
            let _ = writeln!(d, "    {}", show(op));
        }
        Violation {
            key,
            operations: indices.to_vec(),
            longest_prefix: stuck.prefix.iter().map(|&(op, _)| indices[op]).collect(),
            blocked: indices[stuck.blocked],
            description: d,
        }
    }
}
