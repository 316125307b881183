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
        /// Kept unattempted while the account's URL is disabled or paused (contract 17).
        Held => "held",
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

word_enum!(
    /// The state of an account's webhook URL (contract 17, `webhook_endpoints.state`).
    EndpointState, UnknownEndpointState, "endpoint state" {
        /// Its latest attempt succeeded (or none was made).
        Active => "active",
        /// An attempt failed with no 2xx after it.
        Failing => "failing",
        /// Not attempted: its deliveries are held.
        Disabled => "disabled",
        /// Paused by the account: its deliveries are held.
        Paused => "paused",
    }
);

impl EndpointState {
    /// Whether deliveries to a URL in this state are held instead of attempted.
    pub fn holds(self) -> bool {
        matches!(self, EndpointState::Disabled | EndpointState::Paused)
    }
}

word_enum!(
    /// Why an account's webhook URL is disabled.
    DisabledReason, UnknownDisabledReason, "disabled reason" {
        /// It failed for `APP_WEBHOOK_DISABLE_AFTER_S` with enough failed attempts.
        Auto => "auto",
        /// It answered 410 Gone.
        Gone => "gone",
        /// The account disabled it.
        Manual => "manual",
    }
);

word_enum!(
    /// What an operator notice tells (`event` of its body).
    OperatorEvent, UnknownOperatorEvent, "operator event" {
        /// A URL entered `failing`, or its automatic disable is a day away.
        EndpointFailing => "endpoint.failing",
        /// A URL was disabled.
        EndpointDisabled => "endpoint.disabled",
        /// A disabled or paused URL was enabled or resumed.
        EndpointEnabled => "endpoint.enabled",
        /// A failing URL answered 2xx again.
        EndpointRecovered => "endpoint.recovered",
    }
);
