// The realtime half (docs/protocol.md): one WebSocket, the token in the first frame, resume
// from the cursor processed (the newest position of each shard of the server's log), commands
// answered by id, reconnection with jittered backoff, and a heartbeat that notices a socket
// that died while the laptop slept.

export class Live {
  constructor({ appKey, token, cursor, epoch, onEvent, onEphemeral, onState, onReady, onResync, onBlocks, onSignedOut, onCursor }) {
    Object.assign(this, { appKey, token, cursor, epoch, onEvent, onEphemeral, onState, onReady, onResync, onBlocks, onSignedOut, onCursor });
    this.socket = null;
    this.pending = new Map();
    this.counter = 0;
    this.attempt = 0;
    this.state = "offline";
    this.stopped = false;
    this.lastHeard = Date.now();
    this.heartbeat = setInterval(() => this.checkHeartbeat(), 5_000);
    window.addEventListener("online", () => this.reconnectSoon(0));
    document.addEventListener("visibilitychange", () => { if (!document.hidden) this.checkHeartbeat(true); });
    window.addEventListener("pageshow", () => this.checkHeartbeat(true));
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.onState?.(state);
  }

  connect() {
    if (this.stopped || (this.socket && this.socket.readyState <= WebSocket.OPEN)) return;
    this.setState("connecting");
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}/v1/realtime?appKey=${encodeURIComponent(this.appKey)}`);
    this.socket = socket;
    socket.onopen = () => {
      this.lastHeard = Date.now();
      const auth = { type: "auth", token: this.token };
      if (this.cursor != null) {
        auth.cursor = this.cursor;
        auth.position = Math.max(...this.cursor);  // for a server before cursors
        if (this.epoch) auth.epoch = this.epoch;
      }
      socket.send(JSON.stringify(auth));
      this.setState("resyncing");
    };
    socket.onmessage = (message) => {
      this.lastHeard = Date.now();
      let frame;
      try { frame = JSON.parse(message.data); } catch { return; }
      this.handle(frame);
    };
    socket.onclose = (event) => { if (this.socket === socket) this.dropped(event.code); };
  }

  /** The socket is gone: fail what waits on it, then sign out (4001) or reconnect. */
  dropped(code, delay) {
    this.socket = null;
    for (const [, waiter] of this.pending) waiter.reject(Object.assign(new Error("the connection closed"), { code: "offline" }));
    this.pending.clear();
    if (code === 4001) {
      this.stopped = true;
      this.setState("signedOut");
      this.onSignedOut?.();
      return;
    }
    this.setState("offline");
    this.reconnectSoon(delay);
  }

  handle(frame) {
    switch (frame.type) {
      case "ready":
        this.attempt = 0;
        this.saveEpoch(frame.epoch, cursorOf(frame));
        this.saveCursor(cursorOf(frame));
        this.setState("online");
        this.onReady?.();
        break;
      case "resync":
        this.saveEpoch(frame.epoch, cursorOf(frame));
        this.saveCursor(cursorOf(frame));
        this.onResync?.();
        break;
      case "event":
        this.onEvent?.(frame.event);
        this.savePosition(frame.event.position);
        break;
      case "typing":
      case "presence":
        this.onEphemeral?.(frame);
        break;
      case "blocks":
        // This user's block list changed (here or on another device): frames from now on follow it.
        this.onBlocks?.(frame.userIds ?? []);
        break;
      case "ack":
      case "error":
      case "pong": {
        const waiter = this.pending.get(frame.id);
        if (!waiter) break;
        this.pending.delete(frame.id);
        if (frame.type === "error") waiter.reject(Object.assign(new Error(frame.error?.message ?? "refused"), { code: frame.error?.code }));
        else waiter.resolve(frame.result ?? null);
        break;
      }
    }
  }

  /** A new epoch is another history: its positions restart, so the cursor given replaces ours. */
  saveEpoch(epoch, cursor) {
    if (typeof epoch !== "string" || epoch === this.epoch) return;
    const changed = this.epoch != null;
    this.epoch = epoch;
    if (changed && cursor) this.cursor = cursor;
    this.onCursor?.(this.cursor, epoch);
  }

  /** The server's cursor (ready, resync): the newest of each shard; one of another number of shards replaces ours. */
  saveCursor(cursor) {
    if (!cursor) return;
    const next = this.cursor && this.cursor.length === cursor.length ? this.cursor.map((mine, shard) => Math.max(mine, cursor[shard])) : cursor;
    if (this.cursor && next.every((position, shard) => position === this.cursor[shard])) return;
    this.cursor = next;
    this.onCursor?.(next, this.epoch);
  }

  /** One event's position, in its own shard (`position % shards`). */
  savePosition(position) {
    if (typeof position !== "number") return;
    const cursor = this.cursor ?? [0];
    const shard = position % cursor.length;
    if (position <= cursor[shard]) return;
    this.cursor = cursor.map((mine, index) => (index === shard ? position : mine));
    this.onCursor?.(this.cursor, this.epoch);
  }

  /** Sends a command; resolves with its `ack` result, rejects with its `error`. */
  command(type, fields = {}) {
    return new Promise((resolve, reject) => {
      if (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
        reject(Object.assign(new Error("offline"), { code: "offline" }));
        return;
      }
      const id = `w${++this.counter}`;
      const timer = setTimeout(() => { this.pending.delete(id); reject(Object.assign(new Error("no answer"), { code: "timeout" })); }, 20_000);
      this.pending.set(id, {
        resolve: (value) => { clearTimeout(timer); resolve(value); },
        reject: (error) => { clearTimeout(timer); reject(error); },
      });
      this.socket.send(JSON.stringify({ type, id, ...fields }));
    });
  }

  /** Fire-and-forget frames (typing). */
  notify(type, fields = {}) {
    if (this.socket?.readyState === WebSocket.OPEN && this.state === "online") this.socket.send(JSON.stringify({ type, ...fields }));
  }

  reconnectSoon(delay) {
    if (this.stopped) return;
    clearTimeout(this.retryTimer);
    const base = Math.min(15_000, 500 * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 6);
    const wait = delay ?? base / 2 + Math.random() * base / 2;
    this.retryTimer = setTimeout(() => this.connect(), wait);
  }

  /** A socket silent for longer than two heartbeats is dead (a sleeping laptop's is). */
  checkHeartbeat(now = false) {
    if (this.stopped) return;
    if (!this.socket) {
      if (now) this.reconnectSoon(0);
      return;
    }
    if (this.socket.readyState !== WebSocket.OPEN) return;
    const silent = Date.now() - this.lastHeard;
    if (silent > 65_000 || (now && silent > 25_000)) {
      const dead = this.socket;
      dead.onclose = null;
      dead.close();
      this.dropped(1006, 0);
    } else if (silent > 25_000 || now) {
      this.command("ping").catch(() => {});
    }
  }

  stop() {
    this.stopped = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.retryTimer);
    this.socket?.close(1000);
    this.socket = null;
  }
}

/** A ready or resync frame's cursor (from a server before cursors, its one position). */
export function cursorOf(frame) {
  if (Array.isArray(frame.cursor) && frame.cursor.length > 0 && frame.cursor.every((p) => Number.isSafeInteger(p) && p >= 0)) return frame.cursor;
  return typeof frame.position === "number" ? [frame.position] : null;
}
