//! Prints the plan Postgres chooses for each kind of delivery log page of one account, for
//! `scripts/bench dispatch`: `delivery_plans DATABASE_URL ACCOUNT_ID`.

use moderation_shared::{
    clock,
    config::DatabaseSettings,
    db::{
        self,
        delivery_log::{self, Filter},
    },
    domain::{AccountId, DeliveryId, DeliveryState, JobId},
};
use uuid::Uuid;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(account)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: delivery_plans DATABASE_URL ACCOUNT_ID");
    };
    let account = AccountId(account.parse()?);
    let pool = db::pool(&DatabaseSettings::new(url))?;
    let client = pool.get().await?;
    let job: Uuid = client
        .query_one(
            "SELECT job_id FROM deliveries WHERE account_id = $1 LIMIT 1",
            &[&account.0],
        )
        .await?
        .get(0);
    let week_ago = clock::now() - time::Duration::days(7);
    let pages = [
        ("first page", Filter::default(), None),
        (
            "a later page",
            Filter::default(),
            Some((week_ago, DeliveryId(Uuid::new_v4()))),
        ),
        (
            "status=abandoned",
            Filter {
                states: vec![DeliveryState::Abandoned],
                ..Filter::default()
            },
            None,
        ),
        (
            "status=pending,abandoned&since=a week ago",
            Filter {
                states: vec![DeliveryState::Pending, DeliveryState::Abandoned],
                since: Some(week_ago),
                ..Filter::default()
            },
            None,
        ),
        (
            "job_id=...",
            Filter {
                job_id: Some(JobId(job)),
                ..Filter::default()
            },
            None,
        ),
    ];
    let mut scans = 0;
    for (name, filter, after) in pages {
        let plan = delivery_log::plan(&client, account, &filter, after, 101).await?;
        // A partition made ahead and still empty (no page: its cost is 0.00..0.00) is scanned
        // sequentially at no cost; only a scan of a partition holding rows counts.
        scans += plan
            .lines()
            .filter(|line| line.contains("Seq Scan") && !line.contains("(cost=0.00..0.00 "))
            .count();
        println!("-- {name}\n{plan}\n");
    }
    println!("delivery log plans: {scans} sequential scans of partitions holding rows (target 0)");
    Ok(())
}
