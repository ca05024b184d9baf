//! The peers' shared domain: the same decisions for cqrs-es and esrs, with
//! stratum's validation of a step.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub admitted: bool,
    pub steps: u64,
    pub last_step: Option<String>,
}

#[derive(Clone, Debug)]
pub enum Command {
    Admit {
        node_id: String,
        role: String,
        mgmt_ip: String,
    },
    ReportJoinProgress {
        step: String,
    },
}

impl Command {
    pub fn admit(w: usize) -> Self {
        Command::Admit {
            node_id: super::node_id(w),
            role: "compute".into(),
            mgmt_ip: super::mgmt_ip(w),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    Admitted {
        node_id: String,
        role: String,
        mgmt_ip: String,
    },
    JoinProgressReported {
        step: String,
    },
}

#[derive(Debug)]
pub enum Refused {
    AlreadyAdmitted,
    NotAdmitted,
    InvalidStep,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::AlreadyAdmitted => "already admitted",
            Refused::NotAdmitted => "not admitted",
            Refused::InvalidStep => "not a join step name",
        })
    }
}

impl std::error::Error for Refused {}

pub fn decide(state: &State, command: Command) -> Result<Event, Refused> {
    match command {
        Command::Admit {
            node_id,
            role,
            mgmt_ip,
        } => {
            if state.admitted {
                return Err(Refused::AlreadyAdmitted);
            }
            Ok(Event::Admitted {
                node_id,
                role,
                mgmt_ip,
            })
        }
        Command::ReportJoinProgress { step } => {
            if !state.admitted {
                return Err(Refused::NotAdmitted);
            }
            if !stratum_domain::membership::valid_step(&step) {
                return Err(Refused::InvalidStep);
            }
            Ok(Event::JoinProgressReported { step })
        }
    }
}

pub fn evolve(state: &mut State, event: Event) {
    match event {
        Event::Admitted { .. } => state.admitted = true,
        Event::JoinProgressReported { step } => {
            state.steps += 1;
            state.last_step = Some(step);
        }
    }
}
