//! Property tests of every decoder an untrusted peer reaches (issue #16, Fuzzing): the
//! plugin frame decoder in both framings, msgpack → JSON, JSON → msgpack, the peer protocol
//! both ways and the host-side checks of tool arguments (instance paths are parsed only in
//! the plugin; the host refuses blank ones). Generated valid messages decode to what was
//! encoded; arbitrary bytes are an error, never a panic; nesting past the limit is an error,
//! not a stack overflow; no case allocates more at once than its bytes justify. Then every
//! file of the regression corpus (`tests/fuzz-corpus/<target>/`) runs through its target.
//!
//! 256 cases per property by default; `PROPTEST_CASES` overrides. The long run is
//! `cargo run --release --example fuzz -- --minutes 10` (docs/protocol.md, Fuzzing).

#[path = "support/fuzz_targets.rs"]
mod fuzz_targets;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fuzz_targets::{CountingAlloc, FRAME_LIMIT, TARGETS, largest_allocation, reset_largest_allocation, run_case};
use proptest::prelude::*;
use rmpv::Value as Msgpack;
use serde_json::Value as Json;
use studio_bridge::protocol::messages::{
    Framing, Hello, MAX_DEPTH, PluginFailure, PluginMessage, Routed, decode_frame,
};
use studio_bridge::protocol::peer::{HostOut, HostReply, PeerOut, PeerRequest, encode, encode_result};
use studio_bridge::protocol::raw::RawValue;
use studio_bridge::protocol::value::{from_json, into_json};
use studio_bridge::protocol::{Context, ErrorCode, Ran, Target, ToolError};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn fuzz_target(name: &str) -> &'static fuzz_targets::FuzzTarget {
    fuzz_targets::target(name).unwrap_or_else(|| panic!("no fuzz target {name}"))
}

fn bytes_of(value: &Msgpack) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value).unwrap();
    out
}

fn map(entries: Vec<(&str, Msgpack)>) -> Msgpack {
    Msgpack::Map(entries.into_iter().map(|(k, v)| (Msgpack::from(k), v)).collect())
}

// ---------------------------------------------------------------------------------------
// Strategies.

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(proptest::char::range('a', 'z'), 0..8).prop_map(String::from_iter),
        any::<String>(),
    ]
}

fn context() -> impl Strategy<Value = Context> {
    prop_oneof![Just(Context::Edit), Just(Context::Server), Just(Context::Client)]
}

/// Any msgpack value, nested a few levels.
fn msgpack() -> impl Strategy<Value = Msgpack> {
    let leaf = prop_oneof![
        Just(Msgpack::Nil),
        any::<bool>().prop_map(Msgpack::Boolean),
        any::<i64>().prop_map(Msgpack::from),
        any::<u64>().prop_map(Msgpack::from),
        any::<f64>().prop_map(Msgpack::F64),
        any::<f32>().prop_map(Msgpack::F32),
        text().prop_map(Msgpack::from),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(Msgpack::Binary),
        (any::<i8>(), proptest::collection::vec(any::<u8>(), 0..8)).prop_map(|(k, d)| Msgpack::Ext(k, d)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Msgpack::Array),
            proptest::collection::vec((inner.clone(), inner), 0..6).prop_map(Msgpack::Map),
        ]
    })
}

/// JSON an agent could send, without the shapes the value mapping converts (whole floats,
/// `{type, value}` objects): these round-trip through msgpack exactly.
fn lossless_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        any::<f64>()
            .prop_filter("non-whole and finite", |f| f.is_finite() && f.fract() != 0.0)
            .prop_map(Json::from),
        any::<String>().prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            proptest::collection::btree_map(text().prop_filter("not type", |k| k != "type"), inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Any JSON, including the converted shapes.
fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        lossless_json(),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)),
        prop_oneof![Just("inf"), Just("-inf"), Just("nan"), Just("AAEC/w=="), Just("x")]
            .prop_flat_map(|v| prop_oneof![Just("number"), Just("binary")].prop_map(move |k| (k, v)))
            .prop_map(|(k, v)| serde_json::json!({"type": k, "value": v})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        proptest::collection::vec(inner, 0..4).prop_map(Json::Array)
    })
}

fn target_strategy() -> impl Strategy<Value = Target> {
    (
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(context()),
    )
        .prop_map(|(session_id, instance_id, context)| Target {
            session_id,
            instance_id,
            context,
        })
}

/// A plugin message as the plugin encodes it, and what the host must parse it as.
fn plugin_message() -> impl Strategy<Value = (Msgpack, Routed)> {
    let session = proptest::option::of(text());
    let hello = (
        text(),
        text(),
        text(),
        context(),
        text(),
        any::<i32>(),
        proptest::collection::vec(text(), 0..4),
        any::<bool>(),
    )
        .prop_filter("a hello names its session", |h| !h.1.is_empty())
        .prop_map(
            |(version, session_id, instance_id, context, state, place_id, actions, paused)| {
                let wire = map(vec![
                    ("t", "hello".into()),
                    ("protocol", 1.into()),
                    ("pluginVersion", version.as_str().into()),
                    ("sessionId", session_id.as_str().into()),
                    ("instanceId", instance_id.as_str().into()),
                    ("context", context.as_str().into()),
                    ("placeName", "Place".into()),
                    // A Luau encoder sends numbers as doubles.
                    ("placeId", Msgpack::F64(f64::from(place_id))),
                    ("state", state.as_str().into()),
                    (
                        "actions",
                        Msgpack::Array(actions.iter().map(|a| a.as_str().into()).collect()),
                    ),
                    // A nonce (base64 of 16 bytes) is decoded; a `pairing` (the secret,
                    // sent by plugins before mutual pairing) is never read.
                    ("nonce", "AAECAwQFBgcICQoLDA0ODw==".into()),
                    ("pairing", "secret".into()),
                    ("paused", paused.into()),
                ]);
                let hello = Hello {
                    protocol: 1,
                    plugin_version: version,
                    session_id,
                    instance_id,
                    context,
                    place_name: "Place".into(),
                    place_id: i64::from(place_id),
                    game_id: 0,
                    state,
                    actions,
                    nonce: Some((0..16).collect()),
                    player: None,
                    studio_version: None,
                    missing: Vec::new(),
                    paused,
                };
                (wire, PluginMessage::Hello(hello))
            },
        );
    let response =
        (any::<u32>(), msgpack(), proptest::option::of((text(), text()))).prop_map(|(id, result, error)| match error {
            None => (
                map(vec![
                    ("t", "response".into()),
                    ("id", Msgpack::F64(f64::from(id))),
                    ("ok", true.into()),
                    ("result", result.clone()),
                ]),
                PluginMessage::Response {
                    id: u64::from(id),
                    outcome: Ok(RawValue::encode(&result)),
                },
            ),
            Some((code, message)) => (
                map(vec![
                    ("t", "response".into()),
                    ("id", id.into()),
                    ("ok", false.into()),
                    (
                        "error",
                        map(vec![
                            ("code", code.as_str().into()),
                            ("message", message.as_str().into()),
                            ("details", result.clone()),
                        ]),
                    ),
                ]),
                PluginMessage::Response {
                    id: u64::from(id),
                    outcome: Err(PluginFailure {
                        code,
                        message,
                        details: Some(result),
                    }),
                },
            ),
        });
    let progress = (
        any::<u32>(),
        any::<f64>(),
        proptest::option::of(any::<f64>()),
        proptest::option::of(text()),
    )
        .prop_map(|(id, progress, total, message)| {
            let mut entries = vec![
                ("t", "progress".into()),
                ("id", id.into()),
                ("progress", Msgpack::F64(progress)),
            ];
            if let Some(total) = total {
                entries.push(("total", Msgpack::F64(total)));
            }
            if let Some(message) = &message {
                entries.push(("message", message.as_str().into()));
            }
            let parsed = PluginMessage::Progress {
                id: u64::from(id),
                progress,
                total,
                message,
            };
            (map(entries), parsed)
        });
    let event = (text(), msgpack()).prop_map(|(event, data)| {
        (
            map(vec![
                ("t", "event".into()),
                ("event", event.as_str().into()),
                ("data", data.clone()),
            ]),
            PluginMessage::Event { event, data },
        )
    });
    let pong = any::<u64>().prop_map(|n| {
        (
            map(vec![("t", "pong".into()), ("n", n.into())]),
            PluginMessage::Pong { n },
        )
    });
    let unknown = text()
        .prop_filter("not a known kind", |t| {
            !["hello", "response", "progress", "event", "pong", "bye"].contains(&t.as_str())
        })
        .prop_map(|t| (map(vec![("t", t.as_str().into())]), PluginMessage::Unknown(t)));
    let bye = text().prop_map(|s| {
        let wire = map(vec![("t", "bye".into()), ("session", s.as_str().into())]);
        (
            wire,
            Routed {
                session: Some(s),
                message: PluginMessage::Bye,
            },
        )
    });
    let routable = (prop_oneof![hello, response, progress, event, pong, unknown], session).prop_map(
        |((wire, message), session)| {
            let Msgpack::Map(mut entries) = wire else {
                unreachable!()
            };
            // A hello's own sessionId names its session; other messages may name a carried one.
            let session = session.filter(|_| !matches!(message, PluginMessage::Hello(_)));
            if let Some(s) = &session {
                entries.push(("session".into(), s.as_str().into()));
            }
            (Msgpack::Map(entries), Routed { session, message })
        },
    );
    prop_oneof![routable, bye]
}

fn tool_error() -> impl Strategy<Value = ToolError> {
    (
        prop_oneof![
            Just(ErrorCode::NoSessions),
            Just(ErrorCode::InvalidArgs),
            Just(ErrorCode::Timeout),
            Just(ErrorCode::PluginError)
        ],
        text(),
        proptest::option::of(lossless_json()),
    )
        .prop_map(|(code, message, details)| {
            let error = ToolError::new(code, message);
            match details {
                Some(details) if !details.is_null() => error.with_details(details),
                _ => error,
            }
        })
}

fn same<T: std::fmt::Debug>(a: &T, b: &T) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

// ---------------------------------------------------------------------------------------
// Properties.

proptest! {
    /// Any msgpack value, framed either way, decodes to itself.
    #[test]
    fn encoded_values_decode_to_themselves(value in msgpack()) {
        let bytes = bytes_of(&value);
        let binary = decode_frame(&bytes, Framing::Binary, FRAME_LIMIT).unwrap();
        prop_assert_eq!(bytes_of(&binary), bytes.clone());
        let text = BASE64.encode(&bytes);
        let from_text = decode_frame(text.as_bytes(), Framing::Base64Text, FRAME_LIMIT).unwrap();
        prop_assert_eq!(bytes_of(&from_text), bytes);
    }

    /// Every kind of plugin message, framed either way, parses to what was sent.
    #[test]
    fn plugin_messages_parse_to_what_was_sent((wire, expected) in plugin_message()) {
        let bytes = bytes_of(&wire);
        for (payload, framing) in [(bytes.clone(), Framing::Binary), (BASE64.encode(&bytes).into_bytes(), Framing::Base64Text)] {
            let routed = decode_frame(&payload, framing, FRAME_LIMIT).and_then(PluginMessage::parse_routed).unwrap();
            prop_assert!(same(&routed, &expected), "{:?} parsed as {:?}", expected, routed);
        }
    }

    /// Arbitrary bytes in either framing: an error or a message, never a panic, and within
    /// the allocation bound.
    #[test]
    fn arbitrary_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for name in ["frame_binary", "frame_text", "msgpack_json", "bounded_json", "peer_request", "host_reply"] {
            if let Err(finding) = run_case(fuzz_target(name), &bytes) {
                prop_assert!(false, "{}: {} on {:02x?}", name, finding, bytes);
            }
        }
    }

    /// Valid messages with a few bytes corrupted: still never a panic.
    #[test]
    fn corrupted_messages_never_panic((wire, _) in plugin_message(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut bytes = bytes_of(&wire);
        for (at, byte) in flips {
            let len = bytes.len();
            bytes[at % len] = byte;
        }
        for name in ["frame_binary", "frame_text", "msgpack_json", "bounded_json", "peer_request", "host_reply"] {
            if let Err(finding) = run_case(fuzz_target(name), &bytes) {
                prop_assert!(false, "{}: {} on {:02x?}", name, finding, bytes);
            }
        }
    }

    /// Any plugin value, written straight to bounded JSON text, is what the tree path
    /// writes, at every bound.
    #[test]
    fn plugin_values_are_bounded_as_the_tree_path_bounds_them(value in msgpack()) {
        if let Err(finding) = run_case(fuzz_target("bounded_json"), &bytes_of(&value)) {
            prop_assert!(false, "{}", finding);
        }
    }

    /// Any plugin value becomes JSON text that reads back as the same JSON.
    #[test]
    fn plugin_values_become_valid_json(value in msgpack()) {
        if let Err(finding) = run_case(fuzz_target("msgpack_json"), &bytes_of(&value)) {
            prop_assert!(false, "{}", finding);
        }
    }

    /// An agent's JSON without converted shapes crosses to msgpack and back unchanged.
    #[test]
    fn agent_json_round_trips_where_lossless(json in lossless_json()) {
        let wire = from_json(&json);
        let decoded = decode_frame(&bytes_of(&wire), Framing::Binary, usize::MAX).unwrap();
        prop_assert_eq!(into_json(decoded), json);
    }

    /// Any agent JSON (whole floats, `{type: number|binary}`) maps to a fixed point.
    #[test]
    fn agent_json_conventions_apply_once(json in any_json()) {
        let text = serde_json::to_vec(&json).unwrap();
        if let Err(finding) = run_case(fuzz_target("json_msgpack"), &text) {
            prop_assert!(false, "{}", finding);
        }
    }

    /// Every peer request parses on the host as the peer sent it.
    #[test]
    fn peer_requests_parse_as_sent(
        id in any::<u64>(), target in target_strategy(), action in text(), args in msgpack(),
        timeout_ms in any::<u64>(), plugin_timeout_ms in proptest::option::of(any::<u64>()),
        default_context in context(), events in proptest::collection::vec(text(), 0..3), kind in 0..4u8,
        quiet in any::<bool>(),
    ) {
        let (bytes, expected) = match kind {
            0 => (
                encode(&PeerOut::Call { id, target: &target, action: &action, args: &args, timeout_ms, plugin_timeout_ms, default_context, operation_id: None, quiet }),
                PeerRequest::Call {
                    id, target: target.clone(), action: action.clone(),
                    // An absent or nil `args` is an empty map.
                    args: if args.is_nil() { Msgpack::Map(Vec::new()) } else { args.clone() },
                    timeout_ms, plugin_timeout_ms, default_context, operation_id: None, quiet,
                },
            ),
            1 => (encode(&PeerOut::Cancel { id }), PeerRequest::Cancel { id }),
            2 => (encode(&PeerOut::Sessions { id }), PeerRequest::Sessions { id }),
            _ => (
                encode(&PeerOut::Subscribe { id, target: &target, events: &events }),
                PeerRequest::Subscribe { id, target: target.clone(), events: events.clone() },
            ),
        };
        let parsed = PeerRequest::decode(&bytes, FRAME_LIMIT).unwrap();
        prop_assert!(same(&parsed, &expected), "{:?} parsed as {:?}", expected, parsed);
        prop_assert!(run_case(fuzz_target("peer_request"), &bytes).is_ok());
    }

    /// Every host reply parses on the peer as the host sent it.
    #[test]
    fn host_replies_parse_as_sent(
        id in any::<u64>(), outcome in prop_oneof![msgpack().prop_map(Ok), tool_error().prop_map(Err)],
        ran in proptest::option::of((text(), context())), progress in any::<f64>(),
        total in proptest::option::of(any::<f64>()), message in proptest::option::of(text()),
        data in lossless_json(), kind in 0..3u8,
    ) {
        let outcome = outcome.map(|value| RawValue::encode(&value));
        let (bytes, expected) = match kind {
            0 => (
                encode_result(&HostOut::Result {
                    id, ok: outcome.is_ok(), error: outcome.as_ref().err(),
                    session_id: ran.as_ref().map(|r| r.0.as_str()), context: ran.as_ref().map(|r| r.1),
                }, outcome.as_ref().ok()),
                HostReply::Result {
                    id, outcome: outcome.clone(),
                    ran: ran.clone().map(|(session_id, context)| Ran { session_id, context }),
                },
            ),
            1 => (
                encode(&HostOut::Progress { id, progress, total, message: message.as_deref() }),
                HostReply::Progress { id, progress, total, message: message.clone() },
            ),
            _ => (
                encode(&HostOut::Event { id, session_id: "s", event: "log", data: &data }),
                HostReply::Event { id, session_id: "s".into(), event: "log".into(), data: from_json(&data) },
            ),
        };
        let parsed = HostReply::decode(&bytes, FRAME_LIMIT).unwrap();
        prop_assert!(same(&parsed, &expected), "{:?} parsed as {:?}", expected, parsed);
        prop_assert!(run_case(fuzz_target("host_reply"), &bytes).is_ok());
    }
}

/// Instance-path-like strings, blank ones included.
fn path_text() -> impl Strategy<Value = Json> {
    prop_oneof![
        Just(Json::from("")),
        Just(Json::from(" \t\n")),
        Just(Json::from("Workspace.Model.Part")),
        Just(Json::from("game.Workspace.Baseplate")),
        Just(Json::from("Workspace..Part")),
        Just(Json::from(".")),
        any::<String>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        Just(Json::Null),
    ]
}

/// Arguments shaped like the tools' own: path keys, items, lists of paths, stray keys.
fn tool_args() -> impl Strategy<Value = serde_json::Map<String, Json>> {
    let key = prop_oneof![
        Just("path"),
        Just("parent"),
        Just("root"),
        Just("paths"),
        Just("set"),
        Just("items"),
        Just("className"),
        Just("script"),
        Just("sessionId"),
        Just("context"),
        Just("depth"),
        Just("bogus"),
    ];
    let item = proptest::collection::btree_map(
        prop_oneof![Just("path"), Just("parent"), Just("className"), Just("name")],
        prop_oneof![path_text(), Just(Json::from("Part"))],
        0..4,
    )
    .prop_map(|m| Json::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()));
    let value = prop_oneof![
        path_text(),
        proptest::collection::vec(path_text(), 0..3).prop_map(Json::Array),
        proptest::collection::vec(item, 0..3).prop_map(Json::Array),
    ];
    proptest::collection::btree_map(key, value, 0..4)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

proptest! {
    // Each case is a call through a real (Studio-less) bridge: fewer of them.
    #![proptest_config(ProptestConfig::with_cases(ProptestConfig::default().cases.min(128)))]

    /// Every command, any path-shaped arguments: no panic, nothing succeeds without a
    /// Studio, and a blank instance path is `invalid_args` on the host.
    #[test]
    fn tool_arguments_are_checked_on_the_host(pick in any::<u8>(), args in tool_args()) {
        let mut input = vec![pick];
        input.extend(serde_json::to_vec(&Json::Object(args)).unwrap());
        if let Err(finding) = run_case(fuzz_target("tool_args"), &input) {
            prop_assert!(false, "{}", finding);
        }
    }
}

/// A `tools/call` line as clients write it, with keys in any order, optional parts left
/// out or null, ids of either kind, and now and then a key the direct reading must
/// leave to rmcp.
fn mcp_line() -> impl Strategy<Value = String> {
    let id = prop_oneof![
        any::<i64>().prop_map(Json::from),
        text().prop_map(Json::from),
        Just(Json::Null),
        Just(serde_json::json!(1.5))
    ];
    let arguments = prop_oneof![
        Just(None),
        Just(Some(Json::Null)),
        proptest::collection::btree_map(text(), any_json(), 0..4)
            .prop_map(|m| Some(Json::Object(m.into_iter().collect()))),
    ];
    let meta = prop_oneof![
        Just(None),
        Just(Some(Json::Null)),
        any::<i64>().prop_map(|t| Some(serde_json::json!({ "progressToken": t }))),
    ];
    let stray = prop_oneof![
        4 => Just(None),
        1 => Just(Some(("params", "requestState"))),
        1 => Just(Some(("params", "task"))),
        1 => Just(Some(("top", "result"))),
        1 => Just(Some(("top", "extra"))),
    ];
    let method = prop_oneof![4 => Just("tools/call"), 1 => Just("tools/list")];
    (id, method, text(), arguments, meta, stray, any::<bool>()).prop_map(
        |(id, method, name, arguments, meta, stray, reversed)| {
            let mut params = vec![("name".to_owned(), Json::from(name))];
            if let Some(arguments) = arguments {
                params.push(("arguments".into(), arguments));
            }
            if let Some(meta) = meta {
                params.push(("_meta".into(), meta));
            }
            let mut top = vec![
                ("jsonrpc".to_owned(), Json::from("2.0")),
                ("id".into(), id),
                ("method".into(), Json::from(method)),
            ];
            match stray {
                Some(("params", key)) => params.push((key.into(), Json::from("x"))),
                Some((_, key)) => top.push((key.into(), Json::Object(Default::default()))),
                None => {}
            }
            if reversed {
                params.reverse();
                top.reverse();
            }
            top.push(("params".into(), Json::Object(params.into_iter().collect())));
            serde_json::to_string(&Json::Object(top.into_iter().collect())).unwrap()
        },
    )
}

proptest! {
    /// A line the server reads directly as a `tools/call` is read the same by rmcp.
    #[test]
    fn a_tools_call_read_directly_is_what_rmcp_reads(line in mcp_line()) {
        if let Err(finding) = run_case(fuzz_target("mcp_request"), line.as_bytes()) {
            prop_assert!(false, "{}: {}", finding, line);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The limits, explicitly.

/// Without this the allocation bound would be checked against zero and pass vacuously.
#[test]
fn the_counting_allocator_measures() {
    reset_largest_allocation();
    let big = vec![1u8; 3 << 20];
    assert!(largest_allocation() >= 3 << 20, "measured {}", largest_allocation());
    drop(big);
}

/// A header that claims 4 GiB in a frame of a few bytes is an error, and decoding it never
/// allocates more than rmpv's 64 KiB preallocation cap, in either framing.
#[test]
fn a_4_gib_claim_in_a_tiny_frame_allocates_nothing_like_it() {
    let claims: [(&str, Vec<u8>); 5] = [
        ("array32", vec![0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0]),
        ("map32", vec![0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0, 0xc0]),
        ("str32", vec![0xdb, 0xff, 0xff, 0xff, 0xff, b'a', b'b']),
        ("bin32", vec![0xc6, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]),
        ("ext32", vec![0xc9, 0xff, 0xff, 0xff, 0xff, 7, 1]),
    ];
    for (name, frame) in claims {
        assert!(frame.len() <= 10);
        let text = BASE64.encode(&frame);
        for (payload, framing) in [
            (frame.as_slice(), Framing::Binary),
            (text.as_bytes(), Framing::Base64Text),
        ] {
            reset_largest_allocation();
            let decoded = decode_frame(payload, framing, FRAME_LIMIT);
            let largest = largest_allocation();
            assert!(decoded.is_err(), "{name} ({framing:?}) decoded: {decoded:?}");
            assert!(
                largest <= 64 * 1024,
                "{name} ({framing:?}) allocated {largest} bytes at once"
            );
        }
        // The same claim inside a message, through each decoder.
        for name in [
            "frame_binary",
            "frame_text",
            "msgpack_json",
            "peer_request",
            "host_reply",
        ] {
            run_case(fuzz_target(name), &frame).unwrap_or_else(|f| panic!("{name}: {f}"));
        }
    }
}

/// 100,000 nested arrays in a tiny frame are an error in every decoder, on the 2 MiB
/// stack of a tokio worker, unoptimized: never a stack overflow.
#[test]
fn nesting_past_the_limit_is_an_error_in_every_decoder() {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            for opener in [0x91u8, 0x81] {
                // `[[[…]]]` or `{nil: {nil: …}}`: each level one or two bytes.
                let mut deep = Vec::new();
                for _ in 0..100_000 {
                    deep.push(opener);
                    if opener == 0x81 {
                        deep.push(0xc0);
                    }
                }
                deep.push(0xc0);
                let text = BASE64.encode(&deep);
                assert!(decode_frame(&deep, Framing::Binary, FRAME_LIMIT).is_err());
                assert!(decode_frame(text.as_bytes(), Framing::Base64Text, FRAME_LIMIT).is_err());
                assert!(PeerRequest::decode(&deep, FRAME_LIMIT).is_err());
                assert!(HostReply::decode(&deep, FRAME_LIMIT).is_err());
                // Wrapped in a valid result, as a hostile host would send it.
                let mut reply = bytes_of(&map(vec![
                    ("t", "result".into()),
                    ("id", 1.into()),
                    ("ok", true.into()),
                ]));
                reply[0] += 1; // one more entry: `result`, the deep value
                reply.extend(bytes_of(&Msgpack::from("result")));
                reply.extend(&deep);
                assert!(HostReply::decode(&reply, FRAME_LIMIT).is_err());
            }
            // Just within the limit, every decoder (and the JSON mapping) copes.
            let mut deepest = vec![0x91u8; MAX_DEPTH / 2 - 1];
            deepest.push(0xc0);
            for name in [
                "frame_binary",
                "frame_text",
                "msgpack_json",
                "peer_request",
                "host_reply",
            ] {
                run_case(fuzz_target(name), &deepest).unwrap_or_else(|f| panic!("{name}: {f}"));
            }
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
}

// ---------------------------------------------------------------------------------------
// The regression corpus.

fn corpus_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus")
}

/// Every corpus file passes its target, every target has a corpus, and every corpus
/// folder names a target.
#[test]
fn the_regression_corpus_passes() {
    let root = corpus_root();
    for entry in std::fs::read_dir(&root).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            fuzz_targets::target(&name).is_some(),
            "tests/fuzz-corpus/{name} names no target"
        );
    }
    for target in TARGETS {
        let dir = root.join(target.name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "{}: only {} corpus files", target.name, files.len());
        for file in files {
            let input = std::fs::read(&file).unwrap();
            if let Err(finding) = run_case(target, &input) {
                panic!("{}: {finding}", file.display());
            }
        }
    }
}
