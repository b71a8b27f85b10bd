//! Pipeline stages: pure state machines fed entries in order.

pub mod branches;
pub mod validate;
pub mod repair;
pub mod events;
