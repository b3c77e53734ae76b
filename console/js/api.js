// The API as the console speaks it: the tab's token on every request, JSON in
// and out, a bounded wait, and errors that keep the field the API named.

const TOKEN_KEY = "crawlfleet.token";
const TIMEOUT_MS = 20000;

/** The token of this tab (sessionStorage: gone when the tab closes). */
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** An error the API answered with: its status, code, message and field. */
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

function headers(extra = {}) {
  const all = { ...extra };
  const value = token.get();
  if (value) all.Authorization = `Bearer ${value}`;
  return all;
}

/**
 * Fetches `path` with the tab's token; throws ApiError on a non-2xx answer.
 * `body` is sent as JSON, or as it is (a text, a File) with `contentType`.
 */
export async function send(method, path, body, { timeoutMs = TIMEOUT_MS, contentType } = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(body === undefined ? {} : { "Content-Type": contentType ?? "application/json" }),
      body: body === undefined || contentType ? body : JSON.stringify(body),
      signal: controller.signal,
    });
  } catch (e) {
    const why = e.name === "AbortError" ? `no answer within ${timeoutMs / 1000} s` : "the API is unreachable";
    throw new ApiError(0, "unreachable", why, null);
  } finally {
    clearTimeout(timer);
  }
  if (response.status === 401) {
    window.dispatchEvent(new CustomEvent("crawlfleet:unauthorized"));
  }
  if (!response.ok) {
    let error = { code: "http_" + response.status, message: response.statusText };
    try {
      error = (await response.json()).error || error;
    } catch {
      // Not JSON (a proxy's page): the status says enough.
    }
    throw new ApiError(response.status, error.code, error.message, error.field);
  }
  return response;
}

export const get = async (path, options) => (await send("GET", path, undefined, options)).json();
export const post = async (path, body = {}, options) => {
  const response = await send("POST", path, body, options);
  return response.status === 204 ? null : response.json();
};
export const put = async (path, body) => (await send("PUT", path, body)).json();
export const del = async (path) => {
  await send("DELETE", path);
};

/** A binary answer (a screenshot, a kept page, an export) as a Blob. */
export const blob = async (path, options) => (await send("GET", path, undefined, options)).blob();

/** `path` with the non-empty entries of `params` as its query. */
export function withQuery(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}
