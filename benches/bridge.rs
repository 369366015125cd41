//! The end-to-end benchmark of TESTING.md (Benchmark), B1–B14 (B10: issue #14; B12: issue 29;
//! B13, exec over MCP Streamable HTTP: issue 31; B14, cut results in memory: issue #38).
//!
//! `cargo bench --bench bridge` spawns the release binary as `studio-bridge mcp --port P`,
//! connects in-process fake plugins (tests/support/fake_plugin.rs) that answer at once,
//! drives the binary with rmcp's client over its stdio, and prints one table, also
//! written as JSON to `<target dir>/bench/bridge.json` (the target dir the binary was
//! built in: `$CARGO_TARGET_DIR`, else `./target`).
//!
//! Every figure is the median over several runs, with the spread (lowest–highest run)
//! beside it. Options after `--`: `--quick` for a short run; ids (`B1 B3`) to run only
//! those. For profiling, `STUDIO_BRIDGE_BENCH_BIN` runs another build of the binary
//! (one with symbols) and `STUDIO_BRIDGE_BENCH_WRAP` prefixes the first server of each
//! benchmark with a command (`perf record -g -o /tmp/b.data --`), or only the server
//! named by `STUDIO_BRIDGE_BENCH_WRAP_ONLY` (`b3-whole`; names as in `bench/logs/`).
//!
//! The fake plugins speak the real plugin's framing (base64 text frames, as Studio's
//! `WebStreamClient` sends them). Each runs on a thread and runtime of its own, as each
//! Studio is a process of its own, and the client runs on this process's one
//! (current-thread) runtime, as an agent's client runs on one event loop: a 2-worker
//! runtime shared by all of them added its own hand-offs between threads to every
//! figure. All of them share the machine's two cores with the server.

#[path = "../tests/support/fake_plugin.rs"]
#[allow(dead_code)]
mod fake_plugin;

// One module a benchmark row (B6 and B7 share theirs): the harness below runs them.
#[path = "bridge/b1.rs"]
mod b1;
#[path = "bridge/b10.rs"]
mod b10;
#[path = "bridge/b11.rs"]
mod b11;
#[path = "bridge/b12.rs"]
mod b12;
#[path = "bridge/b13.rs"]
mod b13;
#[path = "bridge/b14.rs"]
mod b14;
#[path = "bridge/b2.rs"]
mod b2;
#[path = "bridge/b3.rs"]
mod b3;
#[path = "bridge/b4.rs"]
mod b4;
#[path = "bridge/b5.rs"]
mod b5;
#[path = "bridge/b6_b7.rs"]
mod b6_b7;
#[path = "bridge/b8.rs"]
mod b8;
#[path = "bridge/b9.rs"]
mod b9;

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use fake_plugin::{FakePlugin, Handler, Identity, Options, Reply, handler, value_map};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, ServiceExt};
use rmpv::Value;
use serde_json::{Map, Value as Json, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, Command};

const BUILT_BIN: &str = env!("CARGO_BIN_EXE_studio-bridge");

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Vec<String> = args
        .iter()
        .filter(|a| {
            (2..=3).contains(&a.len()) && a.starts_with(['B', 'b']) && a[1..].chars().all(|c| c.is_ascii_digit())
        })
        .map(|a| a.to_uppercase())
        .collect();
    let wants = |id: &str| only.is_empty() || only.iter().any(|o| o == id);
    let plan = Plan::new(quick);
    let out_dir = target_dir().join("bench");
    std::fs::create_dir_all(out_dir.join("logs"))?;

    let mut report = Report::default();
    eprintln!(
        "studio-bridge bench ({}): {}",
        if quick { "quick" } else { "full" },
        binary().display()
    );
    if wants("B1") {
        b1::b1(&plan, &mut report).await?;
    }
    if wants("B2") {
        b2::b2(&plan, &mut report).await?;
    }
    if wants("B3") {
        b3::b3(&plan, &mut report).await?;
    }
    if wants("B4") {
        b4::b4(&plan, &mut report).await?;
    }
    if wants("B5") {
        b5::b5(&plan, &mut report).await?;
    }
    if wants("B6") || wants("B7") {
        b6_b7::peers(&plan, &mut report, wants("B6"), wants("B7")).await?;
    }
    if wants("B10") {
        b10::b10(&plan, &mut report).await?;
    }
    if wants("B11") {
        b11::b11(&plan, &mut report).await?;
    }
    if wants("B8") {
        b8::b8(&plan, &mut report).await;
    }
    if wants("B9") {
        b9::b9(&mut report);
    }
    if wants("B12") {
        b12::b12(&plan, &mut report)?;
    }
    if wants("B13") {
        b13::b13(&plan, &mut report).await?;
    }
    if wants("B14") {
        b14::b14(&plan, &mut report).await?;
    }
    report.print(quick);
    let path = out_dir.join("bridge.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report.to_json(quick))?)?;
    println!("\nJSON: {}", path.display());
    Ok(())
}

/// How much to measure: every figure is a median over `runs`.
struct Plan {
    runs: usize,
    b1_calls: usize,
    b2_calls: usize,
    b5_spawns: usize,
    b7_runs: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                runs: 3,
                b1_calls: 500,
                b2_calls: 8_000,
                b5_spawns: 5,
                b7_runs: 2,
            }
        } else {
            Plan {
                runs: 9,
                b1_calls: 3_000,
                b2_calls: 40_000,
                b5_spawns: 15,
                b7_runs: 5,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Calls the rows share.

/// Runs `plan.runs` runs of `plan.b1_calls` sequential exec calls (after a warm-up);
/// returns each run's p50, p99 and max in µs.
async fn sequential_exec(peer: &Peer<RoleClient>, plan: &Plan) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    sequential_exec_on(peer, plan, None).await
}

async fn sequential_exec_on(
    peer: &Peer<RoleClient>,
    plan: &Plan,
    session: Option<&str>,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    sequential_calls(peer, plan, exec_call(session)).await
}

/// `plan.runs` runs of `plan.b1_calls` sequential calls of `call` (after a warm-up); each
/// run's p50, p99 and max in µs.
async fn sequential_calls(
    peer: &Peer<RoleClient>,
    plan: &Plan,
    call: CallToolRequestParams,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    for _ in 0..200 {
        ok(peer.call_tool(call.clone()).await?)?;
    }
    let (mut p50, mut p99, mut max) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..plan.runs {
        let mut times = Vec::with_capacity(plan.b1_calls);
        for _ in 0..plan.b1_calls {
            let started = Instant::now();
            let result = peer.call_tool(call.clone()).await?;
            times.push(started.elapsed());
            ok(result)?;
        }
        let times = micros(times);
        p50.push(percentile(&times, 0.50));
        p99.push(percentile(&times, 0.99));
        max.push(percentile(&times, 1.0));
    }
    Ok((p50, p99, max))
}

// ---------------------------------------------------------------------------------------
// A server process and its client.

fn binary() -> PathBuf {
    std::env::var_os("STUDIO_BRIDGE_BENCH_BIN").map_or_else(|| PathBuf::from(BUILT_BIN), PathBuf::from)
}

/// The target dir the binary was built in (`<target>/release/studio-bridge`).
fn target_dir() -> PathBuf {
    Path::new(BUILT_BIN)
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
}

/// A `studio-bridge mcp` process and rmcp's client on its stdio.
struct Server {
    child: Child,
    client: RunningService<RoleClient, ()>,
    /// When the client last read bytes of the server's stdout.
    stdout: Probe,
}

impl Server {
    /// Spawns `studio-bridge mcp --port <port> --no-install-plugin --allow-unpaired <extra…>` and initializes. Its stderr goes
    /// to `<target>/bench/logs/<name>.log`. `wrap`: this server may be run under
    /// `STUDIO_BRIDGE_BENCH_WRAP` (for profiling).
    async fn spawn(name: &str, port: u16, extra: &[&str], wrap: bool) -> anyhow::Result<Server> {
        let wrap = match std::env::var("STUDIO_BRIDGE_BENCH_WRAP_ONLY") {
            Ok(only) => only == name,
            Err(_) => wrap,
        };
        let wrapper = std::env::var("STUDIO_BRIDGE_BENCH_WRAP").ok().filter(|_| wrap);
        let mut words: Vec<String> = wrapper
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        words.push(binary().display().to_string());
        let mut command = Command::new(&words[0]);
        command.args(&words[1..]);
        // A benchmark never touches a real Studio's plugins folder.
        command
            .arg("mcp")
            .arg("--port")
            .arg(port.to_string())
            .arg("--no-install-plugin")
            // Its plugins are fakes, which carry no pairing secret.
            .arg("--allow-unpaired")
            .args(extra);
        let log = std::fs::File::create(target_dir().join("bench/logs").join(format!("{name}.log")))?;
        command
            .env("STUDIO_BRIDGE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command.spawn().with_context(|| format!("spawn {}", words[0]))?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let probe = Probe::default();
        let reader = ProbedReader {
            inner: stdout,
            probe: probe.clone(),
        };
        // A whole B3 result is far over rmcp's default 16 MiB line limit.
        let transport = AsyncRwTransport::new_client(reader, stdin).with_max_line_length(usize::MAX);
        let initialized = tokio::time::timeout(Duration::from_secs(20), ().serve(transport)).await;
        let client = match initialized {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                let _ = child.kill().await;
                bail!("initialize failed: {error} (stderr in {name}.log)");
            }
            Err(_) => {
                let _ = child.kill().await;
                bail!("initialize timed out (stderr in {name}.log)");
            }
        };
        Ok(Server {
            child,
            client,
            stdout: probe,
        })
    }

    /// VmRSS of the process, in KiB.
    fn rss_kib(&self) -> Option<u64> {
        self.status_kib("VmRSS")
    }

    /// A KiB figure of the process's `/proc/<pid>/status` (`VmRSS`, `VmHWM`: its peak).
    fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()?)).ok()?;
        let line = status
            .lines()
            .find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// From the plugin's last answer leaving it to the last byte the client read.
    fn since_answer(&self, plugin: &FakePlugin) -> anyhow::Result<Duration> {
        let sent = plugin.log().last_answer_sent_at.context("the plugin sent nothing")?;
        let read = self.stdout.last().context("nothing read")?;
        Ok(read.saturating_duration_since(sent))
    }

    /// Closes stdin (the server exits when its client goes away) and reaps it.
    async fn stop(mut self) {
        let _ = self.client.cancel().await;
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// When the last bytes were read from the server's stdout, and how many since a mark.
#[derive(Clone, Default)]
struct Probe(Arc<Mutex<ProbeState>>);

#[derive(Default)]
struct ProbeState {
    last: Option<Instant>,
    bytes: usize,
}

impl Probe {
    fn last(&self) -> Option<Instant> {
        self.0.lock().unwrap().last
    }

    fn mark(&self) {
        self.0.lock().unwrap().bytes = 0;
    }

    fn bytes_since_mark(&self) -> usize {
        self.0.lock().unwrap().bytes
    }
}

struct ProbedReader<R> {
    inner: R,
    probe: Probe,
}

impl<R: AsyncRead + Unpin> AsyncRead for ProbedReader<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            let mut state = this.probe.0.lock().unwrap();
            state.last = Some(Instant::now());
            state.bytes += read;
        }
        polled
    }
}

// ---------------------------------------------------------------------------------------
// Plugins, calls and statistics.

/// A fake Studio that answers at once, on a thread and runtime of its own: a Studio is
/// a process of its own, so its work (base64-encoding 14 MB answers, say) must not share
/// a thread with the client whose latency is measured, nor add that client's thread
/// hand-offs to the figure.
async fn fast_plugin(port: u16, identity: Identity, handler: Handler) -> FakePlugin {
    let options = Options {
        answer_inline: true,
        quiet: true,
    };
    let plugin = {
        let _studio = own_thread("fake-studio").enter();
        FakePlugin::start_with(port, identity, handler, options)
    };
    plugin
        .wait("welcome", Duration::from_secs(15), |log| log.welcomes >= 1)
        .await;
    plugin
}

/// A current-thread runtime on a new thread, which runs what is spawned on it until the
/// benchmark exits: a stand-in for another process (a Studio, a second agent).
fn own_thread(name: &str) -> tokio::runtime::Handle {
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the thread");
            let _ = handle_tx.send(runtime.handle().clone());
            runtime.block_on(std::future::pending::<()>());
        })
        .expect("a thread");
    handle_rx.recv().expect("the thread's runtime")
}

/// Answers `exec` the way the plugin does for `return 2, nil, "ok"` with one print.
fn exec_handler() -> Handler {
    let result = value_map(vec![
        ("success", true.into()),
        ("returns", Value::Array(vec![Value::F64(2.0), Value::Nil, "ok".into()])),
        (
            "logs",
            Value::Array(vec![value_map(vec![
                ("level", "Print".into()),
                ("body", "hello".into()),
            ])]),
        ),
    ]);
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &result).expect("encode");
    let bytes = Arc::new(bytes);
    handler(move |_, _| Reply::Raw(Arc::clone(&bytes)))
}

fn exec_call(session: Option<&str>) -> CallToolRequestParams {
    let mut args = json!({ "script": "print('hello') return 2, nil, 'ok'" });
    if let Some(session) = session {
        args["sessionId"] = json!(session);
    }
    CallToolRequestParams::new("studio_exec").with_arguments(object(args))
}

fn object(value: Json) -> Map<String, Json> {
    match value {
        Json::Object(map) => map,
        _ => Map::new(),
    }
}

/// The text of a successful tool result, or why it failed.
fn ok(result: CallToolResult) -> anyhow::Result<String> {
    if result.is_error == Some(true) {
        bail!("tool error: {:?}", result.structured_content);
    }
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .context("no text block")
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

fn micros(times: Vec<Duration>) -> Vec<f64> {
    let mut us: Vec<f64> = times.into_iter().map(|t| t.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    us
}

/// The `q` quantile of sorted values (nearest rank).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// ---------------------------------------------------------------------------------------
// The report.

#[derive(Debug, Clone, Copy)]
enum Unit {
    Micros,
    Millis,
    MiB,
    PerSec,
    Bytes,
    MBPerSec,
    /// A ratio of two figures measured in the same sitting.
    Times,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Micros => "µs",
            Unit::Millis => "ms",
            Unit::MiB => "MiB",
            Unit::PerSec => "calls/s",
            Unit::Bytes => "bytes",
            Unit::MBPerSec => "MB/s",
            Unit::Times => "×",
        }
    }

    fn format(self, value: f64) -> String {
        match self {
            Unit::Micros | Unit::PerSec | Unit::Bytes => format!("{value:.0}"),
            Unit::Millis if value < 10.0 => format!("{value:.2}"),
            Unit::Millis => format!("{value:.1}"),
            Unit::MiB | Unit::MBPerSec => format!("{value:.1}"),
            Unit::Times => format!("{value:.2}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Target {
    AtMost(f64),
    AtLeast(f64),
    None,
}

struct Row {
    id: &'static str,
    what: String,
    /// One value per run.
    values: Vec<f64>,
    unit: Unit,
    target: Target,
    unavailable: Option<String>,
}

impl Row {
    fn median(&self) -> f64 {
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        }
    }

    fn spread(&self) -> (f64, f64) {
        let min = self.values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    }

    fn met(&self) -> Option<bool> {
        let median = self.median();
        match self.target {
            Target::AtMost(limit) => Some(median <= limit),
            Target::AtLeast(limit) => Some(median >= limit),
            Target::None => None,
        }
    }

    fn target_text(&self) -> String {
        match self.target {
            Target::AtMost(limit) => format!("≤ {} {}", self.unit.format(limit), self.unit.name()),
            Target::AtLeast(limit) => format!("≥ {} {}", self.unit.format(limit), self.unit.name()),
            Target::None => "–".into(),
        }
    }
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    fn row(&mut self, id: &'static str, what: &str, values: Vec<f64>, unit: Unit, target: Target) {
        self.rows.push(Row {
            id,
            what: what.to_owned(),
            values,
            unit,
            target,
            unavailable: None,
        });
    }

    fn unavailable(&mut self, id: &'static str, what: &str, why: &str) {
        self.rows.push(Row {
            id,
            what: what.to_owned(),
            values: Vec::new(),
            unit: Unit::Millis,
            target: Target::None,
            unavailable: Some(why.to_owned()),
        });
    }

    fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    fn median_of(&self, id: &str, what: &str) -> Option<f64> {
        self.rows.iter().find(|r| r.id == id && r.what == what).map(Row::median)
    }

    fn print(&self, quick: bool) {
        let mut rows = self.rows.iter().collect::<Vec<_>>();
        rows.sort_by_key(|r| r.id);
        println!(
            "\nstudio-bridge end-to-end benchmark ({}; median of the runs, spread = lowest–highest run)\n",
            if quick { "--quick" } else { "full" }
        );
        println!("| id | what | median | spread (runs) | target | verdict |");
        println!("|---|---|---|---|---|---|");
        for row in rows {
            if let Some(why) = &row.unavailable {
                println!("| {} | {} | n/a | – | – | {why} |", row.id, row.what);
                continue;
            }
            let (min, max) = row.spread();
            let spread = if row.values.len() > 1 {
                format!(
                    "{}–{} ({})",
                    row.unit.format(min),
                    row.unit.format(max),
                    row.values.len()
                )
            } else {
                "(1)".into()
            };
            let verdict = match row.met() {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "",
            };
            println!(
                "| {} | {} | {} {} | {spread} | {} | {verdict} |",
                row.id,
                row.what,
                row.unit.format(row.median()),
                row.unit.name(),
                row.target_text()
            );
        }
        for note in &self.notes {
            println!("- {note}");
        }
    }

    fn to_json(&self, quick: bool) -> Json {
        let rows: Vec<Json> = self
            .rows
            .iter()
            .map(|row| {
                let (min, max) = row.spread();
                json!({
                    "id": row.id,
                    "what": row.what,
                    "unit": row.unit.name(),
                    "median": if row.unavailable.is_some() { Json::Null } else { json!(row.median()) },
                    "min": if row.values.is_empty() { Json::Null } else { json!(min) },
                    "max": if row.values.is_empty() { Json::Null } else { json!(max) },
                    "runs": row.values,
                    "target": row.target_text(),
                    "met": row.met(),
                    "unavailable": row.unavailable,
                })
            })
            .collect();
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        json!({
            "quick": quick,
            "unixTime": unix,
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "binary": binary().display().to_string(),
            "rows": rows,
            "notes": self.notes,
        })
    }
}
