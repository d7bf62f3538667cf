// Building the page without HTML strings: every piece of user content becomes a text node or a
// checked attribute, so a message holding `<script>` or a `javascript:` link stays text.

const SAFE_ATTRIBUTES = new Set(["class", "id", "type", "name", "value", "placeholder", "title", "role", "tabindex",
  "for", "accept", "autocomplete", "aria-label", "aria-live", "aria-pressed", "aria-selected", "aria-hidden",
  "aria-modal", "aria-checked", "data-id", "data-seq", "data-kind", "alt", "minlength", "maxlength", "rows", "dir",
  "download", "rel", "target", "width", "height", "inputmode", "enterkeyhint", "spellcheck", "lang", "data-emoji", "loading", "data-url"]);

/** Only http(s) and mailto links, and our own paths: anything else (javascript:, data:) is refused. */
export function safeURL(value) {
  if (typeof value !== "string") return null;
  if (value.startsWith("/") && !value.startsWith("//")) return value;
  try {
    const url = new URL(value, location.origin);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

/** h("div", {class: "x", onclick: fn}, "text", child…) */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "href" || name === "src") {
      const url = safeURL(value) || (name === "src" && typeof value === "string" && value.startsWith("blob:") ? value : null);
      if (url) element.setAttribute(name, url);
    } else if (name === "disabled" || name === "checked" || name === "required" || name === "multiple" || name === "hidden"
               || name === "autofocus") {
      element[name] = Boolean(value);
    } else if (SAFE_ATTRIBUTES.has(name)) {
      element.setAttribute(name, value === true ? "" : String(value));
    } else {
      throw new Error(`attribute ${name} is not allowed`);
    }
  }
  append(element, ...children);
  return element;
}

export function append(parent, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

export function clear(element) {
  while (element.firstChild) element.firstChild.remove();
  return element;
}

const ICONS = {
  photo: "M4 7h3l2-2h6l2 2h3a1 1 0 0 1 1 1v10a1 1 0 0 1-1 1H4a1 1 0 0 1-1-1V8a1 1 0 0 1 1-1zm8 3a3.5 3.5 0 1 0 0 7 3.5 3.5 0 0 0 0-7z",
  file: "M16.5 6.5l-7.8 7.8a2 2 0 0 0 2.8 2.8l7.8-7.8a4 4 0 0 0-5.7-5.7L5.8 11.4a6 6 0 0 0 8.5 8.5l6.4-6.4",
  location: "M12 2a7 7 0 0 0-7 7c0 5 7 13 7 13s7-8 7-13a7 7 0 0 0-7-7zm0 9.5A2.5 2.5 0 1 1 12 6.5a2.5 2.5 0 0 1 0 5z",
  clock: "M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18zm1 9.4l3.2 1.9-.8 1.3L11 13V7h2z",
  play: "M8 5v14l11-7z",
};

/** A small inline SVG icon (fixed shapes only; nothing from users goes in here). */
export function icon(name, label) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", `icon icon-${name}`);
  if (label) { svg.setAttribute("role", "img"); svg.setAttribute("aria-label", label); } else svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", ICONS[name]);
  if (name === "file") { path.setAttribute("fill", "none"); path.setAttribute("stroke", "currentColor"); path.setAttribute("stroke-width", "2"); }
  svg.append(path);
  return svg;
}

export function autoGrow(textarea) {
  textarea.style.height = "auto";
  textarea.style.height = `${Math.min(textarea.scrollHeight, 160)}px`;
}

export function showToast(message) {
  const toast = h("div", { class: "toast", role: "alert" }, message);
  document.body.append(toast);
  setTimeout(() => toast.remove(), 5000);
}
