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
  delete(path, body) { return this.call("DELETE", path, body); }
  put(path, body) { return this.call("PUT", path, body); }

  /**
   * Uploads a File with progress (0…1) under one client id. When the connection breaks the
   * server keeps what arrived: up to three more times this asks how far it got and sends only
   * the rest (Content-Range), or finds the upload stored when only the answer was lost.
   */
  async upload(file, kind, onProgress, clientId = newID()) {
    for (let attempt = 0; ; attempt++) {
      try {
        let first = 0;
        if (attempt > 0) {
          const status = await this.uploadStatus(clientId);
          if (status?.state === "complete") return status.attachment;
          if (status?.totalBytes === file.size) first = status.receivedBytes;
        }
        return await this.sendUpload(file, kind, clientId, first, onProgress);
      } catch (error) {
        // Broken, or taken over by another request for it (a browser may send a failed POST
        // again on its own): ask how far the server got and go on from there.
        const worthResuming = error.code === "unreachable" || error.code === "upload_superseded" || error.status >= 500;
        if (!worthResuming || attempt >= 3) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
      }
    }
  }

  /** Where an upload stands on the server (partial or complete), or null when it has none. */
  async uploadStatus(clientId) {
    try {
      return await this.get(`/v1/uploads/${encodeURIComponent(clientId)}`);
    } catch (error) {
      if (error.code === "upload_not_found") return null;
      throw error;
    }
  }

  /** One request: the file from byte `first` on. */
  sendUpload(file, kind, clientId, first, onProgress) {
    const query = new URLSearchParams({ kind, clientId });
    if (file.name) query.set("name", file.name);
    const extra = { "Content-Type": file.type || "application/octet-stream" };
    if (first > 0) extra["Content-Range"] = `bytes ${first}-${file.size - 1}/${file.size}`;
    return new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open("POST", `/v1/media?${query}`);
      for (const [name, value] of Object.entries(this.headers(extra))) request.setRequestHeader(name, value);
      request.upload.onprogress = (event) => { if (event.lengthComputable && file.size > 0) onProgress?.((first + event.loaded) / file.size); };
      request.onload = () => {
        const answer = (() => { try { return JSON.parse(request.responseText); } catch { return null; } })();
        if (request.status >= 200 && request.status < 300) resolve(answer);
        else reject(new ApiError(request.status, answer?.error?.code ?? "upload_failed", answer?.error?.message ?? `HTTP ${request.status}`));
      };
      request.onerror = () => reject(new ApiError(0, "unreachable", "The upload was interrupted; try again."));
      request.send(first > 0 ? file.slice(first) : file);
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
