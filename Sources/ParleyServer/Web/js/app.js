// Parley's web client: sign in, the conversation list, a MessageKit-like chat view, live over
// the realtime socket. Plain JavaScript modules (state.js holds the state, dialogs.js the
// dialogs, format.js the helpers); user content only ever becomes text nodes.
import { Api, ApiError, newID } from "./api.js";
import { dialog, openChannelsDialog, openDeleteAccountDialog, openPeopleDialog, openSearchDialog } from "./dialogs.js";
import { append, autoGrow, clear, h, icon, showToast } from "./dom.js";
import { dayLabel, formatBytes, initials, shortTime } from "./format.js";
import { Live } from "./live.js";
import { renderMarkdown } from "./markdown.js";
import { showSignIn } from "./signin.js";
import { persist, savePending, state, store } from "./state.js";
import { deliveryStatus } from "./status.js";
import { handlers } from "./events.js";

const root = document.getElementById("app");
let config;
start();

async function start() {
  try {
    config = await (await fetch("/app/config.json", { cache: "no-store" })).json();
  } catch {
    append(clear(root), h("p", { class: "fatal" }, "Cannot reach the Parley server. Reload when it is running."));
    return;
  }
  const session = store.load();
  if (session?.token) {
    state.api = new Api(config.appKey, session.token);
    try {
      state.me = await state.api.get("/v1/me");
      return enterApp(session);
    } catch (error) {
      if (error.status !== 401) {
        state.me = session.user;
        return enterApp(session);
      }
      store.clear();
    }
  }
  showSignIn(root, config.appKey, enterApp);
}

// MARK: - The app

function enterApp(session) {
  document.title = "Parley";
  for (const item of session.pending ?? []) state.pending.set(item.clientId, { ...item, status: "sending" });
  renderShell();
  state.live = new Live({
    appKey: config.appKey,
    token: session.token,
    cursor: session.cursor ?? (session.position != null ? [session.position] : null),
    epoch: session.epoch ?? null,
    onState: (connection) => { state.connection = connection; renderStatus(); },
    onReady: () => { flushPending(); queryPresence(); if (state.current) markRead(state.current); },
    onResync: () => reloadEverything(),
    // Blocked or unblocked someone: what was read before shows them as it should now.
    onBlocks: () => reloadEverything(),
    onEvent: handleEvent,
    onEphemeral: handleEphemeral,
    onSignedOut: () => signedOut("You were signed out (on another device, or the password changed). Sign in again."),
    onCursor: (cursor, epoch) => persist({ cursor, epoch }),
  });
  loadScheduled();
  loadConversations().then(() => {
    // Live starts where the log stood when the list was read (a server before cursors: the
    // newest position of the conversations), so nothing between the two is missed.
    if (session.cursor == null && session.position == null) {
      persist({ cursor: state.liveCursor ?? [Math.max(0, ...[...state.conversations.values()].map((c) => c.lastPosition ?? 0))] });
    }
    const saved = store.load();
    state.live.cursor = saved?.cursor ?? (saved?.position != null ? [saved.position] : null);
    state.live.connect();
  });
}

window.addEventListener("hashchange", () => { if (state.me && elements.list) routeFromHash(); });

function signedOut(message) {
  state.live?.stop();
  store.clear();
  location.hash = "";
  Object.assign(state, { live: null, me: null, current: null });
  state.conversations.clear(); state.messages.clear(); state.pending.clear();
  showSignIn(root, config.appKey, enterApp, "signin", message);
}

let elements = {};

function renderShell() {
  elements = {
    status: h("span", { class: "connection", role: "status" }),
    list: h("ul", { class: "conversation-list", "aria-label": "Conversations" }),
    chat: h("section", { class: "chat", "aria-label": "Chat" }, h("div", { class: "empty" }, "Choose a conversation, or start one.")),
  };
  const me = h("div", { class: "me" },
    face(state.me.displayName, state.me.photoURL),
    h("span", { class: "me-name" }, state.me.displayName, state.me.isGuest ? " (guest)" : ""), elements.status);
  const actions = h("div", { class: "sidebar-actions" },
    h("button", { type: "button", onclick: () => openPeopleDialog("direct", showNew) }, "New chat"),
    h("button", { type: "button", onclick: () => openPeopleDialog("group", showNew) }, "New group"),
    h("button", { type: "button", onclick: () => openChannelsDialog(showNew) }, "Channels"),
    h("button", { type: "button", name: "open-search", onclick: () => openSearchDialog(showNew) }, "Search"),
    h("button", { type: "button", class: "quiet", onclick: signOut }, "Sign out"),
    h("button", { type: "button", class: "quiet", name: "open-blocked", onclick: openBlockedDialog }, "Blocked people…"),
    h("button", { type: "button", class: "quiet", name: "open-delete-account",
                  onclick: () => openDeleteAccountDialog((erased) => signedOut(erased ? "Your account and your messages were deleted." : "Your account was deleted.")) },
      "Delete account…"));
  append(clear(root), h("div", { class: "shell" },
    h("aside", { class: "sidebar" }, me, actions, elements.list),
    elements.chat));
  renderStatus();
}

function renderStatus() {
  if (!elements.status) return;
  const labels = { online: "online", connecting: "connecting…", resyncing: "catching up…", offline: "offline — reconnecting", signedOut: "signed out" };
  elements.status.textContent = labels[state.connection] ?? state.connection;
  elements.status.className = `connection ${state.connection}`;
}

async function signOut() {
  try { await state.api.delete("/v1/sessions/current"); } catch { /* signed out locally either way */ }
  signedOut("");
}

// MARK: - Conversations

let conversationLoads = 0;

async function loadConversations() {
  // Loads can overlap (each event of a conversation not yet listed starts one): only the
  // newest one's answer is kept, so an older, slower answer never puts back a stale list.
  const load = ++conversationLoads;
  try {
    const [page, archived] = await Promise.all([state.api.get("/v1/conversations?limit=100"),
                                                state.api.get("/v1/conversations?limit=100&archived=true")]);
    if (load !== conversationLoads) return;
    state.conversations.clear();
    for (const conversation of [...page.conversations, ...archived.conversations]) state.conversations.set(conversation.id, conversation);
    if (Array.isArray(page.liveCursor)) state.liveCursor = page.liveCursor;
    renderList();
    routeFromHash();
    if (state.connection === "online") queryPresence();
  } catch (error) {
    if (error.status === 401) signedOut("Your session ended. Sign in again.");
  }
}

async function reloadEverything() {
  loadScheduled();
  await loadConversations();
  state.messages.clear();
  if (state.current) openConversation(state.current, { reload: true });
}

function conversationName(conversation) {
  if (conversation.kind === "direct") return conversation.peer?.displayName ?? "Direct chat";
  return conversation.title || "Untitled group";
}

/** The list as the server orders it: pinned ones first by rank, then newest activity first;
 *  archived ones only when the archive is open. */
function listed() {
  const all = [...state.conversations.values()];
  const archived = all.filter((c) => c.archived);
  const shown = (state.showArchived ? archived : all.filter((c) => !c.archived)).sort((a, b) => {
    const pinA = a.pinnedRank ?? null, pinB = b.pinnedRank ?? null;
    if (pinA !== null || pinB !== null) return pinA === null ? 1 : pinB === null ? -1 : pinA - pinB;
    return (b.lastPosition ?? 0) - (a.lastPosition ?? 0);
  });
  return { shown, archivedCount: archived.length };
}

function renderList() {
  const { shown: sorted, archivedCount } = listed();
  clear(elements.list);
  if (state.showArchived) {
    elements.list.append(h("li", { class: "archive-toggle" },
      h("button", { type: "button", class: "quiet", name: "close-archive", onclick: () => { state.showArchived = false; renderList(); } },
        "‹ Back to your conversations")));
  }
  if (sorted.length === 0) {
    elements.list.append(h("li", { class: "hint" }, state.showArchived ? "Nothing archived." : "No conversations yet. Start one with “New chat”."));
  }
  for (const conversation of sorted) {
    const last = conversation.lastMessage;
    const peer = conversation.kind === "direct" ? conversation.peer : null;
    const unread = conversation.id === state.current ? 0 : conversation.unreadCount;
    elements.list.append(h("li", {},
      h("button", { type: "button", class: conversation.id === state.current ? "conversation active" : "conversation",
                    "data-id": conversation.id, onclick: () => { location.hash = `#/c/${conversation.id}`; } },
        face(conversationName(conversation), conversation.photoURL ?? peer?.photoURL, peer ? presenceDot(peer.id) : null),
        h("span", { class: "conversation-text" },
          h("span", { class: "conversation-name" },
            conversation.pinnedRank != null ? h("span", { class: "pin-mark", title: "Pinned", "aria-label": "pinned" }, "📌 ") : null,
            conversationName(conversation), conversation.kind === "public" ? " #" : ""),
          conversation.draft?.text && conversation.id !== state.current
            ? h("span", { class: "conversation-last" }, h("span", { class: "draft-label" }, "Draft: "), conversation.draft.text)
            : h("span", { class: "conversation-last" }, last ? preview(last) : kindLabel(conversation.kind))),
        h("span", { class: "conversation-meta" },
          last ? h("time", {}, shortTime(last.sentAt)) : null,
          isMuted(conversation) ? h("span", { class: "muted-mark", title: "Muted: no push", "aria-label": "muted" }, "🔕") : null,
          conversation.newReports > 0 ? h("span", { class: "report-mark", title: "New reports: open Moderate to act on them",
                                                    "aria-label": `${conversation.newReports} new reports` }, `⚑ ${conversation.newReports}`) : null,
          unread > 0 ? h("span", { class: "unread", "aria-label": `${unread} unread` }, unread > 9999 ? "9999+" : String(unread))
            : conversation.markedUnread && conversation.id !== state.current
              ? h("span", { class: "unread marked", title: "Marked unread", "aria-label": "marked unread" }, "") : null))));
  }
  if (!state.showArchived && archivedCount > 0) {
    elements.list.append(h("li", { class: "archive-toggle" },
      h("button", { type: "button", class: "quiet", name: "open-archive", onclick: () => { state.showArchived = true; renderList(); } },
        `🗄 Archived (${archivedCount})`)));
  }
}

/** Pins, archives or marks unread the conversation for this user; the other devices hear it. */
async function setPlace(conversation, change) {
  try {
    const updated = await state.api.patch(`/v1/conversations/${conversation.id}/state`, change);
    for (const field of ["pinnedRank", "archived", "markedUnread"]) {
      if (updated[field] == null) delete conversation[field]; else conversation[field] = updated[field];
    }
    renderList();
    if (conversation.id === state.current) showPlace(conversation);
  } catch (error) {
    showToast(error.message);
  }
}

/** The open chat's "⋯" menu: pin to the top of the list, archive, mark unread. */
function placeMenu(conversation) {
  const current = () => state.conversations.get(conversation.id) ?? conversation;
  const menu = h("details", { class: "place-menu" });
  const close = () => { menu.open = false; };
  elements.pinButton = h("button", { type: "button", name: "pin-conversation",
                                     onclick: () => { close(); setPlace(current(), { pinned: current().pinnedRank == null }); } });
  elements.archiveButton = h("button", { type: "button", name: "archive-conversation",
                                         onclick: async () => {
                                           close();
                                           await setPlace(current(), { archived: !current().archived });
                                           if (current().archived) location.hash = "";
                                         } });
  const unread = h("button", { type: "button", name: "mark-unread",
                               onclick: async () => { close(); location.hash = ""; await setPlace(current(), { markedUnread: true }); } },
    "Mark unread");
  append(menu, h("summary", { class: "quiet", title: "More", "aria-label": "More" }, "⋯"),
    h("div", { class: "place-menu-items", role: "menu" }, elements.pinButton, elements.archiveButton, unread));
  showPlace(current());
  return menu;
}

/** The open chat's menu says what pinning and archiving would do now. */
function showPlace(conversation) {
  if (elements.pinButton) elements.pinButton.textContent = conversation.pinnedRank != null ? "Unpin from the top" : "Pin to the top";
  if (elements.archiveButton) elements.archiveButton.textContent = conversation.archived ? "Unarchive" : "Archive";
}

/** Shows a conversation's mute in the list and, when it is open, on the header's bell. */
function showMuted(conversation) {
  renderList();
  if (conversation.id === state.current && elements.bell) elements.bell.textContent = isMuted(conversation) ? "🔕" : "🔔";
}

/** Whether the user muted this conversation's pushes (an end in the past is no mute). */
function isMuted(conversation) {
  return conversation.mutedUntil ? new Date(conversation.mutedUntil) > new Date() : false;
}

function kindLabel(kind) {
  return { direct: "Direct chat", group: "Group", public: "Public channel", private: "Private channel" }[kind] ?? kind;
}

function preview(message) {
  const who = message.sender?.id === state.me.id ? "You: " : "";
  if (message.deletedAt) return `${who}message deleted`;
  if (message.hidden === "blocked") return "Message from a blocked user";
  const content = message.content ?? {};
  switch (content.type) {
    case "text": return who + content.text;
    case "markdown": return who + content.markdown;
    case "location": return `${who}Location${content.caption ? `: ${content.caption}` : ""}`;
    case "photo": return `${who}Photo${content.caption ? `: ${content.caption}` : ""}`;
    case "video": return `${who}Video`;
    case "audio": return content.voice ? `${who}Voice message` : `${who}Audio: ${content.name ?? "file"}`;
    case "file": return `${who}File: ${content.name ?? "file"}`;
    case "system": return content.text;
    case "poll": return `${who}📊 ${content.question}`;
    default: return `${who}${content.customType ?? "message"}`;
  }
}

function routeFromHash() {
  const match = /^#\/c\/([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (match && state.conversations.has(match[1])) {
    if (state.current !== match[1]) openConversation(match[1]);
  } else if (!match && state.current) {
    state.current = null;
    document.body.classList.remove("chat-open");
    clear(elements.chat).append(h("div", { class: "empty" }, "Choose a conversation, or start one."));
    renderList();
  }
}

// MARK: - The chat view

async function openConversation(id, { reload = false } = {}) {
  if (state.current && state.current !== id && state.draftTimers.has(state.current)) saveDraftNow(state.current);
  if (threadView && threadView.conversationId !== id) closeThread();
  state.current = id;
  state.selecting = false;
  state.selected.clear();
  state.editing = null;
  document.body.classList.add("chat-open");
  const conversation = state.conversations.get(id);
  conversation.unreadCount = 0;
  // Opening it is reading it: an unread mark goes, on every device.
  if (conversation.markedUnread) setPlace(conversation, { markedUnread: false });
  renderList();
  renderChat();
  if (conversation.draft?.text && elements.composer) {
    elements.composer.value = conversation.draft.text;
    autoGrow(elements.composer);
  }
  if (!state.messages.has(id) || reload) {
    try {
      const [page, receipts] = await Promise.all([
        state.api.get(`/v1/conversations/${id}/messages?limit=50`),
        state.api.get(`/v1/conversations/${id}/receipts?limit=100`).catch(() => ({ receipts: [] })),
      ]);
      state.messages.set(id, { list: page.messages, hasOlder: page.hasOlder });
      state.receipts.set(id, new Map((receipts.receipts ?? []).map((r) => [r.userId, r])));
    } catch (error) {
      showToast(error.message);
      return;
    }
  }
  if (state.current !== id) return;
  renderMessages({ toBottom: true });
  markRead(id);
  if (conversation.kind === "direct") queryPresence();
  elements.composer?.focus();
}

function renderChat() {
  const conversation = state.conversations.get(state.current);
  if (!conversation) return;
  const peer = conversation.kind === "direct" ? conversation.peer : null;
  elements.typing = h("div", { class: "typing", "aria-live": "polite" });
  elements.messages = h("div", { class: "messages", role: "log", "aria-label": "Messages", tabindex: "0" });
  elements.messages.addEventListener("scroll", () => {
    const near = elements.messages.scrollHeight - elements.messages.scrollTop - elements.messages.clientHeight < 80;
    state.stuck = near;
    elements.jump.hidden = near;
    if (near) markRead(state.current);
  });
  elements.jump = h("button", { type: "button", class: "jump", hidden: true, onclick: () => scrollToBottom(true) }, "↓ Newest");
  elements.progress = h("div", { class: "upload-progress", hidden: true }, h("div", { class: "bar" }));
  elements.editBanner = h("div", { class: "edit-banner", hidden: true });
  elements.composer = h("textarea", { class: "composer-input", rows: 1, placeholder: "Message", "aria-label": "Message",
                                       enterkeyhint: "send", maxlength: 10000 });
  elements.mentions = h("ul", { class: "mention-suggestions", role: "listbox", "aria-label": "Mention someone", hidden: true });
  elements.composer.addEventListener("keydown", (event) => {
    if (mentionKey(event)) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submitComposer();
    } else if (event.key === "Escape" && state.editing) {
      cancelEdit();
    }
  });
  elements.composer.addEventListener("input", () => {
    autoGrow(elements.composer);
    if (!state.editing) saveDraftSoon(state.current);
    suggestMentions();
    const now = Date.now();
    if (elements.composer.value.trim() && now - state.typingSentAt > 3000) {
      state.typingSentAt = now;
      state.live?.notify("typing.start", { conversationId: state.current });
    } else if (!elements.composer.value.trim() && state.typingSentAt) {
      state.typingSentAt = 0;
      state.live?.notify("typing.stop", { conversationId: state.current });
    }
  });
  const photoInput = h("input", { type: "file", accept: "image/jpeg,image/png,image/gif,image/webp", class: "visually-hidden",
                                  "aria-label": "Send a photo", name: "photo" });
  photoInput.addEventListener("change", () => { if (photoInput.files[0]) sendFile(photoInput.files[0], "photo"); photoInput.value = ""; });
  const fileInput = h("input", { type: "file", class: "visually-hidden", "aria-label": "Send a file", name: "file" });
  fileInput.addEventListener("change", () => { if (fileInput.files[0]) sendFile(fileInput.files[0], "file"); fileInput.value = ""; });
  const selectBar = h("div", { class: "select-bar", hidden: !state.selecting },
    h("span", { class: "select-count" }, "Select your messages"),
    h("button", { type: "button", class: "danger", onclick: deleteSelected }, "Delete selected"),
    h("button", { type: "button", onclick: () => toggleSelect(false) }, "Cancel"));
  elements.selectBar = selectBar;
  const header = h("header", { class: "chat-header" },
    h("button", { type: "button", class: "back", "aria-label": "Back to conversations", onclick: () => { location.hash = ""; } }, "‹"),
    face(conversationName(conversation), conversation.photoURL ?? peer?.photoURL, peer ? presenceDot(peer.id) : null),
    h("div", { class: "chat-title" },
      h("h2", {}, conversationName(conversation)),
      h("span", { class: "chat-subtitle" }, peer ? presenceText(peer.id) : `${kindLabel(conversation.kind)} · ${conversation.memberCount} members`)),
    h("button", { type: "button", class: "quiet pins-button", title: "Pinned messages", "aria-label": "Pinned messages", onclick: openPins },
      "📌", h("span", { class: "label" }, " Pins")),
    isModerator(conversation) ? h("button", { type: "button", class: "quiet", onclick: () => openModeration(conversation) }, "Moderate") : null,
    conversation.role ? placeMenu(conversation) : null,
    elements.bell = conversation.role ? h("button", { type: "button", class: "quiet notifications-button", title: "Notifications on your phone",
                                                      onclick: () => openNotifications(state.conversations.get(conversation.id) ?? conversation) },
                                          isMuted(conversation) ? "🔕" : "🔔") : null,
    h("button", { type: "button", class: "quiet select-button", title: "Select messages", "aria-pressed": String(state.selecting),
                  onclick: () => toggleSelect(!state.selecting) }, "☑", h("span", { class: "label" }, " Select")));
  const composer = h("form", { class: "composer", onsubmit: (event) => { event.preventDefault(); submitComposer(); } },
    h("label", { class: "attach", title: "Send a photo" }, icon("photo"), photoInput),
    h("label", { class: "attach", title: "Send a file" }, icon("file"), fileInput),
    h("button", { type: "button", class: "attach", title: "Share a location", "aria-label": "Share a location", onclick: shareLocation }, icon("location")),
    h("button", { type: "button", class: "attach", name: "new-poll", title: "Ask a poll", "aria-label": "Ask a poll", onclick: openPollComposer }, "📊"),
    elements.composer,
    h("button", { type: "button", class: "attach", name: "send-later", title: "Send later", "aria-label": "Send later", onclick: openSendLater }, "⏰"),
    h("button", { type: "submit", class: "primary send" }, "Send"));
  elements.scheduledBar = h("div", { class: "scheduled-bar", hidden: true });
  append(clear(elements.chat), header, selectBar,
    h("div", { class: "messages-wrap" }, elements.messages, elements.jump),
    elements.typing, elements.progress, elements.editBanner, elements.mentions, elements.scheduledBar, composer);
  renderTyping();
  renderScheduledBar();
}

function renderMessages({ toBottom = false, keepFrom = null } = {}) {
  if (!elements.messages) return;
  const conversation = state.conversations.get(state.current);
  const data = state.messages.get(state.current);
  if (!conversation || !data) return;
  const container = elements.messages;
  const nearBottom = container.scrollHeight - container.scrollTop - container.clientHeight < 80;
  clear(container);
  if (data.hasOlder) {
    container.append(h("button", { type: "button", class: "load-earlier", onclick: loadEarlier }, "Load earlier messages"));
  }
  const pending = [...state.pending.values()].filter((item) => item.conversationId === state.current
    && !data.list.some((message) => message.clientId === item.clientId && message.sender?.id === state.me.id));
  const all = [...data.list, ...pending];
  let previous = null;
  for (const message of all) {
    const day = dayLabel(message.sentAt ?? message.createdAt);
    if (!previous || dayLabel(previous.sentAt ?? previous.createdAt) !== day) container.append(h("div", { class: "day", role: "separator" }, day));
    const showName = conversation.kind !== "direct" && message.sender?.id !== state.me.id
      && (!previous || previous.sender?.id !== message.sender?.id || dayLabel(previous.sentAt ?? previous.createdAt) !== day);
    container.append(renderMessage(message, conversation, showName));
    previous = message;
  }
  if (all.length === 0) container.append(h("div", { class: "empty" }, "No messages yet. Say hello."));
  if (keepFrom !== null) container.scrollTop = container.scrollHeight - keepFrom;
  else if (toBottom || nearBottom) scrollToBottom();
  else elements.jump.hidden = false;
}

function renderMessage(message, conversation, showName) {
  if (message.content?.type === "system" && !message.deletedAt) {
    // A notice from the app itself: centred, no bubble, no sender.
    return h("div", { class: "system-notice", role: "note", "data-id": message.id, "data-seq": message.seq ?? "" },
      h("span", { dir: "auto" }, message.content.text),
      h("time", { title: new Date(message.sentAt).toLocaleString() }, shortTime(message.sentAt)));
  }
  const mine = (message.sender?.id ?? state.me.id) === state.me.id;
  const isPending = !message.id;
  const classes = ["message", mine ? "mine" : "theirs"];
  if (message.deletedAt) classes.push("deleted");
  // Someone this user blocked: the message keeps its place, says nothing (decision 0027).
  const hidden = !message.deletedAt && message.hidden === "blocked";
  if (hidden) classes.push("deleted", "blocked-placeholder");
  const bubble = h("div", { class: ["photo", "video"].includes(message.content?.type) && !message.deletedAt ? "bubble media-bubble" : "bubble" });
  if (message.deletedAt) {
    bubble.append(h("em", {}, "This message was deleted"));
  } else if (hidden) {
    bubble.append(h("em", {}, "Message from a blocked user"));
  } else {
    if (message.pinnedAt) bubble.append(h("span", { class: "pinned-mark", title: `Pinned by ${memberName(message.pinnedBy)}` }, "📌 Pinned"));
    bubble.append(renderContent(message));
    if (message.linkPreview) bubble.append(renderLinkPreview(message.linkPreview));
  }
  const meta = h("span", { class: "meta" },
    message.editedAt && !message.deletedAt ? h("span", { class: "edited" }, "edited") : null,
    h("time", { title: new Date(message.sentAt ?? message.createdAt).toLocaleString() }, shortTime(message.sentAt ?? message.createdAt)),
    mine && !message.deletedAt ? statusMark(message, conversation) : null);
  bubble.append(meta);
  // A tap shows its actions (phones have no hover); the keyboard reaches them with Tab.
  const row = h("div", { class: classes.join(" "), "data-id": message.id ?? message.clientId, "data-seq": message.seq ?? "",
                         onclick: (event) => {
                           if (event.target.closest("button, a, input, audio, video")) return;
                           for (const other of document.querySelectorAll(".message.tapped")) if (other !== row) other.classList.remove("tapped");
                           row.classList.toggle("tapped");
                         } });
  if (state.selecting && mine && !isPending && !message.deletedAt) {
    const box = h("input", { type: "checkbox", "aria-label": "Select message", checked: state.selected.has(message.id) });
    box.addEventListener("change", () => { box.checked ? state.selected.add(message.id) : state.selected.delete(message.id); updateSelectCount(); });
    row.append(box);
  }
  const body = h("div", { class: "message-body" },
    showName ? h("span", { class: "sender" }, message.sender?.displayName ?? "") : null, bubble);
  if (!mine && conversation.kind !== "direct") {
    // Faces beside others' messages in groups and channels, once per run of one sender.
    row.append(showName ? face(message.sender?.displayName ?? "", message.sender?.photoURL, null, "small") : h("span", { class: "avatar-space" }));
  }
  row.append(body);
  if (!isPending && !message.deletedAt && message.reactions?.length) body.append(renderReactions(message));
  if (!isPending && message.replyCount) {
    body.append(h("button", { type: "button", class: "thread-link", onclick: () => openThread(message) },
      message.replyCount === 1 ? "1 reply" : `${message.replyCount} replies`,
      message.lastReplyAt ? h("small", {}, ` · last ${shortTime(message.lastReplyAt)}`) : null));
  }
  if (message.threadId && message.alsoInConversation) body.append(h("small", { class: "in-thread" }, "replied in a thread"));
  if (!isPending && !message.deletedAt && !hidden && !state.selecting) {
    const actions = h("span", { class: "message-actions" });
    actions.append(h("button", { type: "button", class: "quiet react-button", "aria-label": "Add a reaction", title: "React",
                                 onclick: (event) => openReactionPicker(message, event.currentTarget) }, "☺+"));
    if (!message.threadId) {
      actions.append(h("button", { type: "button", class: "quiet", onclick: () => openThread(message) }, "Reply in thread"));
    }
    if (canPin(conversation)) {
      actions.append(h("button", { type: "button", class: "quiet", onclick: () => setPinned(message, !message.pinnedAt) }, message.pinnedAt ? "Unpin" : "Pin"));
    }
    if (mine && ["text", "markdown"].includes(message.content?.type)) {
      actions.append(h("button", { type: "button", class: "quiet", onclick: () => startEdit(message) }, "Edit"));
    }
    if (mine || isModerator(conversation)) {
      actions.append(h("button", { type: "button", class: "quiet", onclick: () => deleteMessages([message.id]) }, "Delete"));
    }
    if (!mine) actions.append(h("button", { type: "button", class: "quiet", onclick: () => openReport(message) }, "Report"));
    if (!mine && message.sender?.id) {
      actions.append(h("button", { type: "button", class: "quiet", name: "block-sender", onclick: () => blockSender(message.sender) }, "Block"));
    }
    if (!mine && isModerator(conversation) && message.sender?.id) {
      actions.append(h("button", { type: "button", class: "quiet", onclick: () => moderate(conversation, message.sender, "mute") }, "Mute"));
      actions.append(h("button", { type: "button", class: "quiet danger-text", onclick: () => moderate(conversation, message.sender, "ban") }, "Ban"));
    }
    body.append(actions);
  }
  if (isPending && message.failed) {
    body.append(h("span", { class: "failed" }, `Not sent: ${message.failed} `,
      h("button", { type: "button", class: "quiet", onclick: () => { state.pending.delete(message.clientId); savePending(); renderMessages(); } }, "Discard")));
  }
  return row;
}

function renderContent(message) {
  const content = message.content ?? {};
  switch (content.type) {
    case "text": return h("div", { class: "text", dir: "auto" }, ...withMentions(content.text, message.mentions));
    case "markdown": return h("div", { class: "text markdown", dir: "auto" }, renderMarkdown(content.markdown));
    case "location": {
      const { latitude, longitude } = content;
      const label = content.name ?? `${Number(latitude).toFixed(5)}, ${Number(longitude).toFixed(5)}`;
      return h("div", {}, h("div", { class: "location" }, icon("location"), " ",
        h("a", { href: `https://www.openstreetmap.org/?mlat=${latitude}&mlon=${longitude}#map=16/${latitude}/${longitude}`,
                 rel: "noopener noreferrer", target: "_blank" }, label)),
        content.caption ? h("div", { class: "caption", dir: "auto" }, ...withMentions(content.caption, message.mentions)) : null);
    }
    case "photo": return mediaFigure(message, content, "photo");
    case "video": return mediaFigure(message, content, "video");
    case "audio":
      if (content.voice) return voicePlayer(message, content);
      // falls through: other audio is a file to download
    case "file": {
      const link = h("a", { class: "file", rel: "noopener noreferrer", download: content.name ?? "" },
        icon("file"), " ", content.name ?? "file", content.sizeBytes ? ` (${formatBytes(content.sizeBytes)})` : "");
      if (message.id) signedInto(link, "href", content.attachmentId, "original");
      return h("div", {}, link, content.caption ? h("div", { class: "caption" }, content.caption) : null);
    }
    case "poll": return renderPoll(message, content);
    default: return h("div", { class: "text custom" }, `[${content.customType ?? "message"}]`);
  }
}

/** A link's preview, as the server read it: a card that opens the link, with the server's own
 *  thumbnail (the reader's browser never contacts the site until they click). The image's
 *  size is reserved from the preview, so the chat does not jump when it loads. */
function renderLinkPreview(preview) {
  let host = preview.url;
  try { host = new URL(preview.url).host; } catch { /* the server only previews http(s) links */ }
  const image = preview.image
    ? h("img", { class: "link-preview-image", src: preview.image.url, alt: "", loading: "lazy",
                 width: String(preview.image.width), height: String(preview.image.height) })
    : null;
  return h("a", { class: "link-preview", href: preview.url, rel: "noopener noreferrer nofollow", target: "_blank", "data-url": preview.url },
    image,
    h("span", { class: "link-preview-text" },
      h("span", { class: "link-preview-site" }, preview.siteName ?? host),
      preview.title ? h("strong", { class: "link-preview-title", dir: "auto" }, preview.title) : null,
      preview.description ? h("span", { class: "link-preview-description", dir: "auto" }, preview.description) : null));
}

/** A poll: each option a button with its share of the voters as a bar and its count (pressed
 *  when it is one of mine); who may close it sees "Close poll". The server counts. */
function renderPoll(message, content) {
  const results = message.poll ?? { options: [], voterCount: 0 };
  const mine = new Set(message.myVotes ?? []);
  const closed = Boolean(results.closedAt) || (content.closesAt !== undefined && Date.parse(content.closesAt) <= Date.now());
  const voters = results.voterCount ?? 0;
  const options = (content.options ?? []).map((text, index) => {
    const votes = results.options?.[index]?.votes ?? 0;
    const bar = h("span", { class: "poll-bar", "aria-hidden": "true" });
    bar.style.width = `${voters ? Math.round((votes / voters) * 100) : 0}%`;
    return h("button", {
      type: "button", class: "poll-option", "aria-pressed": String(mine.has(index)), disabled: closed || !message.id,
      title: closed ? "The poll is closed" : mine.has(index) ? "Take this vote back" : `Vote for ${text}`,
      onclick: () => votePoll(message, content, index),
    }, bar, h("span", { class: "poll-text", dir: "auto" }, text), h("span", { class: "count" }, String(votes)));
  });
  const notes = [voters === 1 ? "1 person voted" : `${voters} people voted`];
  if (content.multipleChoice) notes.push("choose any");
  if (content.anonymous) notes.push("anonymous");
  if (closed) notes.push("closed");
  else if (content.closesAt) notes.push(`closes ${new Date(content.closesAt).toLocaleString()}`);
  const conversation = state.conversations.get(message.conversationId);
  const mayClose = !closed && message.id && (message.sender?.id === state.me.id || (conversation && isModerator(conversation)));
  return h("div", { class: "poll", role: "group", "aria-label": `Poll: ${content.question}` },
    h("div", { class: "poll-question", dir: "auto" }, "📊 ", content.question),
    ...options,
    h("div", { class: "poll-footer" }, h("span", { class: "poll-notes" }, notes.join(" · ")),
      mayClose ? h("button", { type: "button", class: "quiet poll-close", onclick: () => closePoll(message) }, "Close poll") : null));
}

/** A click on an option: in a single-choice poll it becomes my vote (or, when it was, my vote
 *  goes); in a multiple-choice one it joins or leaves my votes. The answer has the counts. */
async function votePoll(message, content, index) {
  const mine = new Set(message.myVotes ?? []);
  let chosen;
  if (content.multipleChoice) {
    if (mine.has(index)) mine.delete(index); else mine.add(index);
    chosen = [...mine].sort((a, b) => a - b);
  } else {
    chosen = mine.has(index) ? [] : [index];
  }
  try {
    insertMessage(await state.api.call("PUT", `/v1/conversations/${message.conversationId}/messages/${message.id}/poll/vote`, { options: chosen }));
  } catch (error) {
    showToast(error.message);
  }
}

async function closePoll(message) {
  try {
    insertMessage(await state.api.post(`/v1/conversations/${message.conversationId}/messages/${message.id}/poll/close`, {}));
  } catch (error) {
    showToast(error.message);
  }
}

/** A voice message: a player, its waveform as bars, and its length. */
function voicePlayer(message, content) {
  const audio = h("audio", { class: "voice-audio" });
  audio.controls = true;
  audio.preload = "none";
  if (message.id) signedInto(audio, "src", content.attachmentId, "original");
  const values = Array.isArray(content.waveform) ? content.waveform.slice(0, 128) : [];
  const bars = h("div", { class: "waveform", "aria-hidden": "true" });
  for (const value of values) {
    const bar = h("span", { class: "bar" });
    bar.style.height = `${Math.max(8, Math.round((Math.min(255, Math.max(0, value)) / 255) * 100))}%`;
    bars.append(bar);
  }
  const seconds = Math.max(0, Math.round(content.durationSeconds ?? 0));
  const length = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
  return h("div", { class: "voice", "aria-label": `Voice message, ${length}` },
    h("div", { class: "voice-row" }, bars, h("span", { class: "voice-length" }, length)), audio,
    content.caption ? h("div", { class: "caption", dir: "auto" }, content.caption) : null);
}

function mediaFigure(message, content, kind) {
  const image = h("img", { alt: content.caption ?? (kind === "video" ? "Video" : "Photo"), class: "photo" });
  // Reserve the photo's shape before it loads, so the list does not jump; then stay at the
  // bottom if the reader was there.
  if (content.width && content.height) image.style.aspectRatio = `${content.width} / ${content.height}`;
  image.addEventListener("load", () => { if (state.stuck) scrollToBottom(); });
  if (message.localPreview) image.setAttribute("src", message.localPreview);
  else if (kind === "photo") signedInto(image, "src", content.attachmentId, "thumbnail");
  else if (content.thumbnailId) signedInto(image, "src", content.thumbnailId, "thumbnail");
  const open = h("a", { class: "photo-link", rel: "noopener noreferrer", target: "_blank" }, image, kind === "video" ? h("span", { class: "play" }, icon("play", "Play")) : null);
  if (message.id) signedInto(open, "href", content.attachmentId, "original");
  const figure = h("figure", { class: "media" }, open);
  if (message.progress !== undefined) {
    figure.append(h("div", { class: "upload-progress" }, h("div", { class: "bar", title: `${Math.round(message.progress * 100)}%` })));
    figure.querySelector(".bar").style.width = `${Math.round(message.progress * 100)}%`;
  }
  if (content.caption) figure.append(h("figcaption", {}, content.caption));
  return figure;
}

function signedInto(element, attribute, attachmentId, variant) {
  state.api.mediaURL(attachmentId, variant).then((url) => element.setAttribute(attribute, url)).catch(() => {
    if (element.tagName === "IMG") element.replaceWith(h("span", { class: "missing" }, "(not available)"));
  });
}

function statusMark(message, conversation) {
  if (message.failed) return h("span", { class: "status failed", title: "Not sent" }, "!");
  if (!message.id) return h("span", { class: "status sending", title: "Sending", "aria-label": "sending" }, icon("clock"));
  const status = statusOf(message, conversation);
  const marks = { sent: "✓", delivered: "✓✓", read: "✓✓" };
  let title = status[0].toUpperCase() + status.slice(1);
  const counts = state.deliveries.get(message.id);
  if (counts && status !== "read") title = `Delivered to ${counts.deliveredCount} of ${counts.recipientCount}, read by ${counts.readCount}`;
  return h("span", { class: `status ${status}`, title, "aria-label": status }, marks[status]);
}

/** sent → delivered → read: in a public channel from the server's counts (delivery.updated),
 *  elsewhere from every other member's watermarks. */
function statusOf(message, conversation) {
  const counts = state.deliveries.get(message.id);
  if (counts) return counts.status;
  const receipts = state.receipts.get(conversation.id);
  if (!receipts || receipts.size === 0) return message.status ?? "sent";
  const others = [...receipts.values()].filter((r) => r.userId !== state.me.id);
  if (others.length === 0) return message.status ?? "sent";
  return deliveryStatus(message.seq, others);
}

async function loadEarlier() {
  const data = state.messages.get(state.current);
  if (!data || data.list.length === 0) return;
  const id = state.current;
  const fromBottom = elements.messages.scrollHeight - elements.messages.scrollTop;
  try {
    const page = await state.api.get(`/v1/conversations/${id}/messages?limit=50&before=${data.list[0].seq}`);
    const known = new Set(data.list.map((message) => message.id));
    data.list = [...page.messages.filter((message) => !known.has(message.id)), ...data.list];
    data.hasOlder = page.hasOlder;
    if (state.current === id) renderMessages({ keepFrom: fromBottom });
  } catch (error) {
    showToast(error.message);
  }
}

function scrollToBottom(smooth = false) {
  const container = elements.messages;
  if (!container) return;
  state.stuck = true;
  container.scrollTo({ top: container.scrollHeight, behavior: smooth ? "smooth" : "instant" });
  elements.jump.hidden = true;
  markRead(state.current);
}

// MARK: - Sending

function submitComposer() {
  const text = elements.composer.value.trim();
  if (!text) return;
  if (state.editing) return saveEdit(text);
  elements.composer.value = "";
  autoGrow(elements.composer);
  state.typingSentAt = 0;
  state.live?.notify("typing.stop", { conversationId: state.current });
  const markdown = /(\*\*|__|~~|`|\[[^\]]+\]\(|(^|\s)[*_][^*_\s])/.test(text);
  // Sent with the draft's client id: the server then drops the draft on every device.
  const draftID = takeDraft(state.current);
  send(state.current, markdown ? { type: "markdown", markdown: text } : { type: "text", text }, draftID ? { clientId: draftID } : {});
}

// MARK: - Scheduled messages: sent by the server at their time

/** The user's scheduled messages (and failed ones), kept from `scheduled.updated`. */
async function loadScheduled() {
  try {
    const answer = await state.api.get("/v1/scheduled");
    state.scheduled = new Map(answer.scheduled.map((item) => [item.id, item]));
    renderScheduledBar();
  } catch { /* the bar stays as it was */ }
}

/** A scheduled message as it stands now: waiting and failed ones are kept, the rest dropped. */
function setScheduled(item) {
  if (item.status === "scheduled" || item.status === "failed") state.scheduled.set(item.id, item);
  else state.scheduled.delete(item.id);
  renderScheduledBar();
}

function scheduledHere() {
  return [...state.scheduled.values()].filter((item) => item.conversationId === state.current)
    .sort((a, b) => (a.status === b.status ? a.sendAt.localeCompare(b.sendAt) : a.status === "scheduled" ? -1 : 1));
}

/** "⏰ 2 scheduled" above the composer: opens the list. */
function renderScheduledBar() {
  const bar = elements.scheduledBar;
  if (!bar) return;
  const here = scheduledHere();
  const failed = here.filter((item) => item.status === "failed").length;
  bar.hidden = here.length === 0;
  clear(bar);
  if (here.length === 0) return;
  bar.append(h("button", { type: "button", class: "quiet", name: "open-scheduled", onclick: openScheduledList },
    `⏰ ${here.length - failed} scheduled`, failed ? ` · ${failed} not sent` : ""));
}

/** A new poll: the question, 2–10 options, several answers or one, anonymous or not. */
function openPollComposer() {
  const conversationId = state.current;
  const question = h("input", { type: "text", name: "question", maxlength: 300, placeholder: "Ask something", "aria-label": "Question" });
  const options = h("div", { class: "poll-inputs" });
  const addOption = () => {
    if (options.children.length >= 10) return;
    options.append(h("input", { type: "text", name: "option", maxlength: 100, placeholder: `Option ${options.children.length + 1}`,
                                "aria-label": `Option ${options.children.length + 1}` }));
    more.disabled = options.children.length >= 10;
  };
  const more = h("button", { type: "button", class: "quiet", name: "add-option", onclick: addOption }, "+ Add an option");
  addOption();
  addOption();
  const multiple = h("input", { type: "checkbox", name: "multiple" });
  const anonymous = h("input", { type: "checkbox", name: "anonymous" });
  const error = h("p", { class: "form-error", role: "alert" });
  let close;
  const submit = h("button", { type: "button", class: "primary", name: "send-poll", onclick: async () => {
    const answers = [...options.querySelectorAll("input")].map((input) => input.value.trim()).filter(Boolean);
    if (!question.value.trim()) { error.textContent = "Write the question."; return; }
    if (answers.length < 2) { error.textContent = "Give at least two options."; return; }
    try {
      const message = await state.api.post(`/v1/conversations/${conversationId}/messages`, {
        clientId: newID(), content: { type: "poll", question: question.value.trim(), options: answers, multipleChoice: multiple.checked,
                                      anonymous: anonymous.checked } });
      if (state.current === conversationId) insertMessage(message);
      close();
    } catch (failure) { error.textContent = failure.message; }
  } }, "Send poll");
  close = dialog("New poll", h("label", {}, "Question ", question), options, more,
    h("label", { class: "check" }, multiple, " People may choose several"),
    h("label", { class: "check" }, anonymous, " Anonymous: counts only, never who voted"), error, submit);
}

/** Composer's text, sent by the server at a chosen time. */
function openSendLater() {
  const text = elements.composer.value.trim();
  if (!text) { showToast("Write the message first, then choose when it goes."); return; }
  const conversationId = state.current;
  const inAnHour = new Date(Date.now() + 3600_000);
  const local = new Date(inAnHour.getTime() - inAnHour.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  const when = h("input", { type: "datetime-local", name: "sendAt", value: local, "aria-label": "When to send it" });
  const error = h("p", { class: "form-error", role: "alert" });
  let close;
  const submit = h("button", { type: "button", class: "primary", name: "schedule", onclick: async () => {
    const at = new Date(when.value);
    if (Number.isNaN(at.getTime())) { error.textContent = "Choose a day and a time."; return; }
    try {
      const clientId = takeDraft(conversationId) ?? newID();
      const item = await state.api.post(`/v1/conversations/${conversationId}/scheduled`,
                                        { sendAt: at.toISOString(), message: { clientId, content: { type: "text", text } } });
      state.api.put(`/v1/conversations/${conversationId}/draft`, { text: "", updatedAt: new Date().toISOString() }).catch(() => {});
      if (state.current === conversationId && elements.composer.value.trim() === text) {
        elements.composer.value = "";
        autoGrow(elements.composer);
      }
      setScheduled(item);
      close();
      showToast(`Scheduled for ${at.toLocaleString()}`);
    } catch (failure) { error.textContent = failure.message; }
  } }, "Schedule");
  close = dialog("Send later", h("p", { class: "hint" }, text), h("label", {}, "When ", when), error, submit);
}

/** This conversation's scheduled messages: when, what, and Cancel (or, for one that failed, why and Dismiss). */
function openScheduledList() {
  const list = h("ul", { class: "scheduled-list", "aria-label": "Scheduled messages" });
  const render = () => {
    clear(list);
    const here = scheduledHere();
    if (here.length === 0) list.append(h("li", { class: "hint" }, "Nothing scheduled here."));
    for (const item of here) {
      const content = item.message.content ?? {};
      list.append(h("li", { class: item.status === "failed" ? "scheduled-item failed" : "scheduled-item", "data-id": item.id },
        h("time", {}, new Date(item.sendAt).toLocaleString()),
        h("span", { class: "scheduled-text" }, content.text ?? content.markdown ?? content.type),
        item.status === "failed" ? h("span", { class: "form-error" }, `Not sent: ${item.error ?? "refused"}`) : null,
        h("button", { type: "button", class: "quiet", onclick: async () => {
          try {
            await state.api.delete(`/v1/scheduled/${item.id}`);
            state.scheduled.delete(item.id);
            renderScheduledBar();
            render();
          } catch (failure) { showToast(failure.message); }
        } }, item.status === "failed" ? "Dismiss" : "Cancel")));
    }
  };
  render();
  dialog("Scheduled messages", list);
}

// MARK: - Drafts: what is being written, on every device of the user

/** Saves the composer's text as the conversation's draft once typing pauses. */
function saveDraftSoon(conversationId) {
  clearTimeout(state.draftTimers.get(conversationId));
  state.draftTimers.set(conversationId, setTimeout(() => saveDraftNow(conversationId), 700));
}

/** Saves the draft now (a pause in typing, or leaving the conversation). */
async function saveDraftNow(conversationId) {
  clearTimeout(state.draftTimers.get(conversationId));
  state.draftTimers.delete(conversationId);
  const conversation = state.conversations.get(conversationId);
  if (!conversation || conversationId !== state.current || !elements.composer) return;
  const text = elements.composer.value;
  if ((conversation.draft?.text ?? "") === text) return;
  const clientId = conversation.draft?.clientId ?? state.draftIDs.get(conversationId) ?? newID();
  state.draftIDs.set(conversationId, clientId);
  const draft = { text, clientId, updatedAt: new Date().toISOString() };
  setDraft(conversation, draft);
  try {
    setDraft(conversation, await state.api.put(`/v1/conversations/${conversationId}/draft`, draft));
  } catch { /* kept here; the next pause tries again */ }
}

/** The draft's client id for the message being sent now, and the draft forgotten here. */
function takeDraft(conversationId) {
  clearTimeout(state.draftTimers.get(conversationId));
  state.draftTimers.delete(conversationId);
  const conversation = state.conversations.get(conversationId);
  const id = conversation?.draft?.clientId ?? state.draftIDs.get(conversationId);
  state.draftIDs.delete(conversationId);
  if (conversation?.draft) { delete conversation.draft; renderList(); }
  return id;
}

/** A draft as saved (here or on another device): the list shows it; an open, idle composer takes it. */
function setDraft(conversation, draft) {
  if (draft.threadId) return;
  const had = conversation.draft?.text ?? "";
  if (draft.text) conversation.draft = draft; else delete conversation.draft;
  if (draft.clientId) state.draftIDs.set(conversation.id, draft.clientId);
  if (had !== (draft.text ?? "")) renderList();
  const composer = elements.composer;
  if (conversation.id === state.current && composer && document.activeElement !== composer && !state.editing && composer.value !== draft.text) {
    composer.value = draft.text;
    autoGrow(composer);
  }
}

function send(conversationId, content, extra = {}) {
  const item = { clientId: newID(), conversationId, content, createdAt: new Date().toISOString(), sender: state.me, ...extra };
  state.pending.set(item.clientId, item);
  savePending();
  if (conversationId === state.current) renderMessages({ toBottom: true });
  transmit(item);
  return item;
}

async function transmit(item) {
  if (state.connection !== "online" || item.inFlight) return;
  item.inFlight = true;
  try {
    const result = await state.live.command("message.send", { conversationId: item.conversationId,
                                                             message: { clientId: item.clientId, content: item.content } });
    state.pending.delete(item.clientId);
    savePending();
    if (item.localPreview) URL.revokeObjectURL(item.localPreview);
    insertMessage(result.message);
  } catch (error) {
    item.inFlight = false;
    if (error.code && !["offline", "timeout", "rate_limited"].includes(error.code)) {
      item.failed = error.message;
      savePending();
    }
    if (item.conversationId === state.current) renderMessages();
  }
}

function flushPending() {
  // Uploads in progress are not messages yet: they are sent when their upload finishes.
  for (const item of state.pending.values()) if (item.content && !item.failed && !item.uploading) transmit(item);
}

/** A picture's width and height, read from the file before it is shown (null if it is not one this browser reads). */
async function imageSize(file) {
  try {
    const bitmap = await createImageBitmap(file);
    const size = { width: bitmap.width, height: bitmap.height };
    bitmap.close();
    return size.width > 0 && size.height > 0 ? size : null;
  } catch { return null; }
}

async function sendFile(file, kind) {
  const conversationId = state.current;
  const local = kind === "photo" ? URL.createObjectURL(file) : null;
  // The picture's shape is known before it loads, so the list keeps its place and follows the newest.
  const size = kind === "photo" ? await imageSize(file) : null;
  const photo = { type: "photo", attachmentId: "", ...(size ?? {}) };
  const placeholder = { clientId: newID(), conversationId, createdAt: new Date().toISOString(), sender: state.me,
                        content: kind === "photo" ? photo : { type: "file", attachmentId: "", name: file.name, sizeBytes: file.size },
                        localPreview: local, progress: 0, uploading: true };
  state.pending.set(placeholder.clientId, placeholder);
  if (conversationId === state.current) renderMessages({ toBottom: true });
  const bar = () => elements.messages?.querySelector(`[data-id="${placeholder.clientId}"] .bar`);
  try {
    const info = await state.api.upload(file, kind, (fraction) => {
      placeholder.progress = fraction;
      const element = bar();
      if (element) { element.style.width = `${Math.round(fraction * 100)}%`; element.title = `${Math.round(fraction * 100)}%`; }
    });
    state.pending.delete(placeholder.clientId);
    const content = kind === "photo" ? { type: "photo", attachmentId: info.id, ...(size ?? {}) } : { type: "file", attachmentId: info.id, name: info.name ?? file.name };
    send(conversationId, content, { localPreview: local });
  } catch (error) {
    placeholder.failed = error.message;
    delete placeholder.progress;
    if (conversationId === state.current) renderMessages();
  }
}

function shareLocation() {
  const conversationId = state.current;
  const fallback = () => {
    const answer = prompt("Share a location as “latitude, longitude”:", "52.5200, 13.4050");
    const match = answer && /^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$/.exec(answer);
    if (match) send(conversationId, { type: "location", latitude: Number(match[1]), longitude: Number(match[2]) });
  };
  if (!navigator.geolocation) return fallback();
  navigator.geolocation.getCurrentPosition(
    (position) => send(conversationId, { type: "location", latitude: Number(position.coords.latitude.toFixed(6)), longitude: Number(position.coords.longitude.toFixed(6)) }),
    fallback, { timeout: 8000 });
}

function startEdit(message) {
  state.editing = message;
  elements.composer.value = message.content.text ?? message.content.markdown ?? "";
  autoGrow(elements.composer);
  elements.editBanner.hidden = false;
  clear(elements.editBanner).append("Editing your message — Enter saves, Esc cancels ",
    h("button", { type: "button", class: "quiet", onclick: cancelEdit }, "Cancel"));
  elements.composer.focus();
}

function cancelEdit() {
  state.editing = null;
  elements.composer.value = "";
  elements.editBanner.hidden = true;
}

async function saveEdit(text) {
  const message = state.editing;
  const markdown = /(\*\*|__|~~|`|\[[^\]]+\]\()/.test(text);
  try {
    const edited = await state.api.patch(`/v1/conversations/${message.conversationId}/messages/${message.id}`,
      { content: markdown ? { type: "markdown", markdown: text } : { type: "text", text } });
    insertMessage(edited);
    cancelEdit();
  } catch (error) {
    showToast(error.message);
  }
}

async function deleteMessages(ids) {
  if (ids.length === 0) return;
  if (!confirm(ids.length === 1 ? "Delete this message for everyone?" : `Delete ${ids.length} messages for everyone?`)) return;
  try {
    const answer = await state.api.post(`/v1/conversations/${state.current}/messages/delete`, { ids });
    for (const message of answer.messages) insertMessage(message);
    toggleSelect(false);
  } catch (error) {
    showToast(error.message);
  }
}

function toggleSelect(on) {
  state.selecting = on;
  state.selected.clear();
  if (elements.selectBar) elements.selectBar.hidden = !on;
  updateSelectCount();
  renderMessages();
}

function updateSelectCount() {
  const count = elements.selectBar?.querySelector(".select-count");
  if (count) count.textContent = state.selected.size ? `${state.selected.size} selected` : "Select your messages";
}

function deleteSelected() { deleteMessages([...state.selected]); }

// MARK: - Receipts

const deliveredQueue = new Map();
let deliveredTimer = null;

function markDelivered(conversationId, seq) {
  deliveredQueue.set(conversationId, Math.max(seq, deliveredQueue.get(conversationId) ?? 0));
  clearTimeout(deliveredTimer);
  deliveredTimer = setTimeout(() => {
    for (const [id, upTo] of deliveredQueue) state.live?.command("receipt.delivered", { conversationId: id, seq: upTo }).catch(() => {});
    deliveredQueue.clear();
  }, 150);
}

let readSent = new Map();
function markRead(conversationId) {
  if (!conversationId || document.hidden || state.connection !== "online") return;
  const data = state.messages.get(conversationId);
  const conversation = state.conversations.get(conversationId);
  if (!data || !conversation) return;
  const container = elements.messages;
  if (container && container.scrollHeight - container.scrollTop - container.clientHeight > 80) return;
  const newest = Math.max(0, ...data.list.map((message) => message.seq ?? 0), conversation.lastSeq ?? 0);
  if (newest <= (readSent.get(conversationId) ?? 0)) return;
  readSent.set(conversationId, newest);
  state.live.command("receipt.read", { conversationId, seq: newest }).catch(() => readSent.delete(conversationId));
}
document.addEventListener("visibilitychange", () => { if (!document.hidden) markRead(state.current); });

// MARK: - Live events

function insertMessage(message) {
  if (message.threadId) renderThreadReply(message);
  const data = state.messages.get(message.conversationId);
  const threadOnly = message.threadId && !message.alsoInConversation;
  if (data && threadOnly) {
    // A reply in a thread only: the thread panel shows it; the conversation keeps its root.
    const index = data.list.findIndex((existing) => existing.id === message.id);
    if (index >= 0) data.list.splice(index, 1);
    return;
  }
  if (data) {
    const index = data.list.findIndex((existing) => existing.id === message.id);
    if (index >= 0) data.list[index] = { ...data.list[index], ...message };
    else {
      data.list.push(message);
      data.list.sort((a, b) => a.seq - b.seq);
    }
  }
  for (const [clientId, item] of state.pending) {
    if (message.clientId === clientId && message.sender?.id === state.me.id) state.pending.delete(clientId);
  }
  const conversation = state.conversations.get(message.conversationId);
  if (conversation && (!conversation.lastMessage || (conversation.lastMessage.seq ?? 0) <= message.seq)) {
    conversation.lastMessage = message;
    conversation.lastSeq = Math.max(conversation.lastSeq ?? 0, message.seq);
  }
  if (message.conversationId === state.current) renderMessages();
  renderList();
}

function handleEvent(event) {
  eventHandlers[event.type]?.(event, state.conversations.get(event.conversationId));
}

const eventHandlers = handlers({
  state, loadConversations, markDelivered, markRead, clearTyping, updateRoot, insertMessage, renderList, renderMessages,
  refreshPins, showMuted, showPlace, isMuted, setDraft, setScheduled, leaveChat: () => { location.hash = ""; },
});

function handleEphemeral(frame) {
  if (frame.type === "typing") {
    // Typing in a thread is shown in the thread's panel, not under the conversation.
    const key = typingKey(frame.conversationId, frame.threadId);
    const typists = state.typing.get(key) ?? new Map();
    if (frame.typing) typists.set(frame.userId, Date.now() + (frame.expiresInMs ?? 6000));
    else typists.delete(frame.userId);
    state.typing.set(key, typists);
    renderTyping();
    setTimeout(renderTyping, (frame.expiresInMs ?? 6000) + 50);
  } else if (frame.type === "presence") {
    state.presence.set(frame.userId, { status: frame.status, lastSeenAt: frame.lastSeenAt });
    for (const dot of document.querySelectorAll(`.presence[data-id="${frame.userId}"]`)) dot.className = `presence ${frame.status}`;
    if (state.current) {
      const subtitle = elements.chat.querySelector(".chat-subtitle");
      const peer = state.conversations.get(state.current)?.peer;
      if (subtitle && peer?.id === frame.userId) subtitle.textContent = presenceText(peer.id);
    }
  }
}

function typingKey(conversationId, threadId) {
  return threadId ? `${conversationId}#${threadId}` : conversationId;
}

function clearTyping(conversationId, userId, threadId) {
  state.typing.get(typingKey(conversationId, threadId))?.delete(userId);
  renderTyping();
}

function typingText(key) {
  const typists = state.typing.get(key) ?? new Map();
  const now = Date.now();
  for (const [user, expiry] of typists) if (expiry <= now) typists.delete(user);
  const conversation = state.conversations.get(state.current);
  const names = [...typists.keys()].map((id) => (conversation?.peer?.id === id ? conversation.peer.displayName : memberName(id)));
  return names.length === 0 ? "" : `${names.join(", ")} ${names.length === 1 ? "is" : "are"} typing…`;
}

function renderTyping() {
  if (threadView?.typing) threadView.typing.textContent = typingText(typingKey(threadView.conversationId, threadView.root.id));
  if (!elements.typing || !state.current) return;
  elements.typing.textContent = typingText(state.current);
}

function memberName(userId) {
  if (userId === state.me?.id) return "you";
  const conversation = state.conversations.get(state.current);
  if (conversation?.peer?.id === userId) return conversation.peer.displayName;
  if (knownNames.has(userId)) return knownNames.get(userId);
  for (const message of state.messages.get(state.current)?.list ?? []) if (message.sender?.id === userId) return message.sender.displayName;
  return "Someone";
}

async function queryPresence() {
  const peers = [...state.conversations.values()].filter((c) => c.kind === "direct" && c.peer).map((c) => c.peer.id).slice(0, 100);
  if (peers.length === 0) return;
  try {
    const answer = await state.live.command("presence.query", { userIds: peers });
    for (const entry of answer.users ?? []) handleEphemeral({ type: "presence", ...entry });
  } catch { /* presence is a nicety */ }
}

function presenceDot(userId) {
  const status = state.presence.get(userId)?.status ?? "offline";
  return h("span", { class: `presence ${status}`, "data-id": userId, "aria-hidden": "true" });
}

function presenceText(userId) {
  const entry = state.presence.get(userId);
  if (entry?.status === "online") return "online";
  if (entry?.lastSeenAt) return `last seen ${shortTime(entry.lastSeenAt)}`;
  return "offline";
}

// MARK: - Dialogs: people, groups, channels

/** Shows a conversation a dialog created or joined. */
function showNew(conversation) {
  state.conversations.set(conversation.id, conversation);
  location.hash = `#/c/${conversation.id}`;
  renderList();
}

// MARK: - Reactions, pins, mentions

const QUICK_REACTIONS = ["👍", "❤️", "😂", "🎉", "😮", "😢", "🙏", "👀"];

/** The chips under a message: emoji and count, pressed when one of them is mine; a click toggles. */
function renderReactions(message) {
  const mine = new Set(message.myReactions ?? []);
  return h("div", { class: "reactions", role: "group", "aria-label": "Reactions" },
    ...message.reactions.map((reaction) => h("button", {
      type: "button", class: "reaction", "aria-pressed": String(mine.has(reaction.emoji)), "data-emoji": reaction.emoji,
      title: mine.has(reaction.emoji) ? "Take your reaction back" : `React with ${reaction.emoji}`,
      onclick: () => toggleReaction(message, reaction.emoji),
    }, reaction.emoji, h("span", { class: "count" }, String(reaction.count)))));
}

async function toggleReaction(message, emoji) {
  const path = `/v1/conversations/${message.conversationId}/messages/${message.id}/reactions`;
  try {
    const answer = (message.myReactions ?? []).includes(emoji)
      ? await state.api.call("DELETE", `${path}/${encodeURIComponent(emoji)}`)
      : await state.api.post(path, { emoji });
    insertMessage(answer);
  } catch (error) {
    showToast(error.message);
  }
}

function openReactionPicker(message, anchor) {
  document.querySelector(".reaction-picker")?.remove();
  const close = () => { picker.remove(); document.removeEventListener("keydown", onKey); };
  const onKey = (event) => { if (event.key === "Escape") close(); };
  const picker = h("div", { class: "reaction-picker", role: "menu", "aria-label": "Pick a reaction" },
    ...QUICK_REACTIONS.map((emoji) => h("button", { type: "button", role: "menuitem", "data-emoji": emoji, onclick: () => {
      close();
      if (!(message.myReactions ?? []).includes(emoji)) toggleReaction(message, emoji);
    } }, emoji)));
  anchor.closest(".message-body").append(picker);
  document.addEventListener("keydown", onKey);
  picker.querySelector("button")?.focus();
}

/** Direct chats, groups and private channels: anyone; public channels: owners and admins. */
function canPin(conversation) {
  return conversation.kind !== "public" || ["owner", "admin"].includes(conversation.role);
}

async function setPinned(message, pinned) {
  const path = `/v1/conversations/${message.conversationId}/messages/${message.id}/pin`;
  try {
    insertMessage(await state.api.call(pinned ? "PUT" : "DELETE", path));
    if (state.pinsOpen) refreshPins();
  } catch (error) {
    showToast(error.message);
  }
}

let pinsList = null;

function openPins() {
  pinsList = h("ul", { class: "pins", "aria-label": "Pinned messages" });
  state.pinsOpen = state.current;
  const close = dialog("Pinned messages", pinsList);
  const overlay = pinsList.closest(".overlay");
  new MutationObserver((_, observer) => {
    if (!document.body.contains(overlay)) { state.pinsOpen = null; observer.disconnect(); }
  }).observe(document.body, { childList: true });
  refreshPins(close);
}

async function refreshPins(close) {
  if (!pinsList || !state.pinsOpen) return;
  try {
    await membersFor(state.pinsOpen);
    const answer = await state.api.get(`/v1/conversations/${state.pinsOpen}/pins`);
    clear(pinsList);
    for (const message of answer.messages) {
      pinsList.append(h("li", { "data-id": message.id },
        h("span", { class: "sender" }, message.sender?.displayName ?? ""), " ",
        h("span", { class: "pin-text", dir: "auto" }, preview(message).replace(/^You: /, "")),
        h("small", {}, ` · pinned by ${memberName(message.pinnedBy)} ${shortTime(message.pinnedAt)}`)));
    }
    if (!pinsList.firstChild) pinsList.append(h("li", { class: "hint" }, "Nothing is pinned. Pin a message from its menu."));
  } catch (error) {
    showToast(error.message);
    close?.();
  }
}

/** Text with the mentions the server resolved shown as such (mine stand out). */
function withMentions(text, mentions) {
  if (!mentions?.length) return [text];
  const names = new Map(mentions.map((mention) => [mention.username.toLowerCase(), mention]));
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(/(^|[^\p{L}\p{N}_@])@([A-Za-z0-9._+@-]+)/gu)) {
    const name = match[2].replace(/[.+@-]+$/, "");
    const mention = names.get(name.toLowerCase());
    if (!mention) continue;
    const start = match.index + match[1].length;
    parts.push(text.slice(last, start));
    parts.push(h("span", { class: mention.userId === state.me.id ? "mention mention-me" : "mention", title: mention.username }, "@" + name));
    last = start + 1 + name.length;
  }
  parts.push(text.slice(last));
  return parts;
}

/** Members of the open conversation for the @ list (loaded once per conversation, first 100). */
const mentionable = new Map();
/** Display names of members seen in member lists (user id → name), for "pinned by". */
const knownNames = new Map();

async function membersFor(conversationId) {
  if (!mentionable.has(conversationId)) {
    mentionable.set(conversationId, state.api.get(`/v1/conversations/${conversationId}/members?limit=100`)
      .then((answer) => {
        for (const member of answer.members) knownNames.set(member.user.id, member.user.displayName);
        return answer.members.map((member) => member.user).filter((user) => user.id !== state.me.id);
      })
      .catch(() => []));
  }
  return mentionable.get(conversationId);
}

/** The `@partial` word the caret is in, if any. */
function mentionQuery() {
  const input = elements.composer;
  const before = input.value.slice(0, input.selectionStart);
  const match = before.match(/(^|\s)@([A-Za-z0-9._+-]*)$/);
  return match ? { query: match[2], start: before.length - match[2].length - 1 } : null;
}

async function suggestMentions() {
  const found = mentionQuery();
  const list = elements.mentions;
  if (!found) { list.hidden = true; return; }
  const conversationId = state.current;
  const users = (await membersFor(conversationId)).filter((user) => user.username.toLowerCase().startsWith(found.query.toLowerCase())
    || user.displayName.toLowerCase().startsWith(found.query.toLowerCase())).slice(0, 6);
  if (conversationId !== state.current) return;
  clear(list);
  users.forEach((user, index) => list.append(h("li", { role: "option", "aria-selected": String(index === 0), "data-id": user.username,
    onmousedown: (event) => { event.preventDefault(); insertMention(user.username); } }, user.displayName, h("small", {}, ` @${user.username}`))));
  list.hidden = users.length === 0;
}

function insertMention(username) {
  const found = mentionQuery();
  if (!found) return;
  const input = elements.composer;
  const after = input.value.slice(input.selectionStart);
  input.value = input.value.slice(0, found.start) + "@" + username + " " + after;
  const caret = found.start + username.length + 2;
  input.setSelectionRange(caret, caret);
  elements.mentions.hidden = true;
  input.focus();
}

/** Arrow keys move through the suggestions; Enter or Tab takes one; Escape closes them. */
function mentionKey(event) {
  const list = elements.mentions;
  if (!list || list.hidden) return false;
  const options = [...list.querySelectorAll("li")];
  const current = options.findIndex((option) => option.getAttribute("aria-selected") === "true");
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    const next = (current + (event.key === "ArrowDown" ? 1 : options.length - 1)) % options.length;
    options.forEach((option, index) => option.setAttribute("aria-selected", String(index === next)));
  } else if (event.key === "Enter" || event.key === "Tab") {
    insertMention(options[Math.max(0, current)].getAttribute("data-id"));
  } else if (event.key === "Escape") {
    list.hidden = true;
  } else {
    return false;
  }
  event.preventDefault();
  return true;
}

// MARK: - Threads

/** A reply's event carries its root's count: the root's bubble shows it at once. */
function updateRoot(conversationId, thread) {
  const data = state.messages.get(conversationId);
  const root = data?.list.find((message) => message.id === thread.rootId);
  if (!root) return;
  root.replyCount = thread.replyCount || undefined;
  root.lastReplyAt = thread.replyCount ? thread.lastReplyAt : undefined;
  if (conversationId === state.current) renderMessages();
}

let threadView = null;   // {conversationId, root, list, replies: Map, typing, panel}

function openThread(root) {
  const list = h("ol", { class: "thread-replies", "aria-label": "Replies" });
  const box = h("textarea", { class: "thread-input", rows: 2, placeholder: "Reply in the thread", "aria-label": "Reply in the thread", maxlength: 10000 });
  const also = h("input", { type: "checkbox", name: "alsoInConversation" });
  const error = h("p", { class: "form-error", role: "alert" });
  const typing = h("div", { class: "typing thread-typing", "aria-live": "polite" });
  let typingSentAt = 0;
  const notifyTyping = (started) => {
    state.live?.notify(started ? "typing.start" : "typing.stop", { conversationId: root.conversationId, threadId: root.id });
  };
  box.addEventListener("input", () => {
    const now = Date.now();
    if (box.value.trim() && now - typingSentAt > 3000) { typingSentAt = now; notifyTyping(true); }
    else if (!box.value.trim() && typingSentAt) { typingSentAt = 0; notifyTyping(false); }
  });
  const submit = async () => {
    const text = box.value.trim();
    if (!text) return;
    if (typingSentAt) { typingSentAt = 0; notifyTyping(false); }
    try {
      const message = await state.api.post(`/v1/conversations/${root.conversationId}/messages`,
        { clientId: newID(), content: { type: "text", text }, threadId: root.id, alsoInConversation: also.checked });
      box.value = "";
      also.checked = false;
      error.textContent = "";
      insertMessage(message);
    } catch (failure) { error.textContent = failure.message; }
  };
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); submit(); }
  });
  // A side panel beside the chat (as Slack and Stream do), so both stay in view; at phone width
  // it covers the chat until closed.
  closeThread();
  const close = closeThread;
  const panel = h("aside", { class: "thread-panel", role: "complementary", "aria-label": "Thread" },
    h("header", {}, h("h2", {}, "Thread"), h("button", { type: "button", class: "quiet", "aria-label": "Close", onclick: close }, "✕")),
    h("div", { class: "thread-root" }, h("span", { class: "sender" }, root.sender?.displayName ?? ""), " ",
      h("span", { dir: "auto" }, preview(root).replace(/^You: /, ""))),
    list,
    typing,
    h("form", { class: "thread-composer", onsubmit: (event) => { event.preventDefault(); submit(); } },
      box,
      h("label", { class: "check" }, also, " Also send to the conversation"),
      h("button", { type: "submit", class: "primary" }, "Reply")),
    error);
  panel.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  shellElement().append(panel);
  document.body.classList.add("thread-open");
  threadView = { conversationId: root.conversationId, root, list, replies: new Map(), typing, panel };
  renderTyping();
  box.focus();
  state.api.get(`/v1/conversations/${root.conversationId}/threads/${root.id}/messages?limit=100`).then((page) => {
    for (const message of page.messages) renderThreadReply(message);
    const last = page.messages.at(-1);
    if (last) state.api.post(`/v1/conversations/${root.conversationId}/threads/${root.id}/read`, { seq: last.seq }).catch(() => {});
  }).catch((failure) => { error.textContent = failure.message; close(); });
}

/** Closes the thread panel, if one is open. */
function closeThread() {
  threadView?.panel?.remove();
  threadView = null;
  document.body.classList.remove("thread-open");
}

function shellElement() {
  return root.querySelector(".shell") ?? root;
}

/** Adds or replaces a reply in the open thread panel, in seq order. */
function renderThreadReply(message) {
  if (!threadView || message.threadId !== threadView.root.id) return;
  const item = h("li", { "data-id": message.id, "data-seq": message.seq, class: message.sender?.id === state.me.id ? "mine" : "theirs" },
    h("span", { class: "sender" }, message.sender?.id === state.me.id ? "You" : message.sender?.displayName ?? ""),
    h("div", { class: "text", dir: "auto" }, message.deletedAt ? h("em", {}, "This reply was deleted") : preview(message).replace(/^You: /, "")),
    h("time", {}, shortTime(message.sentAt)));
  const existing = threadView.replies.get(message.id);
  if (existing) existing.replaceWith(item);
  else {
    const after = [...threadView.list.children].find((child) => Number(child.getAttribute("data-seq")) > message.seq);
    threadView.list.insertBefore(item, after ?? null);
  }
  threadView.replies.set(message.id, item);
  if (message.sender?.id !== state.me.id && !message.deletedAt) {
    state.api.post(`/v1/conversations/${message.conversationId}/threads/${message.threadId}/read`, { seq: message.seq }).catch(() => {});
  }
}

// MARK: - Moderation

/** Owners and admins of groups and channels moderate them. */
function isModerator(conversation) {
  return conversation.kind !== "direct" && ["owner", "admin"].includes(conversation.role);
}

const REPORT_REASONS = [["spam", "Spam"], ["abuse", "Abuse or harassment"], ["inappropriate", "Inappropriate content"], ["other", "Something else"]];

/** The report dialog: a reason and an optional note, sent to the conversation's moderators. */
function openReport(message) {
  const error = h("p", { class: "form-error", role: "alert" });
  const note = h("textarea", { name: "note", rows: 2, maxlength: 1000, placeholder: "Anything the moderators should know (optional)", "aria-label": "Note" });
  const choices = REPORT_REASONS.map(([value, label], index) =>
    h("label", { class: "check" }, h("input", { type: "radio", name: "reason", value, checked: index === 0 }), " ", label));
  let close;
  const form = h("form", { class: "report-form", onsubmit: async (event) => {
    event.preventDefault();
    const reason = form.querySelector("input[name=reason]:checked")?.value ?? "other";
    try {
      await state.api.post(`/v1/conversations/${message.conversationId}/messages/${message.id}/reports`,
        note.value.trim() ? { reason, note: note.value.trim() } : { reason });
      close();
      showToast("Reported. The moderators will look at it.");
    } catch (failure) { error.textContent = failure.message; }
  } }, h("p", { class: "hint" }, `Report this message by ${message.sender?.displayName ?? "someone"}?`), ...choices, note,
    h("button", { type: "submit", class: "primary" }, "Send report"), error);
  close = dialog("Report message", form);
}

/** Blocks a message's sender, after asking: their messages become placeholders everywhere. */
async function blockSender(sender) {
  if (!confirm(`Block ${sender.displayName}? You will stop seeing their messages, reactions and typing everywhere. They are not told.`)) return;
  try {
    await state.api.put(`/v1/me/blocks/${sender.id}`);
    showToast(`${sender.displayName} is blocked.`);
  } catch (failure) { showToast(failure.message); }
}

/** The people this user blocked, each with Unblock. */
async function openBlockedDialog() {
  const list = h("ul", { class: "blocked-list", "aria-label": "Blocked people" });
  const error = h("p", { class: "form-error", role: "alert" });
  const fill = async () => {
    try {
      const { users } = await state.api.get("/v1/me/blocks");
      clear(list);
      if (!users.length) list.append(h("li", { class: "hint" }, "You have not blocked anyone."));
      for (const user of users) {
        list.append(h("li", { "data-id": user.id }, h("span", {}, `${user.displayName} (@${user.username}) `),
          h("button", { type: "button", class: "quiet", name: "unblock", onclick: async () => {
            try { await state.api.delete(`/v1/me/blocks/${user.id}`); await fill(); } catch (failure) { error.textContent = failure.message; }
          } }, "Unblock")));
      }
    } catch (failure) { error.textContent = failure.message; }
  };
  await fill();
  dialog("Blocked people", list, error);
}

/** Mute or ban someone (moderators), with how long. */
async function moderate(conversation, user, action) {
  const hours = prompt(`${action === "ban" ? "Ban" : "Mute"} ${user.displayName} for how many hours? (empty: until you lift it)`, "");
  if (hours === null) return;
  const count = Number(hours);
  if (hours.trim() && !(count > 0)) { showToast("Give a number of hours, or leave it empty."); return; }
  const until = hours.trim() ? new Date(Date.now() + count * 3600_000).toISOString() : undefined;
  try {
    if (action === "ban") {
      await state.api.post(`/v1/conversations/${conversation.id}/bans`, until ? { userId: user.id, until } : { userId: user.id });
    } else {
      await state.api.call("PUT", `/v1/conversations/${conversation.id}/members/${user.id}/mute`, until ? { until } : {});
    }
    showToast(`${user.displayName} ${action === "ban" ? "banned" : "muted"}${until ? ` for ${count} h` : ""}.`);
  } catch (error) { showToast(error.message); }
}

/** What pushes the user's phone in a conversation: every message or mentions only, and a mute.
 *  Changes show at once on the user's other devices (`notifications.updated`). */
function openNotifications(conversation) {
  const level = h("select", { name: "notificationLevel", "aria-label": "Push me about" },
    h("option", { value: "all" }, "Every new message"), h("option", { value: "mentions" }, "Only mentions of me"),
    h("option", { value: "default" }, conversation.kind === "public" ? "Default (mentions)" : "Default (every message)"));
  level.value = conversation.notifications ?? "default";
  const mute = h("select", { name: "mute", "aria-label": "Mute" },
    ...[["off", "Not muted"], ["1", "For 1 hour"], ["8", "For 8 hours"], ["24", "For a day"], ["forever", "Until I unmute"]].map(([value, label]) =>
      h("option", { value }, label)));
  const until = h("p", { class: "hint mute-until" });
  const show = (current) => {
    mute.value = isMuted(current) ? (new Date(current.mutedUntil).getUTCFullYear() >= 9999 ? "forever" : mute.value === "off" ? "1" : mute.value) : "off";
    until.textContent = isMuted(current) ? (new Date(current.mutedUntil).getUTCFullYear() >= 9999 ? "Muted until you unmute."
      : `Muted until ${new Date(current.mutedUntil).toLocaleString()}. Mentions of you still push.`) : "";
  };
  show(conversation);
  const apply = (updated) => {
    state.conversations.set(updated.id, { ...conversation, ...updated });
    showMuted(updated);
    show(updated);
  };
  level.addEventListener("change", () => state.api.call("PUT", `/v1/conversations/${conversation.id}/notifications`, { level: level.value })
    .then(apply).catch((error) => showToast(error.message)));
  mute.addEventListener("change", async () => {
    try {
      if (mute.value === "off") {
        await state.api.call("DELETE", `/v1/conversations/${conversation.id}/mute`);
        apply(await state.api.get(`/v1/conversations/${conversation.id}`));
      } else {
        const body = mute.value === "forever" ? {} : { until: new Date(Date.now() + Number(mute.value) * 3600_000).toISOString() };
        apply(await state.api.call("PUT", `/v1/conversations/${conversation.id}/mute`, body));
      }
    } catch (error) { showToast(error.message); }
  });
  dialog("Notifications", h("p", { class: "hint" }, "What reaches your phone when the app is closed."),
    h("label", { class: "setting" }, "Push me about", level), h("label", { class: "setting" }, "Mute", mute), until);
}

/** The moderators' dialog: open reports (dismiss, delete, ban the author), slow mode, bans. */
function openModeration(conversation) {
  if (conversation.newReports) { conversation.newReports = 0; renderList(); }
  const reports = h("ul", { class: "reports", "aria-label": "Open reports" });
  const bans = h("ul", { class: "bans", "aria-label": "Bans" });
  const slow = h("select", { name: "slowMode", "aria-label": "Slow mode" },
    ...[[0, "Off"], [10, "10 seconds"], [30, "30 seconds"], [60, "1 minute"], [300, "5 minutes"], [3600, "1 hour"]].map(([value, label]) =>
      h("option", { value: String(value) }, label)));
  slow.value = String(conversation.slowModeSeconds ?? 0);
  slow.addEventListener("change", async () => {
    try {
      const updated = await state.api.patch(`/v1/conversations/${conversation.id}`, { slowModeSeconds: Number(slow.value) });
      conversation.slowModeSeconds = updated.slowModeSeconds;
      showToast(updated.slowModeSeconds ? `Slow mode: one message per ${updated.slowModeSeconds} s` : "Slow mode off");
    } catch (error) { showToast(error.message); }
  });
  const refresh = async () => {
    try {
      const [open, banned] = await Promise.all([state.api.get(`/v1/conversations/${conversation.id}/reports?limit=50`),
                                                state.api.get(`/v1/conversations/${conversation.id}/bans`)]);
      clear(reports);
      for (const report of open.reports) {
        const act = (resolution) => state.api.post(`/v1/conversations/${conversation.id}/reports/${report.id}/resolve`, { resolution })
          .then(refresh).catch((error) => showToast(error.message));
        reports.append(h("li", { "data-id": report.id },
          h("div", {}, h("strong", {}, report.message.sender?.displayName ?? ""), ": ",
            h("span", { dir: "auto" }, report.message.deletedAt ? "(deleted)" : preview(report.message).replace(/^You: /, ""))),
          h("small", {}, `${report.reason} · reported by ${report.reporter.displayName}${report.note ? ` · “${report.note}”` : ""}`),
          h("div", { class: "report-actions" },
            h("button", { type: "button", onclick: () => act("dismissed") }, "Dismiss"),
            h("button", { type: "button", onclick: () => act("message_deleted") }, "Delete message"),
            h("button", { type: "button", class: "danger", onclick: () => act("author_banned") }, "Delete and ban"))));
      }
      if (!reports.firstChild) reports.append(h("li", { class: "hint" }, "No open reports."));
      clear(bans);
      for (const ban of banned.bans) {
        bans.append(h("li", {}, ban.user.displayName, h("small", {}, ban.until ? ` until ${new Date(ban.until).toLocaleString()}` : " until lifted"),
          h("button", { type: "button", class: "quiet", onclick: () => state.api.call("DELETE", `/v1/conversations/${conversation.id}/bans/${ban.user.id}`)
            .then(refresh).catch((error) => showToast(error.message)) }, "Lift")));
      }
      if (!bans.firstChild) bans.append(h("li", { class: "hint" }, "Nobody is banned."));
    } catch (error) { showToast(error.message); }
  };
  dialog("Moderate", h("h3", {}, "Reports"), reports, h("h3", {}, "Slow mode"), slow, h("h3", {}, "Bans"), bans);
  refresh();
}

// MARK: - Faces

/** A round face: the photo (a path the server serves without a token) or the initials. */
function face(name, photoURL, badge = null, size = "") {
  const image = photoURL ? h("img", { src: photoURL, alt: "", class: "face" }) : null;
  if (image) image.addEventListener("error", () => image.replaceWith(document.createTextNode(initials(name))));
  return h("span", { class: size ? `avatar ${size}` : "avatar", "aria-hidden": "true" }, image ?? initials(name), badge);
}
