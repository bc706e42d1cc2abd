// `env.ASSETS`: the static assets binding. fetch() resolves the request against the
// `assets` folder with the same rules the server applies (celld/bindings/assets.py).
"use strict";
(() => {
  const host = globalThis.__celld_host;
  const web = globalThis.__celld_web;

  class Fetcher {
    async fetch(input, init) {
      const request = input instanceof Request && init === undefined ? input : new Request(input, init);
      const answer = await host.request("assets", {
        method: request.method,
        url: request.url,
        headers: web.headerList(request.headers),
      });
      return web.makeResponse({
        status: answer.status,
        statusText: "",
        headers: answer.headers,
        bytes: web.base64ToBytes(answer.body),
      });
    }
  }

  globalThis.__celld_cloudflare.onEnv((message, env) => {
    if (message.assets) env[message.assets] = new Fetcher();
  });
})();
