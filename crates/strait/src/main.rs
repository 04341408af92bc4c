//! The `strait` command line: each command run (its arguments are `cli.rs`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cli::{Cli, Command, LogFormat, Output};
use strait::config::{Config, Flow};
use strait_connect::ErrorKind;
use tokio_util::sync::CancellationToken;

mod cli;

strait::process_allocator!();

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
        LogFormat::Json => logs.json().flatten_event(true).with_current_span(false).with_span_list(false).init(),
    }
    if let Command::ImportMm2 { properties, secrets_dir } = &cli.command {
        return import_mm2(properties, secrets_dir);
    }
    let path = match &cli.command {
        Command::Run { config, .. }
        | Command::Validate { config }
        | Command::Status { config, .. }
        | Command::TranslateOffsets { config, .. }
        | Command::Failover { config, .. } => config,
        Command::ImportMm2 { properties, .. } => properties,
    };
    let (flows, metrics) = match Config::load_with_metrics(path) {
        Ok(loaded) => loaded,
        Err(e) => {
            print_err!("strait: invalid config: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Validate { .. } => {
            let n = flows.len();
            let mut out = format!("{}: valid ({n} flow{})\n", path.display(), if n == 1 { "" } else { "s" });
            for flow in &flows {
                out += &format!("{}\n", strait::status::FlowCopy::of(flow));
            }
            print_out(&out);
            ExitCode::SUCCESS
        }
        command => match tokio::runtime::Runtime::new() {
            Ok(rt) => {
                let code = match command {
                    Command::TranslateOffsets { flow, group, output, .. } => {
                        rt.block_on(translate(flows, &flow, &group, output))
                    }
                    Command::Run { metrics_addr, flow: chosen, .. } => match only(flows, &chosen) {
                        Ok(flows) => {
                            strait::metrics::metrics().set_per_partition(metrics.per_partition);
                            rt.block_on(run(flows, metrics_addr.or(metrics.listen)))
                        }
                        Err(code) => code,
                    },
                    Command::Status { output, .. } => rt.block_on(status(flows, output)),
                    Command::Failover { flow, groups, wait_ms, mode, source_timeout_ms, quiet_ms, output, .. } => {
                        let timing = (
                            Duration::from_millis(wait_ms),
                            Duration::from_millis(source_timeout_ms),
                            quiet_ms.map(Duration::from_millis),
                        );
                        rt.block_on(failover(flows, &flow, groups, mode, timing, output))
                    }
                    Command::Validate { .. } | Command::ImportMm2 { .. } => unreachable!("handled above"),
                };
                // Don't wait for a connection attempt still blocked in librdkafka (up to 10 s).
                rt.shutdown_background();
                code
            }
            Err(e) => {
                print_err!("strait: cannot start the async runtime: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn import_mm2(path: &std::path::Path, secrets_dir: &str) -> ExitCode {
    let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    let imported =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display())).and_then(|text| {
            match yaml {
                true => strait::import_mm2::import_strimzi(&text, secrets_dir),
                false => java_properties::read(text.as_bytes())
                    .map_err(|e| e.to_string())
                    .and_then(|props| strait::import_mm2::import(&props)),
            }
        });
    match imported {
        Ok(imported) => {
            for (key, why) in &imported.dropped {
                print_err!("strait: not carried: {key}: {why}");
            }
            for note in &imported.notes {
                print_err!("strait: note: {note}");
            }
            print_out(&imported.toml);
            ExitCode::SUCCESS
        }
        Err(e) => {
            print_err!("strait: cannot import {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

async fn status(flows: Vec<Flow>, output: Output) -> ExitCode {
    // Every flow that can be read is reported; one whose target does not answer (a region
    // down) is named and the others still print. The flows are read at once, so a region down
    // costs one timeout, not one per flow.
    let read = futures::future::join_all(flows.iter().map(|flow| async move {
        let mut one = strait::status::Status::default();
        let result = strait::status::collect(flow, &mut one).await;
        (flow, one, result)
    }))
    .await;
    let mut status = strait::status::Status::default();
    for (flow, one, result) in read {
        status.flows.extend(one.flows);
        status.partitions.extend(one.partitions);
        status.checkpoints.extend(one.checkpoints);
        status.problems.extend(one.problems);
        if let Err(e) = result {
            status.problems.push(format!(
                "flow {}: {} does not answer ({e}): its positions and checkpoints are unknown",
                flow.name,
                flow.target.named("target")
            ));
        }
    }
    let code = print_as(output, &status, || status.text());
    with_problems(code, "strait", &status.problems)
}

/// `code`, unless `problems` is not empty: then each is printed on stderr after `prefix` and the
/// exit is 1.
fn with_problems(code: ExitCode, prefix: &str, problems: &[String]) -> ExitCode {
    for problem in problems {
        print_err!("{prefix}: {problem}");
    }
    if problems.is_empty() {
        code
    } else {
        ExitCode::FAILURE
    }
}

/// Prints `value` as pretty JSON, or `text()` for [`Output::Text`]. Errors: JSON encoding.
fn print_as(output: Output, value: &impl serde::Serialize, text: impl FnOnce() -> String) -> ExitCode {
    match output {
        Output::Json => match serde_json::to_string_pretty(value) {
            Ok(json) => print_out(&format!("{json}\n")),
            Err(e) => {
                print_err!("strait: {e}");
                return ExitCode::FAILURE;
            }
        },
        Output::Text => print_out(&text()),
    }
    ExitCode::SUCCESS
}

async fn translate(flows: Vec<Flow>, flow: &str, group: &str, output: Output) -> ExitCode {
    let Some(flow) = flows.iter().find(|f| f.name == flow).cloned() else {
        return unknown_flow(flow, &flows);
    };
    let flow = Arc::new(flow);
    let result = async {
        let mut translator = strait::control::checkpoint::translate::Translator::new(flow.clone())?;
        translator.catch_up().await?;
        let mut source = strait::control::checkpoint::groups::GroupClient::new(&flow.source)?;
        let partitions = translator.replicated_partitions(&source).await?;
        translator.translate_group(&mut source, group, &partitions).await
    }
    .await;
    let rows = match result {
        Ok(rows) => rows,
        Err(e) => {
            print_err!("strait: cannot translate offsets of group {group:?} for flow {}: {e}", flow.name);
            return ExitCode::FAILURE;
        }
    };
    print_as(output, &rows, || {
        let mut text = format!(
            "{:<40} {:<40} {:>9} {:>12} {:>12}\n",
            "SOURCE_TOPIC", "TARGET_TOPIC", "PARTITION", "UPSTREAM", "DOWNSTREAM"
        );
        for r in &rows {
            let down = r.downstream.map_or("-".to_string(), |d| d.to_string());
            text += &format!(
                "{:<40} {:<40} {:>9} {:>12} {:>12}\n",
                r.source_topic, r.target_topic, r.partition, r.upstream, down
            );
        }
        text
    })
}

async fn failover(
    flows: Vec<Flow>,
    flow: &str,
    groups: Vec<String>,
    mode: strait::failover::Mode,
    (wait, source_timeout, quiet): (Duration, Duration, Option<Duration>),
    output: Output,
) -> ExitCode {
    let Some(flow) = flows.iter().find(|f| f.name == flow).cloned() else {
        return unknown_flow(flow, &flows);
    };
    let reverse =
        flows.into_iter().find(|f| f.source.alias == flow.target.alias && f.target.alias == flow.source.alias);
    let groups = if groups.is_empty() {
        None
    } else {
        match strait::rules::NameFilter::new("--groups", &groups, "", &[]) {
            Ok(filter) => Some(filter),
            Err(e) => {
                print_err!("strait: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let options = strait::failover::Options { groups, wait, source_timeout, mode, quiet };
    let name = flow.name.clone();
    match strait::failover::failover(Arc::new(flow), reverse.map(Arc::new), &options).await {
        Ok(report) => {
            let code = print_as(output, &report, || report.text());
            with_problems(code, &format!("strait: failover of flow {name}"), &report.problems)
        }
        Err(e) => {
            print_err!("strait: failover of flow {name} failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit 2 for a `--flow` the config does not have, naming the ones it has (quote them in a shell:
/// `>` redirects).
/// The flows of `flows` named in `chosen` (`--flow`, each `SOURCE->TARGET`), in the config's
/// order; all of them when `chosen` is empty. Errors: exit 2 for a name that is not a flow of the
/// config (printed with the flows it has).
fn only(flows: Vec<Flow>, chosen: &[String]) -> Result<Vec<Flow>, ExitCode> {
    if let Some(unknown) = chosen.iter().find(|c| !flows.iter().any(|f| &f.name == *c)) {
        return Err(unknown_flow(unknown, &flows));
    }
    Ok(flows.into_iter().filter(|f| chosen.is_empty() || chosen.contains(&f.name)).collect())
}

fn unknown_flow(flow: &str, flows: &[Flow]) -> ExitCode {
    let names: Vec<String> = flows.iter().map(|f| format!("'{}'", f.name)).collect();
    print_err!(
        "strait: --flow {flow:?} is not a flow of the config (expected SOURCE->TARGET, quoted in a shell); its flows: {}",
        names.join(", ")
    );
    ExitCode::from(2)
}

async fn run(flows: Vec<Flow>, metrics_addr: Option<std::net::SocketAddr>) -> ExitCode {
    let cancel = CancellationToken::new();
    if let Some(addr) = metrics_addr {
        if let Err(e) = strait::http::serve(addr, cancel.child_token()).await {
            tracing::error!(%addr, error = %e, "cannot serve metrics");
            return ExitCode::FAILURE;
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for flow in flows {
        let flow = Arc::new(flow);
        let cancel = cancel.child_token();
        tasks.spawn(async move { (flow.name.clone(), strait::flow::run_flow(flow, cancel).await) });
    }
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested: draining every flow (a second signal exits at once)");
        cancel.cancel();
        // A drain stuck on an unreachable cluster must not hold the process: positions are saved
        // only after durability (or in the same transaction), so exiting now loses nothing (the batch is replayed at start).
        tokio::select! {
            _ = wait_for_signal() => tracing::error!("second signal: exiting without finishing the drain"),
            _ = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::error!("drain not finished after {DRAIN_TIMEOUT:?}: exiting; unsaved batches will be replayed at the next start"),
        }
        std::process::exit(1);
    });
    let mut code = None;
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((_, Ok(()))) => {}
            Ok((name, Err(e))) => {
                tracing::error!(flow = %name, kind = ?e.kind(), error = %e, "flow stopped on an error");
                code.get_or_insert(exit_code(e.kind()));
            }
            Err(e) => {
                tracing::error!(error = %e, "flow task panicked");
                code.get_or_insert(1);
            }
        }
    }
    code.map_or(ExitCode::SUCCESS, ExitCode::from)
}

/// `strait run`'s exit code for a flow stopped by an error of `kind` (documented on
/// [`Command::Run`]): what an operator, or a supervisor deciding whether to restart, must do.
fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Denied => 3,
        ErrorKind::Invalid | ErrorKind::Conflict => 4,
        ErrorKind::DataLoss => 5,
        ErrorKind::Fenced => 6,
        _ => 1,
    }
}

/// `eprintln!` that ignores a closed stderr (`strait ... 2>&1 | head`) instead of panicking.
macro_rules! print_err {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
use print_err;

/// Writes to stdout, ignoring a closed pipe (`strait ... | head`), which `println!` would panic on.
fn print_out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// Longest final drain after SIGINT/SIGTERM.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
