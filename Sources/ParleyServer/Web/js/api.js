// The REST half: fetch with the app key and the bearer token in headers (never in URLs),
// typed errors, uploads with progress.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function newID() {
  return crypto.randomUUID ? crypto.randomUUID() : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

export class Api {
  constructor(appKey, token = null) {
    this.appKey = appKey;
    this.token = token;
    this.signed = new Map();
  }

  headers(extra = {}) {
    const headers = { "X-Parley-App-Key": this.appKey, ...extra };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return headers;
  }

  async call(method, path, body) {
    let response;
    try {
      response = await fetch(path, {
        method,
        headers: this.headers(body === undefined ? {} : { "Content-Type": "application/json" }),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch {
      throw new ApiError(0, "unreachable", "Cannot reach the server. Check the connection and try again.");
    }
    if (response.status === 204) return null;
    const answer = await response.json().catch(() => null);
    if (!response.ok) {
      throw new ApiError(response.status, answer?.error?.code ?? `http_${response.status}`, answer?.error?.message ?? `HTTP ${response.status}`);
    }
    return answer;
  }

  get(path) { return this.call("GET", path); }
  post(path, body = {}) { return this.call("POST", path, body); }
  patch(path, body) { return this.call("PATCH", path, body); }
  delete(path) { return this.call("DELETE", path); }

  /** Uploads a File with progress (0…1) and a client id, so a retry returns the first upload. */
  upload(file, kind, onProgress, clientId = newID()) {
    const query = new URLSearchParams({ kind, clientId });
    if (file.name) query.set("name", file.name);
    return new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open("POST", `/v1/media?${query}`);
      for (const [name, value] of Object.entries(this.headers({ "Content-Type": file.type || "application/octet-stream" }))) {
        request.setRequestHeader(name, value);
      }
      request.upload.onprogress = (event) => { if (event.lengthComputable) onProgress?.(event.loaded / event.total); };
      request.onload = () => {
        const answer = (() => { try { return JSON.parse(request.responseText); } catch { return null; } })();
        if (request.status >= 200 && request.status < 300) resolve(answer);
        else reject(new ApiError(request.status, answer?.error?.code ?? "upload_failed", answer?.error?.message ?? `HTTP ${request.status}`));
      };
      request.onerror = () => reject(new ApiError(0, "unreachable", "The upload was interrupted; try again."));
      request.send(file);
    });
  }

  /** A short-lived URL for an attachment, reused until a minute before it expires. */
  async mediaURL(id, variant = "original") {
    const key = `${id}/${variant}`;
    const cached = this.signed.get(key);
    if (cached && cached.expires - Date.now() > 60_000) return cached.url;
    const answer = await this.get(`/v1/media/${encodeURIComponent(id)}/url?variant=${variant}`);
    this.signed.set(key, { url: answer.url, expires: Date.parse(answer.expiresAt) });
    return answer.url;
  }
}
