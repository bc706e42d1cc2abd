// node:url: the WHATWG URL classes and Node's file-URL helpers.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;

  function fileURLToPath(value) {
    const url = typeof value === "string" ? new URL(value) : value;
    if (url.protocol !== "file:") throw new TypeError("The URL must be of scheme file");
    if (url.hostname !== "") throw new TypeError(`File URL host must be "localhost" or empty on linux`);
    if (/%2f/i.test(url.pathname)) throw new TypeError("File URL path must not include encoded / characters");
    return decodeURIComponent(url.pathname);
  }

  function pathToFileURL(path) {
    const absolute = String(path).startsWith("/") ? String(path) : "/" + String(path);
    const encoded = absolute.split("/").map((part) => encodeURIComponent(part)).join("/");
    return new URL("file://" + encoded);
  }

  function format(value) {
    if (value instanceof URL) return value.href;
    if (typeof value === "string") return value;
    const protocol = value.protocol ? (value.protocol.endsWith(":") ? value.protocol : value.protocol + ":") : "";
    const auth = value.auth ? value.auth + "@" : "";
    const host = value.host ?? ((value.hostname || "") + (value.port ? ":" + value.port : ""));
    const slashes = value.slashes || ["http:", "https:", "ftp:", "file:", "ws:", "wss:"].includes(protocol) ? "//" : "";
    let search = value.search || "";
    if (!search && value.query && typeof value.query === "object") {
      const query = new URLSearchParams(value.query).toString();
      search = query ? "?" + query : "";
    }
    return `${protocol}${slashes}${auth}${host}${value.pathname || ""}${search}${value.hash || ""}`;
  }

  const url = {
    URL: globalThis.URL,
    URLSearchParams: globalThis.URLSearchParams,
    fileURLToPath,
    pathToFileURL,
    format,
    domainToASCII: (domain) => new URL("http://" + domain).hostname,
    domainToUnicode: (domain) => String(domain),
    parse() {
      throw new Error("url.parse() is not supported by celld; use new URL()");
    },
  };
  modules["node:url"] = Object.freeze(Object.assign(Object.create(null), url, { default: url }));
})();
