//! WebSocket sessions at `/ws`: attaching or admitting the session, then one message at a time.

use super::app::{App, Failure};
use super::routes::http_error;
use super::rpc::rpc;
use super::session::Session;
use crate::sessions::{ConnectionSlot, current_client, serve_as};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(super) async fn ws(
    State(app): State<Arc<App>>,
    Query(query): Query<HashMap<String, String>>,
    slot: Option<Extension<ConnectionSlot>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // Attach to an HTTP-created session (MCPToolClient), or open one for this socket.
    let session = match query.get("session_id") {
        Some(sid) => match app.sessions.get(sid) {
            Some(s) if s.attach(app.cfg.max_attachments) => (sid.clone(), s),
            Some(_) => {
                return http_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "session {sid:?} has {} WebSockets attached, the limit (or has closed)",
                        app.cfg.max_attachments
                    ),
                );
            }
            None => {
                return http_error(StatusCode::NOT_FOUND, format!("unknown session_id {sid:?}"));
            }
        },
        None => {
            let sid = app.session_id();
            let s = Session::new();
            if let Err(e) = app.sessions.admit(sid.clone(), s.clone()) {
                // Refused after the upgrade with OpenEnv's error frame, as its clients expect.
                let message = e.to_string();
                return upgrade.on_upgrade(move |mut socket| async move {
                    let frame = json!({"type": "error",
                                       "data": {"message": message, "code": "CAPACITY_REACHED"}});
                    let _ = socket.send(Message::Text(frame.to_string().into())).await;
                    let _ = socket.send(Message::Close(None)).await;
                });
            }
            s.attach(1);
            (sid, s)
        }
    };
    let max = app.cfg.max_message_bytes;
    let slot = slot.map(|Extension(s)| s);
    // The socket runs in a task of its own: it keeps serving this request's client.
    let client = current_client();
    upgrade
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            let run = run_socket(app, socket, session, slot);
            match client {
                Some(c) => serve_as(c, run).await,
                None => run.await,
            }
        })
}

fn error_frame(f: Failure) -> Value {
    json!({"type": "error", "data": {"message": f.message, "code": f.code}})
}

/// Waits until the connection's slot is closed by the reaper (never without a slot).
async fn slot_closed(slot: &Option<ConnectionSlot>) {
    match slot {
        Some(s) => s.closed().await,
        None => std::future::pending().await,
    }
}

/// One WebSocket: messages `reset`, `step`, `state`, `mcp`, `close`, answered in order. The
/// socket ends when the client closes it, when its session or its connection is closed by the
/// reaper, or when a reply cannot be sent within the send timeout (a client that does not
/// read). The session ends with its last socket. The socket holds its connection's slot.
async fn run_socket(
    app: Arc<App>,
    mut socket: WebSocket,
    (sid, session): (String, Arc<Session>),
    slot: Option<ConnectionSlot>,
) {
    app.sockets.fetch_add(1, Ordering::Relaxed);
    loop {
        let message = tokio::select! {
            m = socket.recv() => m,
            _ = session.close.closed() => break,
            _ = slot_closed(&slot) => break,
        };
        let text = match message {
            Some(Ok(Message::Text(t))) => t.to_string(),
            Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
        };
        app.sessions.touch(&sid);
        if let Some(s) = &slot {
            s.touch();
        }
        let reply = match serde_json::from_str::<Value>(&text) {
            Err(e) => error_frame(Failure::new("INVALID_JSON", format!("invalid JSON: {e}"))),
            Ok(msg) => {
                let data = msg.get("data").cloned().unwrap_or(Value::Null);
                match msg.get("type").and_then(Value::as_str) {
                    Some("reset") => match app.reset(&session, data).await {
                        Ok(v) => json!({"type": "observation", "data": v}),
                        Err(f) => error_frame(f),
                    },
                    Some("step") => match app.step(&session, data).await {
                        Ok(v) => json!({"type": "observation", "data": v}),
                        Err(f) => error_frame(f),
                    },
                    Some("state") => json!({"type": "state", "data": app.state(&session)}),
                    Some("mcp") => {
                        json!({"type": "mcp", "data": rpc(&app, data, Some(&session)).await})
                    }
                    Some("close") => break,
                    Some(other) => error_frame(Failure::new(
                        "UNKNOWN_TYPE",
                        format!("unknown message type {other:?} (reset, step, state, mcp, close)"),
                    )),
                    None => error_frame(Failure::new("UNKNOWN_TYPE", "message has no \"type\"")),
                }
            }
        };
        drop(text);
        let send = tokio::time::timeout(
            app.cfg.send_timeout,
            socket.send(Message::Text(reply.to_string().into())),
        );
        let sent = tokio::select! {
            r = send => matches!(r, Ok(Ok(()))),
            _ = session.close.closed() => false,
            _ = slot_closed(&slot) => false,
        };
        if !sent {
            break;
        }
    }
    if session.detach() {
        app.sessions.remove(&sid);
        session.close.close();
    }
    app.sockets.fetch_sub(1, Ordering::Relaxed);
    let _ = tokio::time::timeout(app.cfg.send_timeout, socket.send(Message::Close(None))).await;
}
