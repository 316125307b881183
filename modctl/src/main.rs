//! `modctl`: the operator CLI. Every command prints JSON on stdout; on failure it prints a
//! message on stderr and exits non-zero. It reads `DATABASE_URL` (and the `APP_*` keys where a
//! command needs them).

mod audit;
mod cli;
mod hashbank;
mod instant;
mod job;
mod lifecycle;
mod registry;
mod user;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli::run(cli).await {
        Ok(cli::Output::One(output)) => {
            println!("{output}");
            ExitCode::SUCCESS
        }
        Ok(cli::Output::Lines(lines)) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("modctl: {err:#}");
            ExitCode::FAILURE
        }
    }
}
