//! Jobs finished into review as a worker finishes them, without a worker: the decision names
//! why each goes to review, and `finish_many` makes its review item in the same transaction.
//! What the dashboard's review pages are tested on (the review tests drive real workers).

use moderation_shared::{
    db::{
        audit_events::Actor,
        jobs::{finish_many, insert_many, Finish, JobResult, NewJob},
        webhooks,
    },
    domain::{AccountId, ClaimToken, JobId, Modality, ReviewReason},
    outcome::{Decision, JobOutcome},
};

use crate::TestApp;

impl TestApp {
    /// Stores a job of `account` of `modality` holding `content` (a prompt or a media URL)
    /// and finishes it with `decision`, as a worker would; it goes to review for
    /// `decision.review`. Returns its id.
    pub async fn finished_into_review(
        &self,
        account: AccountId,
        modality: Modality,
        content: &str,
        decision: Decision,
    ) -> JobId {
        let job = JobId::new();
        let mut client = self.db.pool.get().await.expect("connect");
        let tx = client.transaction().await.expect("begin");
        let stored = insert_many(
            &tx,
            &[NewJob {
                id: job,
                account_id: account,
                api_key_id: None,
                modality,
                content: content.to_owned(),
                messages: None,
                webhook_url: None,
                idempotency: None,
            }],
        )
        .await
        .expect("insert the job");
        assert_eq!(stored, [true]);
        let result = JobResult {
            id: job,
            token: ClaimToken::new(),
            stamp: None,
            outcome: JobOutcome::Decided(Box::new(decision)),
        };
        let answers = finish_many(&tx, &[result]).await.expect("finish");
        assert!(matches!(answers[0], Finish::Done(_)), "{:?}", answers[0]);
        tx.commit().await.expect("commit");
        job
    }

    /// Sets `account`'s global webhook URL (nothing needs to answer there: deliveries made
    /// for it stay pending unless a dispatcher runs).
    pub async fn set_webhook_url(&self, account: AccountId, url: &str) {
        let mut client = self.db.pool.get().await.expect("connect");
        let tx = client.transaction().await.expect("begin");
        webhooks::set_url(&tx, account, Actor::Operator, url)
            .await
            .expect("set the URL");
        tx.commit().await.expect("commit");
    }
}

/// An image's decision as the NSFW model takes it at `nsfw` thousandths: prohibited from 0.5
/// (version 1's rule), its categories (`nsfw` set when prohibited), and sampled for review.
pub fn image_decision(nsfw: u16) -> Decision {
    let prohibited = nsfw >= 500;
    Decision {
        is_prohibited: prohibited,
        reason: prohibited.then(|| format!("nsfw scored {:.3}", f64::from(nsfw) / 1000.0)),
        categories: Some(serde_json::json!({
            "ai_adult_general": false, "underage": false, "nsfw": prohibited
        })),
        scores: [("nsfw".to_owned(), nsfw)].into(),
        nsfw_checked: Some(true),
        policy_version: Some(1),
        review: vec![ReviewReason::Sample],
        ..Decision::default()
    }
}

/// A prompt's decision: allowed, with a violence score, sampled for review.
pub fn text_decision() -> Decision {
    Decision {
        scores: [("violence".to_owned(), 120)].into(),
        policy_version: Some(1),
        review: vec![ReviewReason::Sample],
        ..Decision::default()
    }
}
