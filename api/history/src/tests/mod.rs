//! The checker's tests: on a register model (the algorithm), and on the
//! member model (the domain's rules).

use crate::{Model, Operation};

mod checker;
mod member;

/// A register per key, initially 0.
struct Register;

#[derive(Clone, Debug, PartialEq, Eq)]
enum RegOp {
    Write(&'static str, u8),
    Read(&'static str),
    /// An operation no state accepts (whatever it answered).
    Impossible(&'static str),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum RegRet {
    Done,
    Value(u8),
}

impl Model for Register {
    type Key = &'static str;
    type Op = RegOp;
    type Ret = RegRet;
    type State = u8;

    fn init(&self) -> u8 {
        0
    }

    fn key(&self, op: &RegOp) -> &'static str {
        match op {
            RegOp::Write(k, _) | RegOp::Read(k) | RegOp::Impossible(k) => k,
        }
    }

    fn step(&self, state: &u8, op: &RegOp, ret: Option<&RegRet>) -> Option<u8> {
        match (op, ret) {
            (RegOp::Write(_, v), None | Some(RegRet::Done)) => Some(*v),
            (RegOp::Read(_), None) => Some(*state),
            (RegOp::Read(_), Some(RegRet::Value(v))) if v == state => Some(*state),
            _ => None,
        }
    }
}

type RegOperation = Operation<RegOp, RegRet>;

/// `client` wrote `v` to `k` over `[from, to]`.
fn write(client: usize, k: &'static str, v: u8, from: u64, to: u64) -> RegOperation {
    Operation::returned(client, RegOp::Write(k, v), from, RegRet::Done, to)
}

/// `client` read `v` from `k` over `[from, to]`.
fn read(client: usize, k: &'static str, v: u8, from: u64, to: u64) -> RegOperation {
    Operation::returned(client, RegOp::Read(k), from, RegRet::Value(v), to)
}

/// `client` wrote `v` to `k` from `from` on, and never heard back.
fn write_unknown(client: usize, k: &'static str, v: u8, from: u64) -> RegOperation {
    Operation::unknown(client, RegOp::Write(k, v), from)
}

/// A small deterministic generator (an LCG), so the generated histories
/// are the same on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}
