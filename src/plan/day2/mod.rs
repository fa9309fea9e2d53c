//! Day 2: planning on top of what runs today.
//!
//! Files, lowest first (each imports only those before it): [`previous`] reads a committed
//! `plan.json`; [`changes`] holds the changes section's types and the one rule of whether a
//! node's change needs a drain; [`advice`] the bounded search for a way down from the
//! ratchet; [`transition`] the state machine of each node (what it carries, its target, its
//! phase, and what `--observed` confirms); [`replan`] re-plans from the
//! previous plan, changing as little as the manifest allows; [`rollout`] computes the changes
//! section and its waves.

pub mod advice;
pub mod changes;
pub mod previous;
pub mod replan;
pub mod rollout;
pub mod transition;
