//! The `stratum` binary.

use clap::Parser;

/// mimalloc, not the C library's allocator: a server's requests allocate
/// and free small buffers on every worker thread, where glibc's arenas
/// spent a third of the server's time (`_int_malloc`, `unlink_chunk`,
/// `malloc_consolidate`) under 5,000 long-polling agents
/// (`docs/benchmarks.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How many tasks a busy worker runs before it looks for new I/O and
/// timers (tokio's default is 61). A change wakes every long-poll waiting
/// for it, thousands at once; with the default, each worker read the
/// agents' next requests (their reports, their next long-polls) every 61
/// polls, and the rest of the change waited behind them. At 4,096 a
/// worker answers what is already woken first: the 5,000 agents' p99
/// delivery on PostgreSQL fell from 152-197 ms to 118-147 ms, the time to
/// an empty `lagging` unchanged (`docs/benchmarks.md`, "the scheduler's
/// event interval"). Tokio's documentation advises a higher interval where
/// tasks poll quickly, as a request's do here. A worker with nothing to run
/// looks for events at once, so the interval matters only while every
/// worker is saturated; then new requests, timers and the tasks that
/// yielded (a loop out of its cooperative budget) wait for up to that many
/// polls, some 20-40 ms at 5-10 µs a poll, where they waited for 61.
const EVENT_INTERVAL: u32 = 4096;

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
        .event_interval(EVENT_INTERVAL)
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
