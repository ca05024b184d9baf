//! The `stratum` binary.

use clap::Parser;

fn main() {
    // The config file becomes environment variables before the command
    // line is parsed and before any thread starts.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Err(e) = stratum_api::cli::config::apply(&args) {
        eprintln!("stratum: {e}");
        std::process::exit(2);
    }
    let cli = stratum_api::cli::Cli::parse();
    stratum_api::cli::config::settle(matches!(
        &cli.command,
        stratum_api::cli::Cmd::Serve(args) if args.print_config
    ));
    if let Err(e) = cli.log.install() {
        eprintln!("stratum: {e}");
        std::process::exit(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("stratum: cannot start the runtime: {e}");
            std::process::exit(2);
        }
    };
    match runtime.block_on(stratum_api::cli::run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("stratum: {e}");
            std::process::exit(2);
        }
    }
}
