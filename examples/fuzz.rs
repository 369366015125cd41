//! The long fuzz run, on stable Rust (issue #16; docs/protocol.md, Fuzzing):
//!
//! ```sh
//! cargo run --release --example fuzz -- --minutes 10 [--target NAME] [--seed N]
//! cargo run --release --example fuzz -- --write-seeds   # regenerate the seed corpus
//! ```
//!
//! For each target of `tests/support/fuzz_targets.rs` (all, or `--target`), for `--minutes`
//! each: random bytes and mutations of the target's corpus (`tests/fuzz-corpus/<target>/`),
//! one `catch_unwind` per case, the allocation bound checked. Prints cases/s per target and
//! every finding, saved to `target/fuzz-findings/<target>/<hash>` (copy it into the corpus
//! once fixed: `cargo test` replays the corpus). Exits 1 if anything was found. A stack
//! overflow aborts the process rather than unwinding; the last input of each target is kept
//! in `target/fuzz-findings/<target>/last` every second so such a crash can be reproduced.

#[path = "../tests/support/fuzz_targets.rs"]
mod fuzz_targets;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fuzz_targets::{CountingAlloc, FuzzTarget, TARGETS, run_case};
use rmpv::Value as Msgpack;
use studio_bridge::protocol::peer::{HostOut, PeerOut, encode, encode_result};
use studio_bridge::protocol::raw::RawValue;
use studio_bridge::protocol::{Context, ErrorCode, Target, ToolError};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Options {
    minutes: f64,
    target: Option<String>,
    seed: u64,
    write_seeds: bool,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        minutes: 1.0,
        target: None,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        write_seeds: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--minutes" => options.minutes = value("--minutes")?.parse().map_err(|e| format!("--minutes: {e}"))?,
            "--target" => options.target = Some(value("--target")?),
            "--seed" => options.seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--write-seeds" => options.write_seeds = true,
            other => return Err(format!("unknown argument {other}; see the top of examples/fuzz.rs")),
        }
    }
    Ok(options)
}

fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if options.write_seeds {
        write_seeds(&root.join("tests/fuzz-corpus"));
        return;
    }
    let targets: Vec<&FuzzTarget> = match &options.target {
        Some(name) => match fuzz_targets::target(name) {
            Some(target) => vec![target],
            None => {
                let names: Vec<_> = TARGETS.iter().map(|t| t.name).collect();
                eprintln!("no target {name}; the targets are {}", names.join(", "));
                std::process::exit(2);
            }
        },
        None => TARGETS.iter().collect(),
    };
    // Panics are caught and reported per case; the default hook would print each one.
    std::panic::set_hook(Box::new(|_| {}));
    let mut found = 0;
    println!("seed {} ({} min per target)", options.seed, options.minutes);
    for target in targets {
        let corpus = load_corpus(&root.join("tests/fuzz-corpus").join(target.name));
        let findings_dir = root.join("target/fuzz-findings").join(target.name);
        let budget = Duration::from_secs_f64(options.minutes * 60.0);
        let report = fuzz(target, &corpus, budget, options.seed, &findings_dir);
        found += report.findings;
        println!(
            "{:<14} {:>10} cases {:>9.0} cases/s  corpus {:>3}  findings {}",
            target.name,
            report.cases,
            report.cases as f64 / report.elapsed.as_secs_f64(),
            corpus.len(),
            report.findings
        );
    }
    if found > 0 {
        std::process::exit(1);
    }
}

fn load_corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|f| std::fs::read(f).ok()).collect()
}

struct Report {
    cases: u64,
    elapsed: Duration,
    findings: u64,
}

fn fuzz(target: &FuzzTarget, corpus: &[Vec<u8>], budget: Duration, seed: u64, findings_dir: &Path) -> Report {
    let mut rng = Rng(seed ^ fnv(target.name.as_bytes()) | 1);
    let start = Instant::now();
    let mut last_saved = start;
    let mut cases = 0u64;
    let mut findings = 0u64;
    let mut seen = std::collections::HashSet::new();
    while start.elapsed() < budget {
        // Time is read once per batch: reading it is not free at a million cases a second.
        for _ in 0..256 {
            let input = next_input(&mut rng, corpus);
            if let Err(finding) = run_case(target, &input) {
                // One report per distinct message (a bug found a thousand ways is one).
                let key = finding.to_string().chars().take(120).collect::<String>();
                if seen.insert(key) {
                    findings += 1;
                    let path = save(findings_dir, &format!("{:016x}", fnv(&input)), &input);
                    println!(
                        "{}: {finding}\n  input ({} bytes) saved to {}",
                        target.name,
                        input.len(),
                        path.display()
                    );
                }
            }
            cases += 1;
        }
        if last_saved.elapsed() >= Duration::from_secs(1) {
            last_saved = Instant::now();
            // What was running, should the next second end in an abort.
            let probe = next_input(&mut rng.clone(), corpus);
            save(findings_dir, "last", &probe);
        }
    }
    let _ = std::fs::remove_file(findings_dir.join("last"));
    Report {
        cases,
        elapsed: start.elapsed(),
        findings,
    }
}

fn save(dir: &Path, name: &str, input: &[u8]) -> PathBuf {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(name);
    if let Err(error) = std::fs::write(&path, input) {
        eprintln!("could not save {}: {error}", path.display());
    }
    path
}

// ---------------------------------------------------------------------------------------
// Inputs.

/// xorshift64*: small, fast, reproducible from `--seed`.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Bytes that mean something to a msgpack or JSON reader: markers, length prefixes at
/// their extremes, brackets and quotes.
const INTERESTING: &[u8] = &[
    0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca,
    0xcb, 0xcc, 0xcf, 0xd0, 0xd3, 0xd4, 0xd8, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff, b'{', b'}', b'[',
    b']', b'"', b':', b',', b'\\', b'.', b'=',
];

fn next_input(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    if corpus.is_empty() || rng.below(8) == 0 {
        let len = rng.below(64);
        return (0..len).map(|_| rng.next() as u8).collect();
    }
    let mut input = corpus[rng.below(corpus.len())].clone();
    for _ in 0..=rng.below(4) {
        mutate(rng, &mut input, corpus);
    }
    input
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let len = input.len();
    match rng.below(9) {
        0 if len > 0 => input[rng.below(len)] ^= 1 << rng.below(8),
        1 if len > 0 => input[rng.below(len)] = INTERESTING[rng.below(INTERESTING.len())],
        2 => input.insert(rng.below(len + 1), rng.next() as u8),
        3 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(8)).min(len);
            input.drain(at..end);
        }
        4 if len > 0 => {
            // Repeat a slice: nests, or lengthens a list.
            let at = rng.below(len);
            let end = (at + 1 + rng.below(16)).min(len);
            let chunk = input[at..end].to_vec();
            for _ in 0..=rng.below(32) {
                input.splice(at..at, chunk.iter().copied());
            }
        }
        5 if len > 0 => input.truncate(rng.below(len)),
        6 if len >= 4 => {
            // A length field at its extreme.
            let at = rng.below(len - 3);
            let value: [u8; 4] = [0xff, 0xff, 0xff, 0xff];
            input[at..at + 4].copy_from_slice(&value[..]);
        }
        7 if !corpus.is_empty() => {
            // Splice in part of another corpus entry.
            let other = &corpus[rng.below(corpus.len())];
            let from = rng.below(other.len() + 1);
            let at = rng.below(len + 1);
            input.truncate(at);
            input.extend_from_slice(&other[from..]);
        }
        _ => input.push(INTERESTING[rng.below(INTERESTING.len())]),
    }
}

// ---------------------------------------------------------------------------------------
// The seed corpus: one valid message of each kind per target (`--write-seeds`).

fn value_bytes(value: &Msgpack) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = rmpv::encode::write_value(&mut out, value);
    out
}

fn map(entries: Vec<(&str, Msgpack)>) -> Msgpack {
    Msgpack::Map(entries.into_iter().map(|(k, v)| (Msgpack::from(k), v)).collect())
}

/// Plugin → host messages as the Luau encoder sends them (numbers as doubles).
fn plugin_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let vector3 = map(vec![
        ("type", "Vector3".into()),
        (
            "value",
            Msgpack::Array(vec![Msgpack::F64(1.0), Msgpack::F64(2.5), Msgpack::F64(-3.0)]),
        ),
    ]);
    let messages = vec![
        (
            "hello",
            map(vec![
                ("t", "hello".into()),
                ("protocol", Msgpack::F64(1.0)),
                ("pluginVersion", "0.1.0".into()),
                ("sessionId", "s-edit".into()),
                ("instanceId", "i-1".into()),
                ("context", "edit".into()),
                ("placeName", "Place1".into()),
                ("placeId", Msgpack::F64(123.0)),
                ("gameId", Msgpack::F64(0.0)),
                ("state", "Edit".into()),
                ("actions", Msgpack::Array(vec!["exec".into(), "query".into()])),
                ("pairing", "0123456789abcdef".into()),
            ]),
        ),
        (
            "response-ok",
            map(vec![
                ("t", "response".into()),
                ("id", Msgpack::F64(7.0)),
                ("ok", true.into()),
                (
                    "result",
                    map(vec![
                        ("path", "game.Workspace.Part".into()),
                        (
                            "properties",
                            map(vec![("Position", vector3), ("Anchored", true.into())]),
                        ),
                        ("children", Msgpack::Array(vec![])),
                    ]),
                ),
            ]),
        ),
        (
            "response-error",
            map(vec![
                ("t", "response".into()),
                ("id", 8.into()),
                ("ok", false.into()),
                (
                    "error",
                    map(vec![
                        ("code", "not_found".into()),
                        ("message", "no instance at Workspace.Nope".into()),
                        ("details", map(vec![("path", "Workspace.Nope".into())])),
                    ]),
                ),
            ]),
        ),
        (
            "progress",
            map(vec![
                ("t", "progress".into()),
                ("id", 9.into()),
                ("progress", Msgpack::F64(0.5)),
                ("total", Msgpack::F64(1.0)),
                ("message", "halfway".into()),
            ]),
        ),
        (
            "event-log",
            map(vec![
                ("t", "event".into()),
                ("event", "log".into()),
                (
                    "data",
                    map(vec![
                        ("seq", 1.into()),
                        ("level", "Output".into()),
                        ("body", "hi".into()),
                    ]),
                ),
            ]),
        ),
        ("pong", map(vec![("t", "pong".into()), ("n", 3.into())])),
        ("bye", map(vec![("t", "bye".into()), ("session", "s-server".into())])),
        (
            "routed-response",
            map(vec![
                ("t", "response".into()),
                ("id", 10.into()),
                ("ok", true.into()),
                ("session", "s-server".into()),
                (
                    "result",
                    map(vec![
                        ("binary", Msgpack::Binary(vec![0, 1, 2, 255])),
                        ("inf", Msgpack::F64(f64::INFINITY)),
                        ("nan", Msgpack::F64(f64::NAN)),
                        ("big", Msgpack::from(u64::MAX)),
                        ("neg", Msgpack::from(i64::MIN)),
                        ("f32", Msgpack::F32(0.25)),
                        ("ext", Msgpack::Ext(5, vec![1, 2])),
                    ]),
                ),
            ]),
        ),
    ];
    messages
        .into_iter()
        .map(|(name, value)| (name, value_bytes(&value)))
        .collect()
}

fn peer_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let target = Target {
        session_id: Some("s-edit".into()),
        instance_id: None,
        context: Some(Context::Server),
    };
    let args = map(vec![("script", "return workspace:GetChildren()".into())]);
    vec![
        (
            "call",
            encode(&PeerOut::Call {
                id: 1,
                target: &target,
                action: "exec",
                args: &args,
                timeout_ms: 35_000,
                plugin_timeout_ms: Some(30_000),
                default_context: Context::Server,
                operation_id: None,
                quiet: false,
            }),
        ),
        ("cancel", encode(&PeerOut::Cancel { id: 1 })),
        ("sessions", encode(&PeerOut::Sessions { id: 2 })),
        (
            "subscribe",
            encode(&PeerOut::Subscribe {
                id: 3,
                target: &Target::default(),
                events: &["log".to_string()],
            }),
        ),
    ]
}

fn host_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let result = map(vec![("returns", Msgpack::Array(vec![1.into(), "two".into()]))]);
    let error = ToolError::new(ErrorCode::AmbiguousInstance, "two Studios are open; pass sessionId")
        .with_details(serde_json::json!({"sessions": [{"sessionId": "a"}, {"sessionId": "b"}]}));
    let data = serde_json::json!({"seq": 4, "level": "Warning", "body": "careful"});
    vec![
        (
            "result-ok",
            encode_result(
                &HostOut::Result {
                    id: 1,
                    ok: true,
                    error: None,
                    session_id: Some("s-edit"),
                    context: Some(Context::Edit),
                },
                Some(&RawValue::encode(&result)),
            ),
        ),
        (
            "result-error",
            encode(&HostOut::Result {
                id: 2,
                ok: false,
                error: Some(&error),
                session_id: None,
                context: None,
            }),
        ),
        (
            "progress",
            encode(&HostOut::Progress {
                id: 3,
                progress: 2.0,
                total: Some(4.0),
                message: Some("two of four"),
            }),
        ),
        (
            "event",
            encode(&HostOut::Event {
                id: 4,
                session_id: "s-edit",
                event: "log",
                data: &data,
            }),
        ),
    ]
}

fn json_seeds() -> Vec<(&'static str, Vec<u8>)> {
    [
        ("create", r#"{"items":[{"className":"Part","parent":"Workspace","properties":{"Size":{"type":"Vector3","value":[4,1,2]},"Anchored":true}}]}"#),
        ("specials", r#"[{"type":"number","value":"inf"},{"type":"number","value":"nan"},{"type":"binary","value":"AAEC/w=="},1.0,-0.0,1e300]"#),
        ("numbers", r#"[0,-1,18446744073709551615,-9223372036854775808,0.5,9007199254740993]"#),
        ("strings", r#"{"":"","é":"\u0000\ud83d\ude00","nested":{"a":[null,true,false]}}"#),
    ]
    .into_iter()
    .map(|(name, text)| (name, text.as_bytes().to_vec()))
    .collect()
}

/// One byte picking the command (its index in the command table), then its arguments.
fn tool_args_seeds() -> Vec<(String, Vec<u8>)> {
    let cases = [
        ("query", r#"{"path":"Workspace.Model.Part","depth":2}"#),
        ("query", r#"{"path":"  "}"#),
        ("find", r#"{"root":"game.Workspace","className":"Part"}"#),
        (
            "script_read",
            r#"{"path":"game.ServerScriptService.Main","startLine":1,"endLine":3}"#,
        ),
        ("script_edit", r#"{"path":"","edits":[]}"#),
        ("delete", r#"{"paths":["Workspace.A",""]}"#),
        ("clone", r#"{"path":"Workspace.Model","parent":"Workspace","count":2}"#),
        ("create", r#"{"items":[{"className":"Part","parent":" "}]}"#),
        (
            "update",
            r#"{"items":[{"path":"Workspace.Part","parent":"","properties":{"Anchored":true}}]}"#,
        ),
        ("selection", r#"{"set":["Workspace.Part","\t"]}"#),
        ("insert_asset", r#"{"assetId":123,"parent":""}"#),
        ("script_search", r#"{"query":"print","root":" "}"#),
        ("exec", r#"{"script":"return 1","sessionId":5}"#),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (command, args))| {
            let index = studio_bridge::commands::ALL
                .iter()
                .position(|c| c.spec().name == command)
                .unwrap_or_else(|| panic!("no command {command}"));
            let mut bytes = vec![u8::try_from(index).unwrap_or(0)];
            bytes.extend_from_slice(args.as_bytes());
            (format!("{i:02}-{command}"), bytes)
        })
        .collect()
}

fn write_seeds(root: &Path) {
    let plugin = plugin_seeds();
    // The text target decodes its input as base64 text and also base64-encodes it itself:
    // seed it with both forms.
    let mut text_framed: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, bytes) in &plugin {
        text_framed.push(((*name).to_owned(), bytes.clone()));
        text_framed.push((format!("b64-{name}"), BASE64.encode(bytes).into_bytes()));
    }
    let write = |target: &str, seeds: Vec<(String, Vec<u8>)>| {
        let dir = root.join(target);
        let _ = std::fs::create_dir_all(&dir);
        for (name, bytes) in seeds {
            let path = dir.join(format!("seed-{name}"));
            std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    };
    let owned = |seeds: Vec<(&str, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
        seeds.into_iter().map(|(n, b)| (n.to_owned(), b)).collect()
    };
    write("frame_binary", owned(plugin.clone()));
    write("frame_text", text_framed);
    write("msgpack_json", owned(plugin));
    write("json_msgpack", owned(json_seeds()));
    write("peer_request", owned(peer_seeds()));
    write("host_reply", owned(host_seeds()));
    write("tool_args", tool_args_seeds());
    println!("wrote the seed corpus under {}", root.display());
}
