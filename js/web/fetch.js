// fetch(): a `fetch` host request served by httpx in celld/isolate/webops.py.
//
// The request body is read in JS and sent as base64; the host answers with
// {status, statusText, headers, url, redirected, body}. An abort rejects at once
// with the signal's reason; the host may still finish and its answer is ignored.
"use strict";
(() => {
  const { PromisePrototypeThen } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;

  function abortable(promise, signal) {
    if (!signal) return promise;
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener("abort", onAbort, { once: true });
      PromisePrototypeThen(promise, 
        (value) => {
          signal.removeEventListener("abort", onAbort);
          resolve(value);
        },
        (error) => {
          signal.removeEventListener("abort", onAbort);
          reject(error);
        },
      );
    });
  }

  async function fetch(input, init = undefined) {
    const request = new Request(input, init);
    const signal = request.signal;
    if (signal.aborted) throw signal.reason;
    const url = new URL(request.url);
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`Fetch API cannot load: ${request.url} (celld fetches http: and https: URLs only)`);
    }
    const hasBody = request.body !== null;
    const bytes = hasBody ? await web.consumeBody(request) : null;
    const answer = await abortable(host.request("fetch", {
      method: request.method,
      url: request.url,
      headers: web.headerList(request.headers),
      body: bytes === null ? null : web.bytesToBase64(bytes),
      redirect: request.redirect,
    }), signal);
    return web.makeResponse({
      status: answer.status,
      statusText: answer.statusText,
      headers: answer.headers,
      bytes: request.method === "HEAD" ? null : web.base64ToBytes(answer.body),
      url: answer.url,
      redirected: answer.redirected,
      guard: "immutable",
    });
  }

  web.defineGlobal("fetch", fetch);
})();
