//! A call's way through the registry: waiting for a session that can take it (the
//! reconnect and startup graces, a playtest's DataModels still on their way), resolution,
//! the one request sent, and its one answer within the deadline or a cancel. A call sent to
//! the edit DataModel only by default is resolved again when a playtest starts under it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{Registry, SIBLING_WINDOW};
use crate::bridge::calls::{Refused, lock};
use crate::bridge::link::{Link, MAX_IN_FLIGHT};
use crate::bridge::resolve::{Candidate, Choice, Target, resolve};
use crate::bridge::{Call, CallHooks, Reply};
use crate::protocol::messages::HostMessage;
use crate::protocol::raw::RawValue;
use crate::protocol::{Context, ErrorCode, Ran, ToolError};

impl Registry {
    /// Routes one call to one plugin and waits for its answer, within `call.timeout`.
    ///
    /// A call sent to the edit session only because no playtest was known (the caller
    /// named no context) is marked `defaulted`; an edit plugin that sees a test starting
    /// answers it `context_changed` without running it, and the call is resolved again
    /// (now to the test's server, which it waits for): an `exec` meant for the game never
    /// lands in the edit DataModel, whose changes persist in the place.
    pub async fn call(&self, call: Call, hooks: CallHooks) -> Result<Reply, ToolError> {
        let deadline = tokio::time::Instant::now() + call.timeout;
        let mut test_starting = false;
        loop {
            let (link, ran, defaulted) = self
                .wait_for_link(&call, deadline, &hooks.cancel, test_starting)
                .await?;
            match self.send_and_wait(&call, &hooks, deadline, link, &ran, defaulted).await {
                Err(error) if defaulted && error.code == ErrorCode::ContextChanged => {
                    tracing::debug!(session = %ran.session_id, action = %call.action, "a playtest is starting: resolving again");
                    test_starting = true;
                }
                outcome => return outcome.map(|value| Reply { value, ran: Some(ran) }),
            }
        }
    }

    /// Sends one request on `link` and waits for its answer, the deadline, or a cancel.
    async fn send_and_wait(
        &self,
        call: &Call,
        hooks: &CallHooks,
        deadline: tokio::time::Instant,
        link: Arc<Link>,
        ran: &Ran,
        defaulted: bool,
    ) -> Result<RawValue, ToolError> {
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let reply_rx = match link.calls.register(id, hooks.progress.clone()) {
            Ok(answer) => answer,
            Err(Refused::Closed) => return Err(lost_before_send()),
            Err(Refused::Full) => {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    format!(
                        "Studio session {} already has {MAX_IN_FLIGHT} calls in flight, the most one session takes. Wait for some to finish, then retry.",
                        ran.session_id
                    ),
                ));
            }
        };
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let plugin_timeout = call.plugin_timeout.unwrap_or(remaining).min(remaining);
        let sent = link.send(&HostMessage::Request {
            id,
            action: &call.action,
            args: &call.args,
            timeout_ms: u64::try_from(plugin_timeout.as_millis()).unwrap_or(u64::MAX),
            session: link.channel.as_deref(),
            defaulted,
            operation_id: call.operation_id.as_deref(),
            quiet: call.quiet,
        });
        if !sent {
            link.calls.forget(id);
            return Err(lost_before_send());
        }
        tokio::select! {
            // The link let the call go without an answer: it was sent, so it may have run.
            reply = reply_rx => reply.unwrap_or_else(|_| Err(lost_after_send())),
            () = tokio::time::sleep_until(deadline) => {
                link.calls.forget(id);
                link.send(&HostMessage::Cancel {
                    id,
                    session: link.channel.as_deref(),
                });
                Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "`{}` got no answer from Studio within {} ms. The plugin was asked to stop it; Studio may be busy or paused at a breakpoint. Check studio_state, then retry (exec, test_run: pass a larger `timeoutMs`).",
                        call.action,
                        call.timeout.as_millis()
                    ),
                ))
            }
            () = hooks.cancel.cancelled() => {
                link.calls.forget(id);
                link.send(&HostMessage::Cancel {
                    id,
                    session: link.channel.as_deref(),
                });
                Err(cancelled())
            }
        }
    }

    /// Resolves the call's target to a connected plugin, waiting (within the deadline)
    /// through a reconnect grace, the startup grace, or a playtest's DataModel that has
    /// not said hello yet. With `test_starting` (the edit plugin said a test is starting),
    /// the edit session is no longer a fallback: the call waits for its own context.
    async fn wait_for_link(
        &self,
        call: &Call,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
        test_starting: bool,
    ) -> Result<(Arc<Link>, Ran, bool), ToolError> {
        let mut changes = self.changed.subscribe();
        let grace_end = tokio::time::Instant::from_std(self.started + self.startup_grace);
        loop {
            changes.mark_unchanged();
            let in_grace = tokio::time::Instant::now() < grace_end;
            let waiting_for = match self.try_resolve(&call.target, call.default_context) {
                Ok(Found::Link(link, ran)) => {
                    self.check_served(&ran, &call.action)?;
                    return Ok((link, ran, false));
                }
                Ok(Found::Reconnecting) => Waiting::Reconnect,
                Ok(Found::Provisional(_, settled)) if in_grace && tokio::time::Instant::now() < settled => {
                    Waiting::Siblings(settled)
                }
                Ok(Found::Provisional(Ok(_), _)) if test_starting => Waiting::PlayContext(call.default_context),
                Ok(Found::Provisional(outcome, _)) => match outcome {
                    // The edit session, for want of a known playtest: `defaulted` when the
                    // caller's context was defaulted to something else.
                    Ok(Some((link, ran))) => {
                        self.check_served(&ran, &call.action)?;
                        let defaulted = call.target.context.is_none() && call.default_context != Context::Edit;
                        return Ok((link, ran, defaulted));
                    }
                    Ok(None) => Waiting::Reconnect,
                    Err(error) => return Err(self.with_session_list(error)),
                },
                Ok(Found::Await(context)) => Waiting::PlayContext(context),
                // A plugin may still be reconnecting to this new host.
                Err(error) if in_grace && matches!(error.code, ErrorCode::NoSessions | ErrorCode::SessionNotFound) => {
                    Waiting::StartupGrace
                }
                Err(error) => return Err(self.with_session_list(error)),
            };
            let wake = match waiting_for {
                Waiting::StartupGrace => deadline.min(grace_end),
                Waiting::Siblings(settled) => deadline.min(grace_end).min(settled),
                Waiting::Reconnect | Waiting::PlayContext(_) => deadline,
            };
            tokio::select! {
                changed = changes.changed() => { if changed.is_err() { return Err(lost_before_send()); } }
                () = tokio::time::sleep_until(wake) => {
                    if wake >= deadline {
                        return Err(waiting_for.timeout(call));
                    }
                }
                () = cancel.cancelled() => return Err(crate::bridge::undelivered(cancelled())),
            }
        }
    }

    /// Refuses, before anything is sent, an action the session's plugin did not announce
    /// in its `hello`: a plugin installed by an older studio-bridge lacks the newer
    /// commands, and the fix is to update it, not to wait for its `unknown_action`.
    fn check_served(&self, ran: &Ran, action: &str) -> Result<(), ToolError> {
        let sessions = lock(&self.sessions);
        let Some(session) = sessions.iter().find(|s| s.hello.session_id == ran.session_id) else {
            return Ok(());
        };
        let actions = &session.hello.actions;
        if actions.is_empty() || actions.iter().any(|a| a == action) {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::UnknownAction,
            format!(
                "The studio-bridge plugin in this Studio (version {}) does not serve `{action}`: it was installed by an older studio-bridge. Run `studio-bridge install-plugin` (or restart your agent's studio-bridge, which installs it) and restart Studio.",
                session.hello.plugin_version
            ),
        ))
    }

    fn try_resolve(&self, target: &Target, default_context: Context) -> Result<Found, ToolError> {
        let sessions = lock(&self.sessions);
        let candidates: Vec<Candidate<'_>> = sessions
            .iter()
            .map(|s| Candidate {
                session_id: &s.hello.session_id,
                instance_id: &s.hello.instance_id,
                context: s.hello.context,
                state: &s.hello.state,
            })
            .collect();
        let link_of = |index: usize| {
            let session = &sessions[index];
            session.link.clone().map(|link| {
                let ran = Ran {
                    session_id: session.hello.session_id.clone(),
                    context: session.hello.context,
                };
                (link, ran)
            })
        };
        Ok(match resolve(&candidates, target, default_context)? {
            Choice::Session(index) => match link_of(index) {
                Some((link, ran)) => Found::Link(link, ran),
                None => Found::Reconnecting,
            },
            Choice::Provisional(outcome) => {
                // The newest hello of the instance the verdict is about.
                let instance = target
                    .instance_id
                    .as_deref()
                    .or_else(|| {
                        let id = target.session_id.as_deref()?;
                        sessions
                            .iter()
                            .find(|s| s.hello.session_id == id)
                            .map(|s| s.hello.instance_id.as_str())
                    })
                    .or_else(|| sessions.first().map(|s| s.hello.instance_id.as_str()));
                let newest = sessions
                    .iter()
                    .filter(|s| Some(s.hello.instance_id.as_str()) == instance)
                    .map(|s| s.connected_at)
                    .max()
                    .unwrap_or_else(Instant::now);
                let settled = tokio::time::Instant::from_std(newest + SIBLING_WINDOW);
                Found::Provisional(outcome.map(link_of), settled)
            }
            Choice::Await(context) => Found::Await(context),
        })
    }

    fn with_session_list(&self, mut error: ToolError) -> ToolError {
        match error.code {
            ErrorCode::NoSessions => {
                if let Some(refused) = self.last_refused() {
                    error.message = format!("{} {}", error.message, refused.note());
                }
                error
            }
            ErrorCode::SessionNotFound | ErrorCode::AmbiguousInstance | ErrorCode::ContextUnavailable => {
                let sessions = serde_json::to_value(self.sessions()).unwrap_or_default();
                error.with_details(serde_json::json!({ "sessions": sessions }))
            }
            _ => error,
        }
    }
}

/// What resolution found, with the links looked up.
enum Found {
    Link(Arc<Link>, Ran),
    /// The chosen session is within its reconnect grace.
    Reconnecting,
    /// See [`Choice::Provisional`]; `Ok(None)` when that session is reconnecting. The
    /// instant is when the verdict is final even within the startup grace: one
    /// [`SIBLING_WINDOW`] after the instance's newest hello.
    Provisional(Result<Option<(Arc<Link>, Ran)>, ToolError>, tokio::time::Instant),
    Await(Context),
}

/// What a call that cannot be routed yet waits for.
enum Waiting {
    Reconnect,
    StartupGrace,
    /// A playtest's other DataModels may still be reconnecting, until then.
    Siblings(tokio::time::Instant),
    PlayContext(Context),
}

impl Waiting {
    fn timeout(&self, call: &Call) -> ToolError {
        let ms = call.timeout.as_millis();
        let action = &call.action;
        let message = match self {
            Waiting::Reconnect => format!(
                "No Studio session could take `{action}` within {ms} ms (waiting for a reconnect). Check that Studio is open and the plugin is enabled, then retry."
            ),
            Waiting::StartupGrace | Waiting::Siblings(_) => format!(
                "No Studio session could take `{action}` within {ms} ms (waiting for a first plugin). Check that Studio is open and the plugin is enabled, then retry."
            ),
            Waiting::PlayContext(context) => format!(
                "Studio reports a running playtest, but its {context} DataModel did not connect within {ms} ms, so `{action}` was not run (never in the edit DataModel instead). Check studio_sessions, retry, or pass `context: \"edit\"` to run it in the edit DataModel on purpose."
            ),
        };
        // No session took it: nothing was sent.
        crate::bridge::undelivered(ToolError::new(ErrorCode::Timeout, message))
    }
}

fn lost_before_send() -> ToolError {
    crate::bridge::undelivered(ToolError::new(
        ErrorCode::SessionLost,
        "The Studio session disconnected before the call could be delivered; nothing ran. Call studio_sessions and retry.",
    ))
}

fn lost_after_send() -> ToolError {
    ToolError::new(
        ErrorCode::SessionLost,
        "The Studio session disconnected while the call was in flight. It was not re-sent (it may have run). Check its effect with a read-only tool, then retry if needed.",
    )
}

fn cancelled() -> ToolError {
    ToolError::new(
        ErrorCode::Cancelled,
        "The call was cancelled by the caller; Studio was asked to stop it.",
    )
}
