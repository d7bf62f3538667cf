// The sign-in page. Nothing here knows the chat: it signs in, stores the session and hands
// it to the app.
import { Api } from "./api.js";
import { append, clear, h } from "./dom.js";
import { state, store } from "./state.js";

/**
 * The sign-in page: sign in, sign up, or continue as a guest. `signedIn(session)` is called
 * with the stored session once the server accepted; `problem` is shown above the button.
 */
export function showSignIn(root, appKey, signedIn, mode = "signin", problem = "") {
  document.title = "Parley — sign in";
  const error = h("p", { class: "form-error", role: "alert" }, problem);
  const tabs = h("div", { class: "tabs", role: "tablist" },
    ...[["signin", "Sign in"], ["signup", "Sign up"], ["guest", "Guest"]].map(([id, label]) =>
      h("button", { type: "button", role: "tab", "aria-selected": String(mode === id), class: mode === id ? "tab active" : "tab",
                    onclick: () => showSignIn(root, appKey, signedIn, id) }, label)));
  const fields = [];
  if (mode !== "guest") {
    fields.push(field("Username", h("input", { name: "username", autocomplete: "username", required: true, minlength: 3, maxlength: 32, autofocus: true })));
    fields.push(field("Password", h("input", { name: "password", type: "password", required: true, minlength: 8,
                                               autocomplete: mode === "signup" ? "new-password" : "current-password" })));
  }
  if (mode !== "signin") {
    fields.push(field("Display name", h("input", { name: "displayName", maxlength: 64, required: mode === "guest", autofocus: mode === "guest" })));
  }
  const submit = h("button", { type: "submit", class: "primary" }, { signin: "Sign in", signup: "Create account", guest: "Continue as guest" }[mode]);
  const form = h("form", { class: "auth-form", onsubmit: async (event) => {
    event.preventDefault();
    submit.disabled = true;
    const data = Object.fromEntries(new FormData(form));
    const api = new Api(appKey);
    try {
      let answer;
      if (mode === "signin") answer = await api.post("/v1/sessions", { username: data.username, password: data.password, device: "web" });
      else if (mode === "signup") answer = await api.post("/v1/users", { username: data.username, password: data.password, displayName: data.displayName || undefined, device: "web" });
      else answer = await api.post("/v1/sessions/guest", { displayName: data.displayName, device: "web" });
      const session = { token: answer.session.token, user: answer.user, cursor: null };
      store.save(session);
      state.api = new Api(appKey, session.token);
      state.me = answer.user;
      signedIn(session);
    } catch (failure) {
      error.textContent = failure.message;
      submit.disabled = false;
    }
  } }, ...fields, error, submit);
  append(clear(root), h("main", { class: "auth" }, h("h1", {}, "Parley"), h("p", { class: "tagline" }, "Chat you own."), tabs, form));
  // `autofocus` only works on the first page load: move the keyboard to the first field.
  form.querySelector("input")?.focus();
}

function field(label, input) {
  const id = `f-${input.name}`;
  input.setAttribute("id", id);
  return h("div", { class: "field" }, h("label", { for: id }, label), input);
}
