//! The fuzz targets: one function per decoder an untrusted peer can reach, shared by the
//! long-running fuzz command (`examples/fuzz.rs`) and `cargo test` (`tests/fuzz.rs`, which
//! runs every file of `tests/fuzz-corpus/<target>/` through its target).
//!
//! A target takes arbitrary bytes. It panics (a finding), returns `Err` naming a broken
//! property (a finding), or returns `Ok`. Adding a target is one function here and one
//! line in [`TARGETS`].
//!
//! Every case also runs under [`CountingAlloc`] (installed as the global allocator by the
//! crates that include this file): a case whose single largest allocation exceeds
//! [`allocation_bound`] of its input is a finding, so a header claiming a 4 GiB array in a
//! 10-byte frame cannot go unnoticed.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmpv::Value as Msgpack;
use serde_json::{Map, Value as Json};
use studio_bridge::bridge::{self, Bridge, BridgeOptions, CallHooks, Mode, Target};
use studio_bridge::commands::bound::{Top, bound, bound_raw_quoted};
use studio_bridge::commands::{ALL, InvocationParts, Limits};
use studio_bridge::mcp::transport::tools_call;
use studio_bridge::protocol::ErrorCode;
use studio_bridge::protocol::messages::{Framing, PluginMessage, decode_frame};
use studio_bridge::protocol::peer::{HostOut, HostReply, PeerOut, PeerRequest, encode, encode_result};
use studio_bridge::protocol::raw::RawValue;
use studio_bridge::protocol::value::{from_json, into_json, to_json};

/// What a target says about one input: `Err` names the property it broke.
pub type Check = Result<(), String>;

pub struct FuzzTarget {
    pub name: &'static str,
    pub run: fn(&[u8]) -> Check,
    /// Whether the allocation bound applies (a target that loads the API dump on its first
    /// case allocates megabytes by design, whatever its input).
    pub bounded_allocation: bool,
}

/// Every target, by the name its corpus folder and `--target` use.
pub const TARGETS: &[FuzzTarget] = &[
    FuzzTarget {
        name: "bounded_json",
        run: bounded_json,
        bounded_allocation: false,
    },
    FuzzTarget {
        name: "frame_binary",
        run: frame_binary,
        bounded_allocation: true,
    },
    FuzzTarget {
        name: "frame_text",
        run: frame_text,
        bounded_allocation: true,
    },
    FuzzTarget {
        name: "msgpack_json",
        run: msgpack_json,
        bounded_allocation: true,
    },
    FuzzTarget {
        name: "json_msgpack",
        run: json_msgpack,
        bounded_allocation: true,
    },
    FuzzTarget {
        name: "peer_request",
        run: peer_request,
        bounded_allocation: true,
    },
    FuzzTarget {
        name: "host_reply",
        run: host_reply,
        bounded_allocation: true,
    },
    FuzzTarget {
        name: "tool_args",
        run: tool_args,
        bounded_allocation: false,
    },
    FuzzTarget {
        name: "mcp_request",
        run: mcp_request,
        bounded_allocation: true,
    },
];

pub fn target(name: &str) -> Option<&'static FuzzTarget> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The frame limit the decoding targets enforce (the host's default is 64 MiB; the
/// decoding is the same at any limit).
pub const FRAME_LIMIT: usize = 1 << 20;

/// The largest single allocation a case over `len` input bytes may make: rmpv preallocates
/// at most 64 KiB for a string or binary whatever its header claims, and every decoded or
/// converted structure is a small multiple of the bytes that describe it.
pub fn allocation_bound(len: usize) -> usize {
    64 * 1024 + 256 * len
}

/// Why one case is a finding.
#[derive(Debug)]
pub enum Finding {
    Panic(String),
    Property(String),
    Allocation { largest: usize, bound: usize },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Panic(message) => write!(f, "panicked: {message}"),
            Finding::Property(message) => write!(f, "broke a property: {message}"),
            Finding::Allocation { largest, bound } => {
                write!(
                    f,
                    "allocated {largest} bytes at once; the bound for this input is {bound}"
                )
            }
        }
    }
}

/// Runs one case: catches a panic, and checks the allocation bound.
pub fn run_case(target: &FuzzTarget, input: &[u8]) -> Result<(), Finding> {
    reset_largest_allocation();
    let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    let largest = largest_allocation();
    match outcome {
        Err(payload) => Err(Finding::Panic(panic_text(payload.as_ref()))),
        Ok(Err(message)) => Err(Finding::Property(message)),
        Ok(Ok(())) => {
            let bound = allocation_bound(input.len());
            if target.bounded_allocation && largest > bound {
                Err(Finding::Allocation { largest, bound })
            } else {
                Ok(())
            }
        }
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic payload".into())
}

// ---------------------------------------------------------------------------------------
// The allocator that measures.

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, recording the largest single allocation each thread makes.
pub struct CountingAlloc;

fn note(size: usize) {
    // `try_with`: a thread being torn down has no thread-locals left; it is not measured.
    let _ = LARGEST.try_with(|largest| {
        if size > largest.get() {
            largest.set(size);
        }
    });
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

pub fn reset_largest_allocation() {
    let _ = LARGEST.try_with(|largest| largest.set(0));
}

/// The largest single allocation this thread made since the last reset.
pub fn largest_allocation() -> usize {
    LARGEST.try_with(Cell::get).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// Helpers.

fn encode_value(value: &Msgpack) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut out, value);
    out
}

/// Equality that treats NaN as equal to itself (msgpack values from the wire may hold it).
fn same<T: std::fmt::Debug>(a: &T, b: &T) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

// ---------------------------------------------------------------------------------------
// The targets.

/// A binary plugin frame, as the host's connection reads it: decoded once, then taken
/// apart. A decoded value re-encodes to bytes that decode to the same value, and taking it
/// apart never panics.
pub fn frame_binary(input: &[u8]) -> Check {
    let Ok(value) = decode_frame(input, Framing::Binary, FRAME_LIMIT) else {
        return Ok(());
    };
    let bytes = encode_value(&value);
    let again = decode_frame(&bytes, Framing::Binary, FRAME_LIMIT)
        .map_err(|e| format!("a decoded frame re-encoded does not decode: {e}"))?;
    if encode_value(&again) != bytes {
        return Err("a decoded frame re-encoded decodes to another value".into());
    }
    let _ = PluginMessage::parse_routed(value);
    Ok(())
}

/// A text plugin frame: the input as base64 text (mostly not base64: an error, never a
/// panic), and the input base64-encoded, which must decode exactly as the binary framing.
pub fn frame_text(input: &[u8]) -> Check {
    if let Ok(value) = decode_frame(input, Framing::Base64Text, FRAME_LIMIT) {
        let _ = PluginMessage::parse_routed(value);
    }
    let text = BASE64.encode(input);
    let as_text = decode_frame(text.as_bytes(), Framing::Base64Text, FRAME_LIMIT);
    let as_binary = decode_frame(input, Framing::Binary, FRAME_LIMIT);
    match (as_text, as_binary) {
        (Ok(a), Ok(b)) if encode_value(&a) == encode_value(&b) => {
            let (a, b) = (PluginMessage::parse_routed(a), PluginMessage::parse_routed(b));
            if same(&a, &b) {
                Ok(())
            } else {
                Err("the framings parse to different messages".into())
            }
        }
        (Ok(_), Ok(_)) => Err("the framings decode to different values".into()),
        (Err(_), Err(_)) => Ok(()),
        (a, b) => Err(format!(
            "one framing decodes and the other does not: text {:?}, binary {:?}",
            a.err().map(|e| e.to_string()),
            b.err().map(|e| e.to_string())
        )),
    }
}

/// A plugin result becoming the agent's JSON: valid JSON text that reads back as itself,
/// and the borrowing and consuming conversions agree.
pub fn msgpack_json(input: &[u8]) -> Check {
    let Ok(value) = decode_frame(input, Framing::Binary, FRAME_LIMIT) else {
        return Ok(());
    };
    let borrowed = to_json(&value);
    let json = into_json(value);
    if borrowed != json {
        return Err("to_json and into_json disagree".into());
    }
    let text = serde_json::to_string(&json).map_err(|e| format!("the JSON does not serialize: {e}"))?;
    // OPEN FINDING (not fixed here): a plugin value nested past serde_json's recursion
    // limit (128; the frame decoder accepts about 255, the plugin's encoder 200) reaches
    // the agent as JSON that serde_json-based MCP clients cannot parse. Until the host
    // bounds result nesting, the read-back is checked only within that limit.
    if json_depth(&json) >= SERDE_JSON_DEPTH {
        return Ok(());
    }
    let back: Json = serde_json::from_str(&text).map_err(|e| format!("the JSON text does not parse: {e}"))?;
    if back != json {
        return Err(format!("the JSON text reads back as another value: {text}"));
    }
    Ok(())
}

/// A plugin result as the agent gets it: written straight from the msgpack and bounded
/// (`commands::bound::bound_raw_quoted`), which must give the text the tree path gives,
/// at any bound, and the same text quoted as serde_json quotes it.
pub fn bounded_json(input: &[u8]) -> Check {
    let Ok(raw) = RawValue::from_bytes(bytes::Bytes::copy_from_slice(input)) else {
        return Ok(());
    };
    let Ok(value) = raw.decode() else {
        return Err("a value the skipper accepts does not decode".into());
    };
    let top = Top {
        set: vec![("sessionId", "s-edit".into()), ("context", "edit".into())],
        plugin_hint: "Ask for less.",
    };
    for limit in [usize::MAX, 4096, 600, 64] {
        let (text, quoted) = bound_raw_quoted(&raw, &top, limit, "Read less.");
        if quoted != serde_json::to_vec(&text).unwrap_or_default() {
            return Err(format!(
                "at bound {limit}, the quoted form of {text} is not serde_json's"
            ));
        }
        let mut json = to_json(&value);
        top.apply(&mut json);
        let expected = serde_json::to_string(&bound(json, limit, "Read less.")).unwrap_or_default();
        if text != expected {
            return Err(format!("at bound {limit}, {text} where the tree path gives {expected}"));
        }
    }
    Ok(())
}

/// serde_json's default recursion limit when reading.
const SERDE_JSON_DEPTH: usize = 127;

fn json_depth(value: &Json) -> usize {
    match value {
        Json::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        Json::Object(entries) => 1 + entries.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An agent's JSON arguments becoming the msgpack sent to a plugin (the input as JSON
/// text; other input is skipped). Mapping back gives a fixed point after one step: the
/// conventions (`{type: number|binary}`, whole floats as integers) are applied once.
pub fn json_msgpack(input: &[u8]) -> Check {
    let Ok(json) = serde_json::from_slice::<Json>(input) else {
        return Ok(());
    };
    let wire = from_json(&json);
    let bytes = encode_value(&wire);
    let decoded = decode_frame(&bytes, Framing::Binary, usize::MAX)
        .map_err(|e| format!("the msgpack of parsed JSON does not decode: {e}"))?;
    let once = into_json(decoded);
    let twice = to_json(&from_json(&once));
    if once != twice {
        return Err(format!(
            "JSON → msgpack → JSON is not a fixed point: {once} then {twice}"
        ));
    }
    Ok(())
}

/// A peer's request as the host reads it. A parsed request re-encoded parses the same.
pub fn peer_request(input: &[u8]) -> Check {
    let Ok(request) = PeerRequest::decode(input, FRAME_LIMIT) else {
        return Ok(());
    };
    let bytes = match &request {
        PeerRequest::Call {
            id,
            target,
            action,
            args,
            timeout_ms,
            plugin_timeout_ms,
            default_context,
            operation_id,
            quiet,
        } => encode(&PeerOut::Call {
            id: *id,
            target,
            action,
            args,
            timeout_ms: *timeout_ms,
            plugin_timeout_ms: *plugin_timeout_ms,
            default_context: *default_context,
            operation_id: operation_id.as_deref(),
            quiet: *quiet,
        }),
        PeerRequest::Cancel { id } => encode(&PeerOut::Cancel { id: *id }),
        PeerRequest::Sessions { id } => encode(&PeerOut::Sessions { id: *id }),
        PeerRequest::Subscribe { id, target, events } => encode(&PeerOut::Subscribe {
            id: *id,
            target,
            events,
        }),
        PeerRequest::Unknown(_) => return Ok(()),
    };
    let again = PeerRequest::decode(&bytes, usize::MAX).map_err(|e| format!("a re-encoded request fails: {e}"))?;
    // A peer's arguments come from an agent's JSON, so their strings are UTF-8; a string
    // that is not (only a hostile or broken peer sends one) is re-encoded as binary by
    // rmp_serde, and reaches the plugin as such. Accepted, so compared as binary.
    let mut request = request;
    if let PeerRequest::Call { args, .. } = &mut request {
        *args = invalid_strings_as_binary(std::mem::replace(args, Msgpack::Nil));
    }
    if same(&request, &again) {
        Ok(())
    } else {
        Err(format!("re-encoded {request:?} parses as {again:?}"))
    }
}

fn invalid_strings_as_binary(value: Msgpack) -> Msgpack {
    match value {
        Msgpack::String(s) if s.as_str().is_none() => Msgpack::Binary(s.into_bytes()),
        Msgpack::Array(items) => Msgpack::Array(items.into_iter().map(invalid_strings_as_binary).collect()),
        Msgpack::Map(entries) => Msgpack::Map(
            entries
                .into_iter()
                .map(|(k, v)| (invalid_strings_as_binary(k), invalid_strings_as_binary(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The host's reply as a peer reads it. A parsed reply re-encoded parses the same.
pub fn host_reply(input: &[u8]) -> Check {
    let Ok(reply) = HostReply::decode(input, FRAME_LIMIT) else {
        return Ok(());
    };
    let bytes = match &reply {
        HostReply::Result { id, outcome, ran } => encode_result(
            &HostOut::Result {
                id: *id,
                ok: outcome.is_ok(),
                error: outcome.as_ref().err(),
                session_id: ran.as_ref().map(|r| r.session_id.as_str()),
                context: ran.as_ref().map(|r| r.context),
            },
            outcome.as_ref().ok(),
        ),
        HostReply::Progress {
            id,
            progress,
            total,
            message,
        } => encode(&HostOut::Progress {
            id: *id,
            progress: *progress,
            total: *total,
            message: message.as_deref(),
        }),
        HostReply::Event {
            id,
            session_id,
            event,
            data,
        } => {
            // The host sends event data as JSON: compare what the peer's caller sees.
            let data = to_json(data);
            let bytes = encode(&HostOut::Event {
                id: *id,
                session_id,
                event,
                data: &data,
            });
            let again = HostReply::decode(&bytes, usize::MAX).map_err(|e| format!("a re-encoded event fails: {e}"))?;
            return match again {
                HostReply::Event { data: back, .. } if to_json(&back) == data => Ok(()),
                other => Err(format!("re-encoded {reply:?} parses as {other:?}")),
            };
        }
        HostReply::Unknown(_) => return Ok(()),
    };
    let again = HostReply::decode(&bytes, usize::MAX).map_err(|e| format!("a re-encoded reply fails: {e}"))?;
    if same(&reply, &again) {
        Ok(())
    } else {
        Err(format!("re-encoded {reply:?} parses as {again:?}"))
    }
}

// ---------------------------------------------------------------------------------------
// Tool arguments: the host-side validation of instance paths.

/// A bridge that hosts no Studio, past its startup grace, so that a call that passes
/// validation fails at once with `no_sessions`.
struct Hostless {
    runtime: tokio::runtime::Runtime,
    bridge: Bridge,
}

fn hostless() -> &'static Hostless {
    static HOSTLESS: OnceLock<Hostless> = OnceLock::new();
    HOSTLESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let running = runtime
            .block_on(bridge::start(BridgeOptions {
                port: 0,
                max_message_bytes: FRAME_LIMIT,
                mode: Mode::HostOnly,
                pairing: bridge::pairing::Pairing::allow_unpaired(),
            }))
            .expect("a bridge host on an ephemeral port");
        // Past the startup grace, an absent Studio is an immediate `no_sessions`.
        std::thread::sleep(bridge::registry::STARTUP_GRACE + std::time::Duration::from_millis(100));
        Hostless {
            runtime,
            bridge: running.bridge.clone(),
        }
    })
}

/// The argument keys that hold instance paths, at the top level or in `items[]`.
const PATH_KEYS: [&str; 3] = ["path", "parent", "root"];
const PATH_LIST_KEYS: [&str; 2] = ["paths", "set"];

fn blank(value: &Json) -> bool {
    value.as_str().is_some_and(|s| s.trim().is_empty())
}

/// Whether `args` holds an empty or blank instance path where `properties` (the command's
/// input schema) takes one.
fn has_blank_path(args: &Map<String, Json>, properties: &Map<String, Json>) -> bool {
    let takes = |key: &str| properties.contains_key(key);
    PATH_KEYS.iter().any(|k| takes(k) && args.get(*k).is_some_and(blank))
        || PATH_LIST_KEYS.iter().any(|k| {
            takes(k)
                && args
                    .get(*k)
                    .and_then(Json::as_array)
                    .is_some_and(|l| l.iter().any(blank))
        })
        || (takes("items")
            && args.get("items").and_then(Json::as_array).is_some_and(|items| {
                items
                    .iter()
                    .filter_map(Json::as_object)
                    .any(|item| ["path", "parent"].iter().any(|k| item.get(*k).is_some_and(blank)))
            }))
}

/// Arguments for one command as an agent sends them: the first byte picks the command,
/// the rest is the JSON object of its arguments (other input is skipped). Properties: no
/// panic; with no Studio connected nothing that needs a session succeeds; and a blank
/// instance path is refused as `invalid_args` on the host, before anything is sent.
pub fn tool_args(input: &[u8]) -> Check {
    let Some((&pick, rest)) = input.split_first() else {
        return Ok(());
    };
    let Ok(Json::Object(args)) = serde_json::from_slice::<Json>(rest) else {
        return Ok(());
    };
    let command = ALL[usize::from(pick) % ALL.len()];
    let schema = command.input_schema();
    let properties = schema
        .get("properties")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    let blank_path = has_blank_path(&args, &properties);
    let hostless = hostless();
    let parts = InvocationParts {
        bridge: hostless.bridge.clone(),
        hooks: CallHooks::default(),
        defaults: Arc::new(Mutex::new(Target::default())),
        target: Target::default(),
        policy: None,
        files: None,
        quiet: false,
    };
    let outcome = hostless
        .runtime
        .block_on(command.invoke(args, parts, Limits::default()));
    let name = command.spec().name;
    match outcome {
        Err(error) if blank_path && error.code != ErrorCode::InvalidArgs => Err(format!(
            "{name}: a blank path was answered {:?} ({}), not invalid_args",
            error.code, error.message
        )),
        Ok(_) if blank_path => Err(format!("{name}: a blank path was accepted")),
        Ok(_) if command.spec().needs_session => Err(format!("{name} succeeded with no Studio connected")),
        _ => Ok(()),
    }
}

/// A line from an MCP client. Property: a line the server reads directly as a
/// `tools/call` (`mcp::transport::tools_call`) is one rmcp reads too, into the same
/// message: the same JSON, and the same `_meta` given to the handler.
pub fn mcp_request(input: &[u8]) -> Check {
    use rmcp::RoleServer;
    use rmcp::model::{ClientRequest, JsonRpcMessage, RequestMetaObject};
    use rmcp::service::RxJsonRpcMessage;
    let Some(direct) = tools_call(input) else {
        return Ok(());
    };
    let Ok(by_rmcp) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(input) else {
        return Err("read directly as a tools/call, but rmcp refuses it".into());
    };
    let seen = |message: &RxJsonRpcMessage<RoleServer>| {
        let meta = match message {
            JsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::CallToolRequest(call) => Some((
                    call.params.meta.clone(),
                    call.extensions.get::<RequestMetaObject>().map(|m| m.0.0.clone()),
                )),
                _ => None,
            },
            _ => None,
        };
        (serde_json::to_value(message).ok(), meta)
    };
    let (direct, by_rmcp) = (seen(&direct), seen(&by_rmcp));
    if direct == by_rmcp {
        Ok(())
    } else {
        Err(format!("read directly as {direct:?}, by rmcp as {by_rmcp:?}"))
    }
}
