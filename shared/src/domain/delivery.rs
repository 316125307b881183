//! The words of webhook delivery: a delivery's event and state, and a signing secret's status.

word_enum!(
    /// A delivery's state (`deliveries.state`): `pending` until it ends in one of the others.
    DeliveryState, UnknownDeliveryState, "delivery state" {
        /// Waiting for its next attempt (or in one).
        Pending => "pending",
        /// Acknowledged with a 2xx.
        Delivered => "delivered",
        /// Its last attempt failed.
        Abandoned => "abandoned",
        /// Its target can never be delivered to (malformed, not https, not public).
        Undeliverable => "undeliverable",
    }
);

word_enum!(
    /// A signing secret's status: the one `active` secret, or an `expiring` rotated-out one
    /// that still signs until its expiry.
    SecretStatus, UnknownSecretStatus, "secret status" {
        /// Signs, with no expiry.
        Active => "active",
        /// Signs until its expiry.
        Expiring => "expiring",
    }
);

word_enum!(
    /// What a delivery tells its receiver (`event` in the body, `deliveries.event`).
    WebhookEvent, UnknownWebhookEvent, "webhook event" {
        /// A job ended (completed or failed).
        JobCompleted => "job.completed",
        /// A person changed a job's outcome.
        JobRevised => "job.revised",
        /// An appeal was decided.
        AppealDecided => "appeal.decided",
        /// A test delivery asked for by the account.
        Ping => "ping",
    }
);
