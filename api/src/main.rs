//! The `stratum` binary.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = stratum_api::cli::Cli::parse();
    if let Err(e) = cli.log.install() {
        eprintln!("stratum: {e}");
        std::process::exit(2);
    }
    match stratum_api::cli::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("stratum: {e}");
            std::process::exit(2);
        }
    }
}
