//! A call's life, the same on every surface: its target taken out of the arguments, the
//! arguments checked against the command's type (naming the field and the fix), the command
//! run, its result annotated with the project's files and bounded, and what a write that
//! failed after it was sent adds to its error. The command table ([`super::ALL`]) holds
//! each command as an [`Erased`] of it.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

use super::schema::{add_result_properties, add_session_properties, schema_for};
use super::{
    Body, Command, DynCommand, Invocation, InvocationParts, Kind, Limits, Output, Spec, Whole, bound, plugin_value,
};
use crate::bridge::Target;
use crate::human::render::{self as human, Rendered, Style};
use crate::policy::{Capabilities, Capability, Governed};
use crate::protocol::{Context, ErrorCode, ToolError, value};

/// Plugin results larger than this are converted to JSON off the async thread, so that
/// one caller's megabytes do not hold up another caller's small call.
const OFF_THREAD_BYTES: usize = 64 * 1024;

struct Erased<C>(PhantomData<C>);

impl<C: Command> DynCommand for Erased<C> {
    fn spec(&self) -> &'static Spec {
        &C::SPEC
    }

    fn input_schema(&self) -> Map<String, Json> {
        let mut schema = schema_for::<C::Args>();
        if C::SPEC.needs_session {
            add_session_properties(&mut schema);
        }
        schema
    }

    fn output_schema(&self) -> Map<String, Json> {
        let mut schema = schema_for::<C::Result>();
        add_result_properties(&mut schema, C::SPEC.needs_session);
        schema
    }

    fn invoke<'a>(
        &'a self,
        mut args: Map<String, Json>,
        parts: InvocationParts,
        limits: Limits,
    ) -> Pin<Box<dyn Future<Output = Result<Output, ToolError>> + Send + 'a>> {
        Box::pin(async move {
            let mut target = parts.target;
            if C::SPEC.needs_session {
                take_target(&mut args, &mut target)?;
                // The default names an instance; the call's own context still chooses
                // within it (PROTOCOL.md, Sessions).
                let defaults = parts.defaults.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if target.session_id.is_none() && target.instance_id.is_none() {
                    target.session_id = defaults.session_id;
                    target.instance_id = defaults.instance_id;
                    target.context = target.context.or(defaults.context);
                }
            }
            let typed: C::Args = parse_args(C::SPEC.name, args)?;
            // A call that only reads (`selection` without `set`) is no write, whatever
            // the command's kind.
            let reads_only =
                C::capabilities(&typed).union(C::SPEC.capabilities) == Capabilities::of(&[Capability::Read]);
            let kind = if reads_only { Kind::Read } else { C::SPEC.kind };
            let operation_id = (kind != Kind::Read).then(|| uuid::Uuid::new_v4().simple().to_string());
            let cx = Invocation {
                bridge: parts.bridge,
                target,
                hooks: parts.hooks,
                defaults: parts.defaults,
                policy: parts.policy,
                files: parts.files,
                ran: Mutex::new(None),
                operation_id,
                quiet: parts.quiet,
            };
            let mut output = C::run(typed, &cx)
                .await
                .map_err(|error| may_have_written(C::SPEC.name, kind, cx.operation_id.as_deref(), error))?;
            let ran = cx.ran.lock().unwrap_or_else(|p| p.into_inner()).take();
            // Where it ran, and, for a plugin that cut its own result (query's budget),
            // the same hint.
            let top = bound::Top {
                set: ran
                    .map(|ran| {
                        vec![
                            ("sessionId", ran.session_id),
                            ("context", ran.context.as_str().to_owned()),
                        ]
                    })
                    .unwrap_or_default(),
                plugin_hint: C::SPEC.truncation_hint,
            };
            // The agent receives the JSON twice, as text and as structuredContent, and
            // both count against the bound; the text is escaped once more inside the
            // JSON-RPC line (a quote becomes \"), which typically adds a fifth: 2/5 each.
            let limit = limits.max_result_bytes / 5 * 2;
            let hint = C::SPEC.truncation_hint;
            // A plugin's result read to add the files it names is kept as its frame came,
            // should the bound cut it (`Whole::Annotated`).
            let annotated = annotate::<C>(&mut output, &cx, &top, limit).await?;
            output.body = match output.body {
                Body::Json(mut json) => {
                    top.apply(&mut json);
                    let (kept, whole) = bound::bound_keeping_whole(json, limit, hint);
                    output.whole = match (annotated, whole) {
                        (Some(Annotated { whole, cut }), again) if cut || again.is_some() => Some(whole.detached()),
                        (Some(_), _) => None,
                        (None, whole) => whole.map(Whole::Json),
                    };
                    Body::Json(kept)
                }
                // Written with its quoted form for the text block, in one pass; a large
                // result off the async thread. The raw result is kept (not decoded) when
                // it was cut, for its rest.
                Body::Plugin(raw) => {
                    let off_thread = raw.len() > OFF_THREAD_BYTES;
                    let convert = move || {
                        let (text, quoted) = bound::bound_raw_quoted(&raw, &top, limit, hint);
                        // Kept in an allocation of its own (off the async thread when
                        // large): it is held while the store counts its bytes.
                        let whole = bound::was_cut(&text).then(|| raw.detached());
                        (text, quoted, whole)
                    };
                    let (text, quoted, whole) = if off_thread {
                        tokio::task::spawn_blocking(convert)
                            .await
                            .map_err(|e| bad_result(C::SPEC.name, &format!("its result could not be converted: {e}")))?
                    } else {
                        convert()
                    };
                    output.whole = whole.map(Whole::Plugin);
                    Body::Quoted { text, quoted }
                }
                quoted @ Body::Quoted { .. } => quoted,
            };
            Ok(output)
        })
    }

    fn render(&self, args: &Json, result: &Json, out: Style, err: Style) -> Rendered {
        human::finish(C::render(args, result, out, err), result, err)
    }
}

impl<C: Command> Governed for Erased<C> {
    fn tool_name(&self) -> String {
        C::SPEC.tool_name()
    }

    fn capabilities(&self) -> Capabilities {
        C::SPEC.capabilities
    }

    /// Arguments that do not parse need the spec's set: the call then fails with
    /// `invalid_args` before it reaches Studio, parsed the same way.
    fn call_capabilities(&self, args: &Map<String, Json>) -> Capabilities {
        let mut args = args.clone();
        for key in ["sessionId", "instanceId", "context"] {
            args.remove(key);
        }
        match serde_json::from_value::<C::Args>(Json::Object(args)) {
            Ok(typed) => C::capabilities(&typed).union(C::SPEC.capabilities),
            Err(_) => C::SPEC.capabilities,
        }
    }
}

pub(super) const fn erased<C: Command>() -> &'static dyn DynCommand {
    &Erased::<C>(PhantomData)
}

/// A plugin's result that [`annotate`] read: the whole to keep should it be cut, and
/// whether it was cut already.
struct Annotated {
    whole: Whole,
    cut: bool,
}

/// Adds the sourcemap's files and Studio's locations where `C` says its result names
/// scripts ([`Command::FILES`]); a plugin's result is decoded only then (off the async
/// thread when large), and is otherwise handed on as it came. A result over the bound
/// (`limit`) is cut first, as it came, with room left for what the files add, and only
/// what is kept becomes a tree: a 3 MB `logs` never is one. The JSON bound after this cuts
/// again if the files took more than that room.
async fn annotate<C: Command>(
    output: &mut Output,
    cx: &Invocation,
    top: &bound::Top<'static>,
    limit: usize,
) -> Result<Option<Annotated>, ToolError> {
    let notes = C::FILES;
    let large = output_is_large(output);
    match &mut output.body {
        Body::Json(json) if !notes.is_none() => notes.annotate(json, cx.sourcemap().await.as_deref()),
        Body::Plugin(raw) if notes.applies_to(raw) => {
            let raw = raw.clone();
            let map = cx.sourcemap().await;
            let whole = Whole::Annotated {
                raw: raw.clone(),
                files: notes,
                map: map.clone(),
            };
            let top = top.clone();
            let convert = move || -> Result<(Json, bool), ToolError> {
                let (mut json, cut) = if raw.len() > limit {
                    let (text, _) = bound::bound_raw_quoted(&raw, &top, limit / 4 * 3, C::SPEC.truncation_hint);
                    let json = serde_json::from_str(&text)
                        .map_err(|e| bad_result(C::SPEC.name, &format!("its cut result could not be read: {e}")))?;
                    (json, bound::was_cut(&text))
                } else {
                    (value::into_json(plugin_value(C::SPEC.name, &raw)?), false)
                };
                notes.annotate(&mut json, map.as_deref());
                Ok((json, cut))
            };
            let (json, cut) = if large {
                tokio::task::spawn_blocking(convert)
                    .await
                    .map_err(|e| bad_result(C::SPEC.name, &format!("its result could not be converted: {e}")))??
            } else {
                convert()?
            };
            output.body = Body::Json(json);
            return Ok(Some(Annotated { whole, cut }));
        }
        _ => {}
    }
    Ok(None)
}

fn output_is_large(output: &Output) -> bool {
    matches!(&output.body, Body::Plugin(raw) if raw.len() > OFF_THREAD_BYTES)
}

/// Takes `sessionId`, `instanceId` and `context` out of the arguments into the target.
fn take_target(args: &mut Map<String, Json>, target: &mut Target) -> Result<(), ToolError> {
    match args.remove("sessionId") {
        None | Some(Json::Null) => {}
        Some(Json::String(id)) => target.session_id = Some(id),
        Some(_) => {
            return Err(ToolError::invalid_args(
                "`sessionId` must be a string: one of the sessionIds that studio_sessions lists.",
            ));
        }
    }
    match args.remove("instanceId") {
        None | Some(Json::Null) => {}
        Some(Json::String(id)) => target.instance_id = Some(id),
        Some(_) => {
            return Err(ToolError::invalid_args(
                "`instanceId` must be a string: one of the instanceIds that studio_sessions lists.",
            ));
        }
    }
    match args.remove("context") {
        None | Some(Json::Null) => {}
        Some(Json::String(text)) if Context::parse(&text).is_some() => target.context = Context::parse(&text),
        Some(other) => {
            return Err(ToolError::invalid_args(format!(
                "`context` must be \"edit\", \"server\" or \"client\", not {other}. Omit it to use the command's default."
            )));
        }
    }
    Ok(())
}

/// Deserializes arguments, naming the offending field and what it expects.
fn parse_args<T: DeserializeOwned>(command: &str, args: Map<String, Json>) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(Json::Object(args)).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let message = if path == "." || path.is_empty() {
            format!("Invalid arguments for {command}: {inner}. Check the tool's input schema.")
        } else {
            format!("Invalid argument `{path}` for {command}: {inner}. Check the tool's input schema.")
        };
        ToolError::invalid_args(message)
    })
}

/// What a write that failed after it may have reached Studio adds to its error, so that
/// an agent does not simply run it again.
pub const MAY_HAVE_WRITTEN: &str = "may have completed in Studio before this failure: check with a read tool (e.g. studio_query, studio_script_read, studio_logs) before retrying, so that it is not done twice.";

/// `error` for a call of `kind`: a write (Write or Destructive) that timed out, was
/// cancelled, or lost its session or host says it may have completed, unless the error
/// says the call was never delivered (`details.delivered: false`, set where nothing was
/// sent), and names its `operationId` (in `details`) for `state` to ask after. The one
/// place this is added, for the MCP tools, the CLI and the terminal alike (a peer's call
/// gets it from its own invoke, never from the host).
fn may_have_written(command: &str, kind: Kind, operation_id: Option<&str>, mut error: ToolError) -> ToolError {
    let after_sending = matches!(
        error.code,
        ErrorCode::Timeout | ErrorCode::Cancelled | ErrorCode::SessionLost | ErrorCode::HostLost
    );
    let detail = |key: &str| error.details.as_ref().and_then(|d| d.get(key)).cloned();
    let undelivered =
        detail("delivered") == Some(Json::Bool(false)) || detail("wroteNothing") == Some(Json::Bool(true));
    if kind != Kind::Read && after_sending && !undelivered {
        error.message = format!("{} This write (`{command}`) {MAY_HAVE_WRITTEN}", error.message);
        if let Some(id) = operation_id {
            error.message = format!(
                "{} Its outcome, once Studio knows it: `studio_state {{operationId: {id:?}}}` (same session).",
                error.message
            );
            error.set_detail("operationId", Json::String(id.to_owned()));
        }
    }
    error
}

/// The error for a plugin result that does not have the promised shape.
pub fn bad_result(command: &str, detail: &str) -> ToolError {
    ToolError::new(
        ErrorCode::PluginError,
        format!(
            "The Studio plugin answered {command} with an unexpected result ({detail}). Update the plugin with `studio-bridge install-plugin` and restart Studio."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::super::exec;
    use super::*;

    #[test]
    fn only_a_write_that_may_have_run_says_it_may_have_completed() {
        let lost = || ToolError::new(ErrorCode::SessionLost, "lost.");
        for code in [
            ErrorCode::Timeout,
            ErrorCode::Cancelled,
            ErrorCode::SessionLost,
            ErrorCode::HostLost,
        ] {
            for kind in [Kind::Write, Kind::Destructive] {
                let error = may_have_written("delete", kind, Some("op1"), ToolError::new(code, "m."));
                assert!(
                    error.message.contains(MAY_HAVE_WRITTEN),
                    "{code} {kind:?}: {}",
                    error.message
                );
                assert!(
                    error.message.starts_with("m. This write (`delete`)"),
                    "{}",
                    error.message
                );
                assert_eq!(error.details.as_ref().unwrap()["operationId"], "op1");
            }
            let read = may_have_written("query", Kind::Read, None, ToolError::new(code, "m."));
            assert_eq!(read.message, "m.");
        }
        let undelivered = lost().with_details(serde_json::json!({"delivered": false}));
        assert_eq!(
            may_have_written("delete", Kind::Write, Some("op1"), undelivered).message,
            "lost."
        );
        // A write's dry run (script_edit's preview) that timed out wrote nothing.
        let previewed =
            ToolError::new(ErrorCode::Timeout, "late.").with_details(serde_json::json!({"wroteNothing": true}));
        let previewed = may_have_written("script_edit", Kind::Write, Some("op1"), previewed);
        assert_eq!(previewed.message, "late.");
        assert!(previewed.details.unwrap().get("operationId").is_none());
        let other = ToolError::new(ErrorCode::NotFound, "gone.");
        assert_eq!(
            may_have_written("delete", Kind::Write, Some("op1"), other).message,
            "gone."
        );
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let args = serde_json::json!({ "script": 5 });
        let Json::Object(args) = args else { unreachable!() };
        let err = parse_args::<exec::ExecArgs>("exec", args).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgs);
        assert!(err.message.contains("`script`"), "{}", err.message);

        let Json::Object(args) = serde_json::json!({ "scirpt": "x" }) else {
            unreachable!()
        };
        let err = parse_args::<exec::ExecArgs>("exec", args).unwrap_err();
        assert!(err.message.contains("scirpt"), "{}", err.message);

        let mut args = Map::new();
        args.insert("context".into(), Json::String("studio".into()));
        let err = take_target(&mut args, &mut Target::default()).unwrap_err();
        assert!(err.message.contains("`context`"), "{}", err.message);
    }
}
