// node:path (POSIX; workerd's node:path is POSIX too).
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;

  function check(value, name = "path") {
    if (typeof value !== "string") {
      throw new TypeError(`The "${name}" argument must be of type string. Received ${typeof value}`);
    }
  }

  function normalizeParts(parts, absolute) {
    const out = [];
    for (const part of parts) {
      if (part === "" || part === ".") continue;
      if (part === "..") {
        if (out.length > 0 && out[out.length - 1] !== "..") out.pop();
        else if (!absolute) out.push("..");
      } else {
        out.push(part);
      }
    }
    return out;
  }

  function normalize(path) {
    check(path);
    if (path === "") return ".";
    const absolute = path.startsWith("/");
    const trailing = path.endsWith("/");
    let result = normalizeParts(path.split("/"), absolute).join("/");
    if (result === "" && !absolute) result = ".";
    if (result !== "" && trailing) result += "/";
    return (absolute ? "/" : "") + result;
  }

  function join(...parts) {
    parts.forEach((p) => check(p));
    const joined = parts.filter((p) => p !== "").join("/");
    return joined === "" ? "." : normalize(joined);
  }

  function resolve(...parts) {
    let resolved = "";
    for (let i = parts.length - 1; i >= 0 && !resolved.startsWith("/"); i--) {
      check(parts[i]);
      if (parts[i] !== "") resolved = parts[i] + (resolved ? "/" + resolved : "");
    }
    if (!resolved.startsWith("/")) resolved = "/" + resolved;
    const out = "/" + normalizeParts(resolved.split("/"), true).join("/");
    return out;
  }

  function isAbsolute(path) {
    check(path);
    return path.startsWith("/");
  }

  function dirname(path) {
    check(path);
    if (path === "") return ".";
    const trimmed = path.length > 1 ? path.replace(/\/+$/, "") : path;
    const at = trimmed.lastIndexOf("/");
    if (at === -1) return ".";
    if (at === 0) return "/";
    return trimmed.slice(0, at);
  }

  function basename(path, ext) {
    check(path);
    const trimmed = path.length > 1 ? path.replace(/\/+$/, "") : path;
    let base = trimmed.slice(trimmed.lastIndexOf("/") + 1);
    if (ext !== undefined && base.endsWith(ext) && base !== ext) {
      base = base.slice(0, base.length - ext.length);
    }
    return base;
  }

  function extname(path) {
    const base = basename(path);
    const dot = base.lastIndexOf(".");
    return dot <= 0 ? "" : base.slice(dot);
  }

  function relative(from, to) {
    const a = resolve(from).split("/").filter(Boolean);
    const b = resolve(to).split("/").filter(Boolean);
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    return [...Array(a.length - i).fill(".."), ...b.slice(i)].join("/");
  }

  function parse(path) {
    check(path);
    const root = path.startsWith("/") ? "/" : "";
    const base = basename(path);
    const ext = extname(path);
    let dir = dirname(path);
    if (dir === "." && !path.includes("/")) dir = "";
    return { root, dir, base, ext, name: ext ? base.slice(0, -ext.length) : base };
  }

  function format(parts) {
    const dir = parts.dir || parts.root || "";
    const base = parts.base || (parts.name || "") + (parts.ext || "");
    if (!dir) return base;
    return dir === parts.root ? dir + base : dir + "/" + base;
  }

  const path = {
    sep: "/",
    delimiter: ":",
    normalize, join, resolve, isAbsolute, dirname, basename, extname, relative, parse, format,
    toNamespacedPath: (p) => p,
  };
  path.posix = path;
  path.win32 = new Proxy({}, {
    get() {
      throw new Error("path.win32 is not supported in a Worker (celld provides POSIX paths)");
    },
  });
  const ns = Object.freeze(Object.assign(Object.create(null), path, { default: path }));
  modules["node:path"] = ns;
  modules["node:path/posix"] = ns;
})();
