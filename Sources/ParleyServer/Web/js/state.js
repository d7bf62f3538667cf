// The web client's state, in one place: the signed-in session kept in localStorage, and what
// the page knows (conversations, messages, receipts, pending sends, typing, presence). Views
// read and change it; nothing else holds state.

export const store = {
  load() { try { return JSON.parse(localStorage.getItem("parley.session") || "null"); } catch { return null; } },
  save(session) { localStorage.setItem("parley.session", JSON.stringify(session)); },
  clear() { localStorage.removeItem("parley.session"); },
};

export const state = {
  api: null,
  live: null,
  me: null,
  connection: "offline",
  conversations: new Map(),
  current: null,
  messages: new Map(),       // conversation id → { list: [message by seq], hasOlder, loaded }
  receipts: new Map(),       // conversation id → Map(user id → {deliveredSeq, readSeq})
  deliveries: new Map(),     // message id → {deliveredCount, readCount, recipientCount, status} (public channels: delivery.updated)
  pending: new Map(),        // client id → pending message
  typing: new Map(),         // conversation id → Map(user id → expiry)
  presence: new Map(),       // user id → {status, lastSeenAt}
  selecting: false,
  scheduled: new Map(),      // scheduled message id → the user's scheduled (or failed) message
  draftTimers: new Map(),    // conversation id → the timer that saves its draft once typing pauses
  draftIDs: new Map(),       // conversation id → the client id its draft will be sent with
  selected: new Set(),
  editing: null,
  typingSentAt: 0,
  liveCursor: null,          // where the log stood when the conversation list was last read
};

/** Merges `changes` into the stored session (cursor, epoch, pending sends). */
export function persist(changes) {
  const session = store.load();
  if (!session) return;
  Object.assign(session, changes);
  store.save(session);
}

/** Keeps the sends not yet acknowledged, so a reload sends them. */
export function savePending() {
  persist({ pending: [...state.pending.values()].filter((item) => item.content && !item.uploading).map(({ clientId, conversationId, content, createdAt }) =>
    ({ clientId, conversationId, content, createdAt })) });
}
