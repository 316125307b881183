//! Turning matching entries into the signals of a check response.
//!
//! The caller (the check query) passes only entries that may count: other members', active or
//! disputed, not expired, of accounts that are not terminated. Nothing here carries an entry
//! id, a case reference or a member id into the output.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use time::{OffsetDateTime, Time, UtcOffset};
use utoipa::ToSchema;

use super::Category;
use crate::domain::AccountId;

/// One counting entry that matched an identifier of the check.
#[derive(Debug, Clone)]
pub struct Match {
    /// The reporting member (used only to count distinct reporters).
    pub member: AccountId,
    /// The entry's category.
    pub category: Category,
    /// Whether the entry is under an open dispute.
    pub disputed: bool,
    /// When the entry was first reported.
    pub first_reported_at: OffsetDateTime,
    /// When it was last reported (created or refreshed).
    pub last_reported_at: OffsetDateTime,
}

/// One element of `signals` in a check response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Signal {
    /// The category.
    pub category: Category,
    /// Distinct other members reporting this category across all identifiers of the call.
    pub reporter_count: u32,
    /// Earliest report, truncated to the UTC day.
    #[serde(with = "crate::clock::serde_millis")]
    #[schema(value_type = String, format = DateTime)]
    pub first_reported_at: OffsetDateTime,
    /// Latest report, truncated to the UTC day.
    #[serde(with = "crate::clock::serde_millis")]
    #[schema(value_type = String, format = DateTime)]
    pub last_reported_at: OffsetDateTime,
    /// True only when at least two distinct members hold active entries in this category and
    /// none of the counting entries is disputed.
    pub automated_refusal_permitted: bool,
}

#[derive(Default)]
struct Tally {
    members: BTreeSet<AccountId>,
    active_members: BTreeSet<AccountId>,
    any_disputed: bool,
    first: Option<OffsetDateTime>,
    last: Option<OffsetDateTime>,
}

/// The signals for `matches`: one per category with a match, in [`Category::ALL`] order.
pub fn signals(matches: &[Match]) -> Vec<Signal> {
    let mut tallies: BTreeMap<Category, Tally> = BTreeMap::new();
    for m in matches {
        let tally = tallies.entry(m.category).or_default();
        tally.members.insert(m.member);
        if m.disputed {
            tally.any_disputed = true;
        } else {
            tally.active_members.insert(m.member);
        }
        tally.first = Some(
            tally
                .first
                .map_or(m.first_reported_at, |t| t.min(m.first_reported_at)),
        );
        tally.last = Some(
            tally
                .last
                .map_or(m.last_reported_at, |t| t.max(m.last_reported_at)),
        );
    }
    Category::ALL
        .into_iter()
        .filter_map(|category| {
            let tally = tallies.remove(&category)?;
            Some(Signal {
                category,
                reporter_count: u32::try_from(tally.members.len()).unwrap_or(u32::MAX),
                first_reported_at: utc_day(tally.first?),
                last_reported_at: utc_day(tally.last?),
                automated_refusal_permitted: tally.active_members.len() >= 2 && !tally.any_disputed,
            })
        })
        .collect()
}

/// Midnight UTC of the day `at` falls on.
pub fn utc_day(at: OffsetDateTime) -> OffsetDateTime {
    at.to_offset(UtcOffset::UTC).replace_time(Time::MIDNIGHT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn m(member: AccountId, category: Category, disputed: bool) -> Match {
        Match {
            member,
            category,
            disputed,
            first_reported_at: datetime!(2026-03-04 05:06:07.089 UTC),
            last_reported_at: datetime!(2026-05-06 23:59:59.999 UTC),
        }
    }

    #[test]
    fn no_matches_give_no_signals() {
        assert!(signals(&[]).is_empty());
    }

    #[test]
    fn signals_come_in_the_fixed_category_order() {
        let a = AccountId::new();
        let out = signals(&[
            m(a, Category::BanEvasion, false),
            m(a, Category::PaymentFraud, false),
            m(a, Category::ProhibitedContent, false),
        ]);
        let order: Vec<_> = out.iter().map(|s| s.category).collect();
        assert_eq!(order, Category::ALL);
    }

    #[test]
    fn reporters_are_counted_once_across_identifiers() {
        let (a, b) = (AccountId::new(), AccountId::new());
        let out = signals(&[
            m(a, Category::PaymentFraud, false),
            m(a, Category::PaymentFraud, false),
            m(b, Category::PaymentFraud, false),
        ]);
        assert_eq!(out[0].reporter_count, 2);
        assert!(out[0].automated_refusal_permitted);
    }

    #[test]
    fn one_active_reporter_never_permits_automated_refusal() {
        let a = AccountId::new();
        let out = signals(&[m(a, Category::PaymentFraud, false)]);
        assert!(!out[0].automated_refusal_permitted);
    }

    #[test]
    fn any_disputed_entry_forbids_automated_refusal() {
        let (a, b, c) = (AccountId::new(), AccountId::new(), AccountId::new());
        let out = signals(&[
            m(a, Category::PaymentFraud, false),
            m(b, Category::PaymentFraud, false),
            m(c, Category::PaymentFraud, true),
        ]);
        assert_eq!(out[0].reporter_count, 3);
        assert!(!out[0].automated_refusal_permitted);
    }

    #[test]
    fn dates_are_truncated_to_the_utc_day() {
        let out = signals(&[m(AccountId::new(), Category::BanEvasion, false)]);
        assert_eq!(out[0].first_reported_at, datetime!(2026-03-04 00:00 UTC));
        assert_eq!(out[0].last_reported_at, datetime!(2026-05-06 00:00 UTC));
        let json = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(json["first_reported_at"], "2026-03-04T00:00:00.000Z");
    }
}
