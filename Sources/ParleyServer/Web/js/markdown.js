// A small Markdown subset rendered to DOM nodes (never HTML strings): paragraphs and line
// breaks, **bold**, *italic* / _italic_, ~~strike~~, `code`, ``` fenced code ```, and
// [links](https://…) or bare https:// links. Links other than http(s)/mailto stay text.
import { h, safeURL } from "./dom.js";

export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const blocks = text.split(/\n?```/);
  blocks.forEach((block, index) => {
    if (index % 2 === 1) {
      fragment.append(h("pre", {}, h("code", {}, block.replace(/^[a-z0-9+-]*\n/i, ""))));
      return;
    }
    const paragraphs = block.split(/\n{2,}/).filter((paragraph) => paragraph.length > 0);
    for (const paragraph of paragraphs) {
      const p = h("p");
      paragraph.split("\n").forEach((line, lineIndex) => {
        if (lineIndex > 0) p.append(h("br"));
        p.append(...inline(line));
      });
      fragment.append(p);
    }
  });
  return fragment;
}

const PATTERNS = [
  { kind: "code", regex: /`([^`]+)`/ },
  { kind: "link", regex: /\[([^\]]+)\]\(([^)\s]+)\)/ },
  { kind: "url", regex: /\bhttps?:\/\/[^\s<>()]+[^\s<>().,;:!?'"]/ },
  { kind: "strong", regex: /\*\*([^*]+)\*\*|__([^_]+)__/ },
  { kind: "strike", regex: /~~([^~]+)~~/ },
  { kind: "em", regex: /\*([^*\s][^*]*)\*|\b_([^_]+)_\b/ },
];

function inline(text) {
  const nodes = [];
  let rest = text;
  while (rest.length > 0) {
    let best = null;
    for (const pattern of PATTERNS) {
      const match = pattern.regex.exec(rest);
      if (match && (best === null || match.index < best.match.index)) best = { pattern, match };
    }
    if (!best) {
      nodes.push(document.createTextNode(rest));
      break;
    }
    const { pattern, match } = best;
    if (match.index > 0) nodes.push(document.createTextNode(rest.slice(0, match.index)));
    switch (pattern.kind) {
      case "code": nodes.push(h("code", {}, match[1])); break;
      case "strong": nodes.push(h("strong", {}, ...inline(match[1] ?? match[2]))); break;
      case "strike": nodes.push(h("s", {}, ...inline(match[1]))); break;
      case "em": nodes.push(h("em", {}, ...inline(match[1] ?? match[2]))); break;
      case "url": nodes.push(link(match[0], match[0])); break;
      case "link": {
        const url = safeURL(match[2]);
        nodes.push(url && /^(https?:|mailto:)/i.test(match[2]) ? link(match[1], url) : document.createTextNode(match[0]));
        break;
      }
    }
    rest = rest.slice(match.index + match[0].length);
  }
  return nodes;
}

function link(label, url) {
  return h("a", { href: url, rel: "noopener noreferrer nofollow", target: "_blank" }, label);
}
