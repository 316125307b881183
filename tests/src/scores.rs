//! Jobs completed with stored model scores, as a worker finishes them: what the impact of a
//! policy version is computed over.

use moderation_shared::{
    db::jobs::{finish_many, Finish, JobResult},
    domain::{ClaimToken, JobId},
    outcome::{Decision, JobOutcome},
};

use crate::{TestApp, TestKey};

impl TestApp {
    /// Submits a prompt with `key` and finishes it as a worker would: decided `prohibited`
    /// by version 1 (`listed`: a list rejected it), with `scores` (thousandths by policy
    /// category) stored.
    pub async fn finished_with_scores(
        &self,
        key: &TestKey,
        prohibited: bool,
        listed: bool,
        scores: &[(&str, u16)],
    ) -> JobId {
        let job = JobId(self.submit_prompt(key, "some text").await);
        let mut client = self.db.pool.get().await.expect("connect");
        let tx = client.transaction().await.expect("begin");
        let result = JobResult {
            id: job,
            token: ClaimToken::new(),
            stamp: None,
            outcome: JobOutcome::Decided(Box::new(Decision {
                is_prohibited: prohibited,
                listed,
                policy_version: Some(1),
                scores: scores.iter().map(|&(c, s)| (c.to_owned(), s)).collect(),
                ..Decision::default()
            })),
        };
        let answers = finish_many(&tx, &[result]).await.expect("finish");
        assert!(matches!(answers[0], Finish::Done(_)), "{:?}", answers[0]);
        tx.commit().await.expect("commit");
        job
    }
}
