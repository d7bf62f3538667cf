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
  };
  const runSearch = debounce(async () => {
    try {
      const page = await state.api.get(`/v1/users?query=${encodeURIComponent(search.value.trim())}&limit=20`);
      clear(results);
      for (const user of page.users.filter((u) => u.id !== state.me.id)) {
        results.append(h("li", {}, h("button", { type: "button", class: "person", "data-id": user.username, onclick: async () => {
          if (mode === "group") { chosen.set(user.id, user); renderChips(); return; }
          try {
            const conversation = await state.api.post("/v1/conversations", { kind: "direct", members: [user.username] });
            { close(); opened(conversation); }
          } catch (failure) { error.textContent = failure.message; }
        } }, h("span", { class: "avatar", "aria-hidden": "true" }, initials(user.displayName)),
           h("span", {}, user.displayName, h("small", {}, ` @${user.username}`)))));
      }
      if (!results.firstChild) results.append(h("li", { class: "hint" }, "Nobody by that name."));
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
