//! The cap on concurrent authenticating requests per source address.
//!
//! Kept in process, so the cap holds per api replica: with N replicas behind a balancer an
//! address may have up to N times the cap in flight. That is enough to stop one address from
//! tying up a replica's key lookups, which is what the cap is for.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// Counts authenticating requests per address.
#[derive(Debug, Clone)]
pub struct InFlight {
    cap: usize,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One admitted authentication; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    source: IpAddr,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl InFlight {
    /// At most `cap` authentications per address at a time.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            counts: Arc::default(),
        }
    }

    /// A slot for `source`, or `None` when it already has `cap` in flight.
    pub fn try_enter(&self, source: IpAddr) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(source).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Slot {
            source,
            counts: self.counts.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_exactly_cap_slots_and_a_freed_slot_can_be_reused() {
        let in_flight = InFlight::new(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();

        let first = in_flight.try_enter(a).unwrap();
        let _second = in_flight.try_enter(a).unwrap();
        assert!(in_flight.try_enter(a).is_none(), "one over the cap");
        assert!(
            in_flight.try_enter(b).is_some(),
            "other addresses are separate"
        );

        drop(first);
        assert!(in_flight.try_enter(a).is_some());
    }

    #[test]
    fn addresses_without_requests_in_flight_are_forgotten() {
        let in_flight = InFlight::new(1);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        drop(in_flight.try_enter(a));
        assert!(in_flight.counts.lock().unwrap().is_empty());
    }
}
