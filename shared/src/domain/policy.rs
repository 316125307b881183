//! The words of policies and review: a policy category's mode, a version's status, who acted
//! (the audit log's actor), a job's review, review items and appeals.

word_enum!(
    /// What a policy category's score does (contract 13).
    PolicyMode, UnknownPolicyMode, "mode" {
        /// A score at or above `block_at` rejects; one in [`review_at`, `block_at`) sends the
        /// job to review.
        Enforce => "enforce",
        /// The score is recorded; it never rejects or sends to review.
        Observe => "observe",
        /// The category is not scored into the decision (its score is still stored).
        Off => "off",
    }
);

word_enum!(
    /// A policy version's status (`policy_versions.status`).
    PolicyStatus, UnknownPolicyStatus, "policy status" {
        /// Made, never active (or a shadow stopped).
        Draft => "draft",
        /// Runs beside the active version on every new job, never acting.
        Shadow => "shadow",
        /// Decides every new job.
        Active => "active",
        /// Was active; activating it again is the rollback.
        Retired => "retired",
    }
);

word_enum!(
    /// Who did something the audit log records.
    ActorType, UnknownActorType, "actor type" {
        /// An API key (its id).
        Key => "key",
        /// A dashboard user (their id).
        User => "user",
        /// An operator: `modctl`, or the service itself (no id).
        Operator => "operator",
    }
);

word_enum!(
    /// Why a job went to review (contract 14).
    ReviewReason, UnknownReviewReason, "review reason" {
        /// A category scored in its review band.
        Band => "band",
        /// The deterministic sample picked it.
        Sample => "sample",
        /// It was appealed.
        Appeal => "appeal",
    }
);

word_enum!(
    /// Where a job's review stands (`jobs.review_state`).
    JobReviewState, UnknownJobReviewState, "review state" {
        /// An item is open.
        Pending => "pending",
        /// Every item is decided.
        Decided => "decided",
    }
);

word_enum!(
    /// Who decided a job's current outcome.
    DecidedBy, UnknownDecidedBy, "decided by" {
        /// The models and lists (revision 0).
        Model => "model",
        /// A reviewer, from the review queue.
        Review => "review",
        /// A reviewer, deciding an appeal.
        Appeal => "appeal",
    }
);

word_enum!(
    /// Where a review item stands (contract 14). A claim past its expiry is `pending` again.
    ReviewItemState, UnknownReviewItemState, "review item state" {
        /// Waiting for a reviewer.
        Pending => "pending",
        /// Held by a reviewer until its claim expires.
        Claimed => "claimed",
        /// Decided.
        Decided => "decided",
    }
);

word_enum!(
    /// Where an appeal stands: `open`, then `upheld` (the decision stands) or `overturned`
    /// (a reviewer changed it).
    AppealState, UnknownAppealState, "appeal state" {
        /// Waiting for a reviewer.
        Open => "open",
        /// The decision stands.
        Upheld => "upheld",
        /// The decision was changed.
        Overturned => "overturned",
    }
);
