// fetch(): a `fetch` host request served by httpx in celld/isolate/webops.py.
//
// A small request body goes in the message as base64, a larger one or a stream streams
// through a pipe (js/web/hoststreams.js), and a body the host itself holds (an incoming
// request's) is handed back to it unread. The host answers at the response's head with
// {status, statusText, headers, url, redirected} and `body` (base64, small bodies) or
// `stream` (a host source the Worker reads as it goes). An abort rejects at once with the
// signal's reason; the host may still finish and its answer is ignored.
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
    const owner = host.owner();
    const upgrade = request.headers.get("upgrade");
    if (upgrade !== null && upgrade.toLowerCase() === "websocket") {
      // A WebSocket to an outside server: the response carries it (accept() it to use it).
      const answer = await abortable(web.connectSocket(request.url, web.headerList(request.headers)), signal);
      return web.makeResponse({
        status: 101,
        statusText: "Switching Protocols",
        headers: answer.headers,
        bytes: null,
        url: request.url,
        guard: "immutable",
        webSocket: web.adoptSocket(answer.ws),
      });
    }
    const body = web.bodyForHost(request);
    const fields = {
      method: request.method,
      url: request.url,
      headers: web.headerList(request.headers),
      body: null,
      redirect: request.redirect,
    };
    if (body !== null && body.b64 !== undefined) fields.body = body.b64;
    else if (body !== null) {
      fields.bodyStream = body.pipe !== undefined ? { pipe: body.pipe } : { source: body.source };
      if (body.length !== undefined && body.length !== null) fields.bodyStream.length = body.length;
    }
    const asked = host.request("fetch", fields);
    if (body !== null && body.pump !== undefined) {
      // (A body that fails fails the fetch: the host answers with its error.)
      PromisePrototypeThen(body.pump(owner), undefined, () => {});
    }
    const answer = await abortable(asked, signal);
    let stream = null;
    if (answer.stream) stream = web.fromHost(answer.stream.id, answer.stream.length, owner);
    return web.makeResponse({
      status: answer.status,
      statusText: answer.statusText,
      headers: answer.headers,
      bytes: request.method === "HEAD" || answer.body === null || answer.body === undefined
        ? null : web.base64ToBytes(answer.body),
      stream,
      url: answer.url,
      redirected: answer.redirected,
      guard: "immutable",
    });
  }

  web.defineGlobal("fetch", fetch);
})();
