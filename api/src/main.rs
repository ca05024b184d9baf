//! The `stratum` binary.

use clap::Parser;

/// mimalloc, not the C library's allocator: a server's requests allocate
/// and free small buffers on every worker thread, where glibc's arenas
/// spent a third of the server's time (`_int_malloc`, `unlink_chunk`,
/// `malloc_consolidate`) under 5,000 long-polling agents
/// (`docs/benchmarks.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    // Traces are the service's: only `serve` exports them.
    let traces = match &cli.command {
        stratum_api::cli::Cmd::Serve(_) => {
            match stratum_api::telemetry::Traces::from_env(runtime.handle()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("stratum: {e}");
                    std::process::exit(2);
                }
            }
        }
        _ => None,
    };
    if let Err(e) = cli.log.install(traces.as_ref()) {
        eprintln!("stratum: {e}");
        std::process::exit(2);
    }
    let code = match runtime.block_on(stratum_api::cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stratum: {e}");
            2
        }
    };
    if let Some(t) = traces {
        t.shutdown();
    }
    std::process::exit(code)
}
