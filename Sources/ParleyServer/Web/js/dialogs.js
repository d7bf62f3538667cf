// The dialogs: new chat, new group, channels. They talk to the API and report the
// conversation they opened; the app decides what to show.
import { clear, h } from "./dom.js";
import { debounce, initials } from "./format.js";
import { state } from "./state.js";

/** A modal dialog; Escape or a click outside closes it. Returns the close function. */
export function dialog(title, ...content) {
  const close = () => { overlay.remove(); };
  const overlay = h("div", { class: "overlay", onclick: (event) => { if (event.target === overlay) close(); } },
    h("div", { class: "dialog", role: "dialog", "aria-modal": "true", "aria-label": title },
      h("header", {}, h("h2", {}, title), h("button", { type: "button", class: "quiet", "aria-label": "Close", onclick: close }, "✕")),
      ...content));
  overlay.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  document.body.append(overlay);
  overlay.querySelector("input")?.focus();
  return close;
}

/** New chat (`mode` "direct") or new group: search people, create; `opened` gets the conversation. */
export function openPeopleDialog(mode, opened) {
  const chosen = new Map();
  const results = h("ul", { class: "results", "aria-label": "People" });
  const chips = h("div", { class: "chips" });
  const search = h("input", { name: "search", placeholder: "Search people by name", "aria-label": "Search people", autocomplete: "off" });
  const title = h("input", { name: "title", placeholder: "Group name (optional)", "aria-label": "Group name", maxlength: 128 });
  const error = h("p", { class: "form-error", role: "alert" });
  let close;
  const renderChips = () => {
    clear(chips);
    for (const [id, user] of chosen) chips.append(h("button", { type: "button", class: "chip", onclick: () => { chosen.delete(id); renderChips(); } }, user.displayName, " ✕"));
    // The people already chosen are marked in the results too, and a second click takes one back.
    for (const button of results.querySelectorAll("button.person")) {
      const picked = [...chosen.values()].some((user) => user.username === button.dataset.id);
      button.classList.toggle("chosen", picked);
      button.setAttribute("aria-pressed", String(picked));
      const mark = button.querySelector(".chosen-mark");
      if (mark) mark.textContent = picked ? "✓" : "";
    }
  };
  const runSearch = debounce(async () => {
    try {
      const page = await state.api.get(`/v1/users?query=${encodeURIComponent(search.value.trim())}&limit=20`);
      clear(results);
      for (const user of page.users.filter((u) => u.id !== state.me.id)) {
        results.append(h("li", {}, h("button", { type: "button", class: "person", "data-id": user.username, onclick: async () => {
          if (mode === "group") {
            if (chosen.has(user.id)) chosen.delete(user.id); else chosen.set(user.id, user);
            renderChips();
            return;
          }
          try {
            const conversation = await state.api.post("/v1/conversations", { kind: "direct", members: [user.username] });
            { close(); opened(conversation); }
          } catch (failure) { error.textContent = failure.message; }
        } }, h("span", { class: "avatar", "aria-hidden": "true" }, initials(user.displayName)),
           h("span", {}, user.displayName, h("small", {}, ` @${user.username}`)),
           mode === "group" ? h("span", { class: "chosen-mark", "aria-hidden": "true" }) : null)));
      }
      if (!results.firstChild) results.append(h("li", { class: "hint" }, "Nobody by that name."));
      renderChips();
    } catch (failure) { error.textContent = failure.message; }
  }, 200);
  search.addEventListener("input", runSearch);
  const create = h("button", { type: "button", class: "primary", onclick: async () => {
    if (chosen.size === 0) { error.textContent = "Add at least one person."; return; }
    try {
      const body = { kind: "group", members: [...chosen.values()].map((u) => u.username) };
      if (title.value.trim()) body.title = title.value.trim();
      const conversation = await state.api.post("/v1/conversations", body);
      { close(); opened(conversation); }
    } catch (failure) { error.textContent = failure.message; }
  } }, "Create group");
  close = dialog(mode === "group" ? "New group" : "New chat", search,
    mode === "group" ? title : null, mode === "group" ? chips : null, results, error, mode === "group" ? create : null);
  runSearch();
}

/** Find, join or start channels; `opened` gets the conversation. */
export function openChannelsDialog(opened) {
  const results = h("ul", { class: "results", "aria-label": "Channels" });
  const search = h("input", { name: "search", placeholder: "Search public channels", "aria-label": "Search channels", autocomplete: "off" });
  const name = h("input", { name: "channel", placeholder: "New channel name", "aria-label": "New channel name", maxlength: 128 });
  const isPrivate = h("input", { type: "checkbox", name: "private", "aria-label": "Private" });
  const error = h("p", { class: "form-error", role: "alert" });
  let close;
  const runSearch = debounce(async () => {
    try {
      const page = await state.api.get(`/v1/channels?query=${encodeURIComponent(search.value.trim())}&limit=30`);
      clear(results);
      for (const channel of page.channels) {
        const joined = state.conversations.has(channel.id);
        results.append(h("li", {}, h("span", { class: "channel-name" }, `# ${channel.title}`, h("small", {}, ` ${channel.memberCount} members`)),
          h("button", { type: "button", class: joined ? "quiet" : "primary", onclick: async () => {
            try {
              const conversation = joined ? state.conversations.get(channel.id) : await state.api.post(`/v1/conversations/${channel.id}/join`);
              { close(); opened(conversation); }
            } catch (failure) { error.textContent = failure.message; }
          } }, joined ? "Open" : "Join")));
      }
      if (!results.firstChild) results.append(h("li", { class: "hint" }, "No public channels yet."));
    } catch (failure) { error.textContent = failure.message; }
  }, 200);
  search.addEventListener("input", runSearch);
  const create = h("form", { class: "inline-form", onsubmit: async (event) => {
    event.preventDefault();
    if (!name.value.trim()) return;
    try {
      const conversation = await state.api.post("/v1/conversations", { kind: isPrivate.checked ? "private" : "public", title: name.value.trim() });
      { close(); opened(conversation); }
    } catch (failure) { error.textContent = failure.message; }
  } }, name, h("label", { class: "check" }, isPrivate, " private"), h("button", { type: "submit" }, "Create"));
  close = dialog("Channels", search, results, h("h3", {}, "Start a channel"), create, error);
  runSearch();
}

/** What a found message says, in a line. */
function snippet(message) {
  const content = message.content ?? {};
  if (content.type === "text") return content.text;
  if (content.type === "markdown") return content.markdown;
  return content.caption ?? content.name ?? (content.type === "audio" && content.voice ? "Voice message" : content.type ?? "");
}

/** Search messages: words and filters (who sent it, what kind, with an attachment); a result opens its conversation. */
export function openSearchDialog(opened) {
  const results = h("ul", { class: "results search-results", "aria-label": "Found messages" });
  const words = h("input", { name: "q", placeholder: "Search messages", "aria-label": "Search messages", autocomplete: "off", maxlength: 256 });
  const from = h("input", { name: "from", placeholder: "From (username)", "aria-label": "From", autocomplete: "off", maxlength: 64 });
  const kind = h("select", { name: "kind", "aria-label": "Kind" },
    ...[["", "Any kind"], ["text", "Text"], ["photo", "Photos"], ["video", "Videos"], ["audio", "Audio"], ["file", "Files"], ["location", "Places"]]
      .map(([value, label]) => h("option", { value }, label)));
  const attached = h("input", { type: "checkbox", name: "hasAttachment", "aria-label": "With an attachment" });
  const more = h("button", { type: "button", class: "quiet", hidden: true }, "More results");
  const error = h("p", { class: "form-error", role: "alert" });
  let close;
  let cursor = null;
  const run = async (append) => {
    const query = new URLSearchParams({ q: words.value.trim(), limit: "20" });
    if (from.value.trim()) query.set("from", from.value.trim());
    if (kind.value) query.set("kind", kind.value);
    if (attached.checked) query.set("hasAttachment", "true");
    if (append && cursor) query.set("cursor", cursor);
    if (!query.get("q") && !query.get("from") && !query.get("kind") && !query.get("hasAttachment")) {
      clear(results);
      more.hidden = true;
      return;
    }
    try {
      const page = await state.api.get(`/v1/search?${query}`);
      error.textContent = "";
      if (!append) clear(results);
      for (const message of page.messages) {
        const conversation = state.conversations.get(message.conversationId);
        results.append(h("li", { "data-id": message.id },
          h("button", { type: "button", class: "quiet found", onclick: () => { if (conversation) { close(); opened(conversation); } } },
            h("strong", {}, conversation?.title ?? conversation?.peer?.displayName ?? ""), " · ",
            h("span", { class: "sender" }, message.sender?.displayName ?? ""), ": ",
            h("span", { dir: "auto" }, snippet(message)))));
      }
      if (!results.firstChild) results.append(h("li", { class: "hint" }, "Nothing found."));
      cursor = page.nextCursor ?? null;
      more.hidden = !cursor;
    } catch (failure) { error.textContent = failure.message; }
  };
  const again = debounce(() => run(false), 250);
  for (const input of [words, from]) input.addEventListener("input", again);
  for (const input of [kind, attached]) input.addEventListener("change", () => run(false));
  more.addEventListener("click", () => run(true));
  close = dialog("Search", words, h("div", { class: "search-filters" }, from, kind, h("label", { class: "check" }, attached, " with an attachment")),
    results, more, error);
}

/**
 * Delete my account (App Store guideline 5.1.1(v)): says what happens, asks for the password
 * (guests have none), optionally erases every message sent, and needs a second click on the
 * red button. `deleted` runs once the server has deleted it.
 */
export function openDeleteAccountDialog(deleted) {
  const guest = state.me.isGuest;
  const password = h("input", { type: "password", name: "password", placeholder: "Your password", "aria-label": "Password",
                                autocomplete: "current-password" });
  const erase = h("input", { type: "checkbox", name: "erase" });
  const error = h("p", { class: "form-error", role: "alert" });
  let armed = false;
  const confirm = h("button", { type: "button", class: "danger", name: "delete-account", onclick: async () => {
    if (!guest && !password.value) { error.textContent = "Type your password to confirm."; return; }
    if (!armed) { armed = true; confirm.textContent = "Yes, delete it for good"; return; }
    confirm.disabled = true;
    try {
      const body = { erase: erase.checked };
      if (!guest) body.password = password.value;
      await state.api.delete("/v1/me", body);
      close();
      deleted(erase.checked);
    } catch (failure) {
      confirm.disabled = false;
      error.textContent = failure.code === "recent_sign_in_required" ? "Sign out and in again, then delete the account within 10 minutes." : failure.message;
    }
  } }, "Delete my account");
  const close = dialog("Delete account",
    h("p", {}, "Your account is deleted for good: every device is signed out, you leave every group and channel, and your username becomes free for someone else. ",
      "Messages you sent stay in their conversations as “Deleted user” unless you erase them."),
    guest ? h("p", { class: "hint" }, "You are a guest: deleting ends this guest account.") : password,
    h("label", { class: "check" }, erase, " Also erase every message I sent"),
    error, confirm);
}
