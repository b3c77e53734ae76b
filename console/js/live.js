// The live feed: one WebSocket to /ws for the whole console, opened again
// (1, 2, 4 … 15 s apart) whenever it drops, so the console outlives an api
// restart. Views subscribe to event types; the status line shows the link.

import { token } from "./api.js";

const listeners = new Map(); // event type -> Set of callbacks
const statusListeners = new Set();
let socket = null;
let retryDelay = 1000;
let retryTimer = null;
let stopped = true;

/** Calls `callback(event)` for each live event of `type`; returns the unsubscribe. */
export function on(type, callback) {
  if (!listeners.has(type)) listeners.set(type, new Set());
  listeners.get(type).add(callback);
  return () => listeners.get(type).delete(callback);
}

/** Calls `callback(status)` with "connecting", "live" or "reconnecting". */
export function onStatus(callback) {
  statusListeners.add(callback);
  return () => statusListeners.delete(callback);
}

function setStatus(status) {
  document.body.dataset.live = status;
  for (const callback of statusListeners) callback(status);
}

function deliver(event) {
  for (const callback of listeners.get(event.type) || []) {
    try {
      callback(event);
    } catch (e) {
      console.error("live event handler failed", e);
    }
  }
}

/** Opens the feed (again, after `stop`). */
export function start() {
  stopped = false;
  connect();
}

/** Closes the feed and does not reopen it (sign-out). */
export function stop() {
  stopped = true;
  clearTimeout(retryTimer);
  if (socket) socket.close(1000);
  socket = null;
}

function connect() {
  if (stopped) return;
  setStatus(socket === null && retryDelay === 1000 ? "connecting" : "reconnecting");
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const query = token.get() ? `?token=${encodeURIComponent(token.get())}` : "";
  const ws = new WebSocket(`${scheme}://${location.host}/ws${query}`);
  socket = ws;
  ws.onopen = () => {
    retryDelay = 1000;
    setStatus("live");
    // Views fetch afresh: what changed while the link was down was missed.
    deliver({ type: "live.reconnected" });
  };
  ws.onmessage = (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    // Told it missed events: refetch, as after a reconnect.
    if (event.type === "lagged") event = { type: "live.reconnected" };
    deliver(event);
  };
  ws.onclose = () => {
    if (socket !== ws || stopped) return;
    setStatus("reconnecting");
    retryTimer = setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 15000);
  };
}
