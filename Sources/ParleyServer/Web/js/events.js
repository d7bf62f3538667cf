// How each kind of event changes the page: one handler per kind ParleyWire declares
// (EventKind.rules), and nothing else. Tests hold the keys to the kinds of
// Tests/Fixtures/events in Chromium, so a kind the server adds cannot go unhandled here.

/**
 * The handlers, given the page: `state` and the functions that load and draw
 * (`loadConversations`, `renderList`, `renderMessages`, `insertMessage`, `markRead`, …).
 * Each takes the event and the conversation it is in (undefined when not loaded).
 */
export function handlers(page) {
  const { state } = page;

  function message(event, conversation) {
    if (!conversation) { page.loadConversations(); return; }
    conversation.lastPosition = Math.max(conversation.lastPosition ?? 0, event.position);
    const message = event.message;
    const threadOnly = message.threadId && !message.alsoInConversation;
    // Its sender has seen everything up to it (the server moved their watermarks): a reply
    // reads as read without a receipt of theirs.
    const known = state.receipts.get(event.conversationId)?.get(message.sender?.id);
    if (event.type === "message.created" && known && message.seq && message.sender.id !== state.me.id) {
      state.receipts.get(event.conversationId).set(message.sender.id, { ...known, deliveredSeq: Math.max(known.deliveredSeq, message.seq),
                                                                          readSeq: Math.max(known.readSeq, message.seq) });
    }
    // Sent with the draft's client id (on any of the user's devices): the draft is gone.
    if (event.type === "message.created" && message.sender?.id === state.me.id && conversation.draft?.clientId === message.clientId) {
      delete conversation.draft;
      state.draftIDs.delete(event.conversationId);
      page.renderList();
    }
    // The server's rule: a new message brings an archived conversation back unless it is muted.
    if (event.type === "message.created" && !threadOnly && conversation.archived && !page.isMuted(conversation)) {
      delete conversation.archived;
      page.renderList();
    }
    if (event.type === "message.created" && message.sender?.id !== state.me.id && !threadOnly) {
      page.markDelivered(event.conversationId, message.seq);
      if (event.conversationId !== state.current || document.hidden) conversation.unreadCount = (conversation.unreadCount ?? 0) + 1;
      page.clearTyping(event.conversationId, message.sender.id);
    }
    // A reply ends its author's typing in the thread.
    if (event.type === "message.created" && message.threadId) page.clearTyping(event.conversationId, message.sender?.id, message.threadId);
    if (event.thread) page.updateRoot(event.conversationId, event.thread);
    page.insertMessage(message);
    if (event.conversationId === state.current) page.markRead(state.current);
  }

  // Never unread, never moves the conversation: only the message changes.
  function annotation(event) {
    const data = state.messages.get(event.conversationId);
    const old = data?.list.find((message) => message.id === event.message?.id);
    if (!old || !event.message) return;
    const updated = { ...event.message, status: old.status };
    let mine = old.myReactions ?? [];
    if (event.userId === state.me.id && event.emoji) {
      mine = event.type === "reaction.added" ? [...new Set([...mine, event.emoji])] : mine.filter((emoji) => emoji !== event.emoji);
    }
    const present = new Set((updated.reactions ?? []).map((reaction) => reaction.emoji));
    updated.myReactions = mine.filter((emoji) => present.has(emoji));
    // A poll's counts come in the event; my own votes only from the answers I got (an
    // anonymous poll's events name nobody) or, in an open poll, from its voter lists.
    updated.myVotes = old.myVotes;
    if (event.type === "poll.voted" && event.actorId === state.me.id && updated.poll?.options?.every((option) => Array.isArray(option.voterIds))) {
      const mineNow = updated.poll.options.flatMap((option, index) => (option.voterIds.includes(state.me.id) ? [index] : []));
      if (mineNow.length || updated.poll.options.every((option) => option.voterIds.length < 50)) updated.myVotes = mineNow;
    }
    page.insertMessage(updated);
    if (state.pinsOpen === event.conversationId && event.type.startsWith("message.")) page.refreshPins();
  }

  // Members and settings: the list and the open chat are read again.
  function membership(event) {
    const meOut = ["member.removed", "member.banned"].includes(event.type) && event.userId === state.me.id;
    if (meOut && event.conversationId === state.current) page.leaveChat();
    page.loadConversations();
    if (event.conversationId === state.current && !meOut) {
      state.api.get(`/v1/conversations/${event.conversationId}/receipts?limit=100`)
        .then((answer) => { state.receipts.set(event.conversationId, new Map(answer.receipts.map((r) => [r.userId, r]))); page.renderMessages(); })
        .catch(() => {});
    }
  }

  return {
    "message.created": message,
    "message.edited": message,
    "message.deleted": message,
    "reaction.added": annotation,
    "reaction.removed": annotation,
    "message.previewed": annotation,
    "poll.voted": annotation,
    "poll.closed": annotation,
    "message.pinned": annotation,
    "message.unpinned": annotation,
    "conversation.created": membership,
    "conversation.updated": membership,
    "member.added": membership,
    "member.removed": membership,
    "member.updated": membership,
    "member.banned": membership,
    "member.unbanned": membership,
    "member.muted": membership,
    "member.unmuted": membership,

    "receipt.updated": (event, conversation) => {
      const receipts = state.receipts.get(event.conversationId) ?? new Map();
      const old = receipts.get(event.userId) ?? { userId: event.userId, deliveredSeq: 0, readSeq: 0 };
      receipts.set(event.userId, { ...old, deliveredSeq: Math.max(old.deliveredSeq, event.deliveredSeq ?? 0), readSeq: Math.max(old.readSeq, event.readSeq ?? 0) });
      state.receipts.set(event.conversationId, receipts);
      // Read on another device (or here) up to the newest: nothing unread. (Seqs count every
      // event, not only messages, so a difference of seqs is not a count of messages.)
      if (event.userId === state.me.id && conversation && (event.readSeq ?? 0) >= (conversation.lastSeq ?? 0)) {
        conversation.unreadCount = 0;
        page.renderList();
      }
      // Reading on clears an unread mark (the server's rule).
      if (event.userId === state.me.id && conversation?.markedUnread && (event.readSeq ?? 0) > (conversation.receipt?.readSeq ?? 0)) {
        delete conversation.markedUnread;
        page.renderList();
      }
      if (event.userId === state.me.id && conversation?.receipt) {
        conversation.receipt.readSeq = Math.max(conversation.receipt.readSeq ?? 0, event.readSeq ?? 0);
      }
      if (event.conversationId === state.current) page.renderMessages();
    },

    // Public channels: how far my messages got, as counts (members' receipts are not sent here).
    "delivery.updated": (event) => {
      if (event.userId !== state.me.id) return;
      for (const delivery of event.deliveries ?? []) state.deliveries.set(delivery.messageId, delivery);
      if (event.conversationId === state.current) page.renderMessages();
    },

    // A new face or name: every cached message of theirs, and the peer of a direct chat.
    "user.updated": (event) => {
      for (const data of state.messages.values()) {
        for (const message of data.list) {
          if (message.sender?.id !== event.userId) continue;
          message.sender = { ...message.sender, photoURL: event.photoURL || undefined, displayName: event.displayName ?? message.sender.displayName };
        }
      }
      for (const conversation of state.conversations.values()) {
        if (conversation.peer?.id === event.userId) {
          conversation.peer = { ...conversation.peer, photoURL: event.photoURL || undefined, displayName: event.displayName ?? conversation.peer.displayName };
        }
      }
      page.renderList();
      if (event.conversationId === state.current) page.renderMessages();
    },

    // Muted or chosen on another of the user's devices: the list's 🔕 and the header follow.
    "notifications.updated": (event, conversation) => {
      if (!conversation) return;
      conversation.mutedUntil = event.until ?? null;
      if (event.notifications) conversation.notifications = event.notifications;
      page.showMuted(conversation);
    },

    // Pinned, archived or marked unread on another of the user's devices (or this one): the
    // list puts it in its place, and the open chat's header buttons follow.
    "state.updated": (event, conversation) => {
      if (!conversation) { page.loadConversations(); return; }
      for (const field of ["pinnedRank", "archived", "markedUnread"]) {
        if (event[field] === undefined || event[field] === false || event[field] === null) delete conversation[field];
        else conversation[field] = event[field];
      }
      page.renderList();
      if (event.conversationId === state.current) page.showPlace(conversation);
    },

    // Written on another of the user's devices (or saved from here): the list shows "Draft: …"
    // and the open composer takes it while the user is not typing in it.
    "draft.updated": (event, conversation) => {
      if (!conversation || event.userId !== state.me.id) return;
      page.setDraft(conversation, event.draft);
    },

    // Scheduled, changed, cancelled, sent or failed (here or on another device): the bar above
    // the composer and its list follow.
    "scheduled.updated": (event) => {
      if (event.userId === state.me.id && event.scheduled) page.setScheduled(event.scheduled);
    },

    // A member reported a message and this user moderates the conversation (only moderators'
    // devices get it): the list shows a flag with the count until the Moderate dialog is opened.
    "report.created": (event, conversation) => {
      if (!conversation) return;
      conversation.newReports = (conversation.newReports ?? 0) + 1;
      page.renderList();
    },

    // Retention removed every message up to `throughSeq`: they leave the screen now, and the
    // list (whose last message may be one of them) is read again.
    "messages.expired": (event) => {
      const data = state.messages.get(event.conversationId);
      if (data) data.list = data.list.filter((message) => message.seq > event.throughSeq);
      page.loadConversations();
      if (event.conversationId === state.current) page.renderMessages();
    },
  };
}
