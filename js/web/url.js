// URL: the WHATWG basic URL parser (with state overrides for the setters) and the
// URL class. URLSearchParams lives in urlsearchparams.js and links back through
// the `query` hooks defined here.
"use strict";
(() => {
  const { ArrayFrom, ArrayPrototypeJoin, ArrayPrototypeMap, ArrayPrototypePush, ObjectAssign } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const { FAILURE, sets, encodeCodePoint, encodeString, parseHost } = web.url;

  const SPECIAL = { ftp: 21, file: null, http: 80, https: 443, ws: 80, wss: 443 };
  const isSpecialScheme = (scheme) => Object.prototype.hasOwnProperty.call(SPECIAL, scheme);
  const defaultPort = (scheme) => (isSpecialScheme(scheme) ? SPECIAL[scheme] : null);

  // Parser states.
  const SCHEME_START = 1, SCHEME = 2, NO_SCHEME = 3, SPECIAL_RELATIVE_OR_AUTHORITY = 4,
    PATH_OR_AUTHORITY = 5, RELATIVE = 6, RELATIVE_SLASH = 7, SPECIAL_AUTHORITY_SLASHES = 8,
    SPECIAL_AUTHORITY_IGNORE_SLASHES = 9, AUTHORITY = 10, HOST = 11, HOSTNAME = 12, PORT = 13,
    FILE = 14, FILE_SLASH = 15, FILE_HOST = 16, PATH_START = 17, PATH = 18, OPAQUE_PATH = 19,
    QUERY = 20, FRAGMENT = 21;

  function newRecord() {
    return {
      scheme: "", username: "", password: "", host: null, port: null, path: [], query: null, fragment: null,
    };
  }

  const isAlpha = (c) => c !== undefined && /^[A-Za-z]$/.test(c);
  const isDigit = (c) => c !== undefined && c >= "0" && c <= "9";
  const hasOpaquePath = (url) => typeof url.path === "string";
  const includesCredentials = (url) => url.username !== "" || url.password !== "";
  const isWindowsDriveLetter = (s) => s.length === 2 && isAlpha(s[0]) && (s[1] === ":" || s[1] === "|");
  const isNormalizedDriveLetter = (s) => s.length === 2 && isAlpha(s[0]) && s[1] === ":";
  const isSingleDot = (s) => s === "." || s.toLowerCase() === "%2e";
  const isDoubleDot = (s) => [".." , ".%2e", "%2e.", "%2e%2e"].includes(s.toLowerCase());

  function startsWithDriveLetter(cps, p) {
    if (cps.length - p < 2) return false;
    if (!isWindowsDriveLetter(cps[p] + cps[p + 1])) return false;
    if (cps.length - p === 2) return true;
    return ["/", "\\", "?", "#"].includes(cps[p + 2]);
  }

  function shortenPath(url) {
    const path = url.path;
    if (url.scheme === "file" && path.length === 1 && isNormalizedDriveLetter(path[0])) return;
    path.pop();
  }

  /** The basic URL parser. Returns the record, or FAILURE. */
  function basicParse(rawInput, base, url, stateOverride) {
    let input = rawInput;
    if (!url) {
      url = newRecord();
      input = input.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "");
    }
    input = input.replace(/[\t\n\r]/g, "");
    const cps = ArrayFrom(input);
    let state = stateOverride || SCHEME_START;
    let buffer = "";
    let atSignSeen = false;
    let insideBrackets = false;
    let passwordTokenSeen = false;
    const special = () => isSpecialScheme(url.scheme);

    for (let p = 0; p <= cps.length; p++) {
      const c = cps[p]; // undefined is the end of input
      switch (state) {
        case SCHEME_START:
          if (isAlpha(c)) {
            buffer += c.toLowerCase();
            state = SCHEME;
          } else if (!stateOverride) {
            state = NO_SCHEME;
            p--;
          } else {
            return FAILURE;
          }
          break;
        case SCHEME:
          if (c !== undefined && /^[A-Za-z0-9+\-.]$/.test(c)) {
            buffer += c.toLowerCase();
          } else if (c === ":") {
            if (stateOverride) {
              if (isSpecialScheme(url.scheme) !== isSpecialScheme(buffer)) return url;
              if ((includesCredentials(url) || url.port !== null) && buffer === "file") return url;
              if (url.scheme === "file" && url.host === "") return url;
            }
            url.scheme = buffer;
            if (stateOverride) {
              if (url.port === defaultPort(url.scheme)) url.port = null;
              return url;
            }
            buffer = "";
            if (url.scheme === "file") {
              state = FILE;
            } else if (special() && base && base.scheme === url.scheme) {
              state = SPECIAL_RELATIVE_OR_AUTHORITY;
            } else if (special()) {
              state = SPECIAL_AUTHORITY_SLASHES;
            } else if (cps[p + 1] === "/") {
              state = PATH_OR_AUTHORITY;
              p++;
            } else {
              url.path = "";
              state = OPAQUE_PATH;
            }
          } else if (!stateOverride) {
            buffer = "";
            state = NO_SCHEME;
            p = -1;
          } else {
            return FAILURE;
          }
          break;
        case NO_SCHEME:
          if (!base || (hasOpaquePath(base) && c !== "#")) return FAILURE;
          if (hasOpaquePath(base) && c === "#") {
            url.scheme = base.scheme;
            url.path = base.path;
            url.query = base.query;
            url.fragment = "";
            state = FRAGMENT;
          } else if (base.scheme !== "file") {
            state = RELATIVE;
            p--;
          } else {
            state = FILE;
            p--;
          }
          break;
        case SPECIAL_RELATIVE_OR_AUTHORITY:
          if (c === "/" && cps[p + 1] === "/") {
            state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
            p++;
          } else {
            state = RELATIVE;
            p--;
          }
          break;
        case PATH_OR_AUTHORITY:
          if (c === "/") {
            state = AUTHORITY;
          } else {
            state = PATH;
            p--;
          }
          break;
        case RELATIVE:
          url.scheme = base.scheme;
          if (c === "/" || (special() && c === "\\")) {
            state = RELATIVE_SLASH;
          } else {
            url.username = base.username;
            url.password = base.password;
            url.host = base.host;
            url.port = base.port;
            url.path = base.path.slice();
            url.query = base.query;
            if (c === "?") {
              url.query = "";
              state = QUERY;
            } else if (c === "#") {
              url.fragment = "";
              state = FRAGMENT;
            } else if (c !== undefined) {
              url.query = null;
              shortenPath(url);
              state = PATH;
              p--;
            }
          }
          break;
        case RELATIVE_SLASH:
          if (special() && (c === "/" || c === "\\")) {
            state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
          } else if (c === "/") {
            state = AUTHORITY;
          } else {
            url.username = base.username;
            url.password = base.password;
            url.host = base.host;
            url.port = base.port;
            state = PATH;
            p--;
          }
          break;
        case SPECIAL_AUTHORITY_SLASHES:
          state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
          if (c === "/" && cps[p + 1] === "/") p++;
          else p--;
          break;
        case SPECIAL_AUTHORITY_IGNORE_SLASHES:
          if (c !== "/" && c !== "\\") {
            state = AUTHORITY;
            p--;
          }
          break;
        case AUTHORITY:
          if (c === "@") {
            if (atSignSeen) buffer = "%40" + buffer;
            atSignSeen = true;
            for (const ch of buffer) {
              if (ch === ":" && !passwordTokenSeen) {
                passwordTokenSeen = true;
                continue;
              }
              const encoded = encodeCodePoint(ch, sets.userinfoSet);
              if (passwordTokenSeen) url.password += encoded;
              else url.username += encoded;
            }
            buffer = "";
          } else if (c === undefined || c === "/" || c === "?" || c === "#" || (special() && c === "\\")) {
            if (atSignSeen && buffer === "") return FAILURE;
            p -= ArrayFrom(buffer).length + 1;
            buffer = "";
            state = HOST;
          } else {
            buffer += c;
          }
          break;
        case HOST:
        case HOSTNAME:
          if (stateOverride && url.scheme === "file") {
            p--;
            state = FILE_HOST;
          } else if (c === ":" && !insideBrackets) {
            if (buffer === "") return FAILURE;
            if (stateOverride === HOSTNAME) return FAILURE;
            const host = parseHost(buffer, !special());
            if (host === FAILURE) return FAILURE;
            url.host = host;
            buffer = "";
            state = PORT;
          } else if (c === undefined || c === "/" || c === "?" || c === "#" || (special() && c === "\\")) {
            p--;
            if (special() && buffer === "") return FAILURE;
            if (stateOverride && buffer === "" && (includesCredentials(url) || url.port !== null)) return FAILURE;
            const host = parseHost(buffer, !special());
            if (host === FAILURE) return FAILURE;
            url.host = host;
            buffer = "";
            state = PATH_START;
            if (stateOverride) return url;
          } else {
            if (c === "[") insideBrackets = true;
            if (c === "]") insideBrackets = false;
            buffer += c;
          }
          break;
        case PORT:
          if (isDigit(c)) {
            buffer += c;
          } else if (c === undefined || c === "/" || c === "?" || c === "#" || (special() && c === "\\")
            || stateOverride) {
            if (buffer !== "") {
              const port = parseInt(buffer, 10);
              if (port > 65535) return FAILURE;
              url.port = port === defaultPort(url.scheme) ? null : port;
              buffer = "";
            }
            if (stateOverride) return url;
            state = PATH_START;
            p--;
          } else {
            return FAILURE;
          }
          break;
        case FILE:
          url.scheme = "file";
          url.host = "";
          if (c === "/" || c === "\\") {
            state = FILE_SLASH;
          } else if (base && base.scheme === "file") {
            url.host = base.host;
            url.path = base.path.slice();
            url.query = base.query;
            if (c === "?") {
              url.query = "";
              state = QUERY;
            } else if (c === "#") {
              url.fragment = "";
              state = FRAGMENT;
            } else if (c !== undefined) {
              url.query = null;
              if (!startsWithDriveLetter(cps, p)) shortenPath(url);
              else url.path = [];
              state = PATH;
              p--;
            }
          } else {
            state = PATH;
            p--;
          }
          break;
        case FILE_SLASH:
          if (c === "/" || c === "\\") {
            state = FILE_HOST;
          } else {
            if (base && base.scheme === "file") {
              url.host = base.host;
              if (!startsWithDriveLetter(cps, p) && base.path.length > 0 && isNormalizedDriveLetter(base.path[0])) {
                ArrayPrototypePush(url.path, base.path[0]);
              }
            }
            state = PATH;
            p--;
          }
          break;
        case FILE_HOST:
          if (c === undefined || c === "/" || c === "\\" || c === "?" || c === "#") {
            p--;
            if (!stateOverride && isWindowsDriveLetter(buffer)) {
              state = PATH; // the buffer is kept: it is the first path segment
            } else if (buffer === "") {
              url.host = "";
              if (stateOverride) return url;
              state = PATH_START;
            } else {
              let host = parseHost(buffer, !special());
              if (host === FAILURE) return FAILURE;
              if (host === "localhost") host = "";
              url.host = host;
              if (stateOverride) return url;
              buffer = "";
              state = PATH_START;
            }
          } else {
            buffer += c;
          }
          break;
        case PATH_START:
          if (special()) {
            state = PATH;
            if (c !== "/" && c !== "\\") p--;
          } else if (!stateOverride && c === "?") {
            url.query = "";
            state = QUERY;
          } else if (!stateOverride && c === "#") {
            url.fragment = "";
            state = FRAGMENT;
          } else if (c !== undefined) {
            state = PATH;
            if (c !== "/") p--;
          } else if (stateOverride && url.host === null) {
            ArrayPrototypePush(url.path, "");
          }
          break;
        case PATH: {
          const slash = c === "/" || (special() && c === "\\");
          if (c === undefined || slash || (!stateOverride && (c === "?" || c === "#"))) {
            if (isDoubleDot(buffer)) {
              shortenPath(url);
              if (!slash) ArrayPrototypePush(url.path, "");
            } else if (isSingleDot(buffer) && !slash) {
              ArrayPrototypePush(url.path, "");
            } else if (!isSingleDot(buffer)) {
              if (url.scheme === "file" && url.path.length === 0 && isWindowsDriveLetter(buffer)) {
                buffer = buffer[0] + ":";
              }
              ArrayPrototypePush(url.path, buffer);
            }
            buffer = "";
            if (c === "?") {
              url.query = "";
              state = QUERY;
            } else if (c === "#") {
              url.fragment = "";
              state = FRAGMENT;
            }
          } else {
            buffer += encodeCodePoint(c, sets.pathSet);
          }
          break;
        }
        case OPAQUE_PATH:
          if (c === "?") {
            url.query = "";
            state = QUERY;
          } else if (c === "#") {
            url.fragment = "";
            state = FRAGMENT;
          } else if (c !== undefined) {
            url.path += encodeCodePoint(c, sets.c0Set);
          }
          break;
        case QUERY:
          if (c === undefined || (!stateOverride && c === "#")) {
            url.query += encodeString(buffer, special() ? sets.specialQuerySet : sets.querySet);
            buffer = "";
            if (c === "#") {
              url.fragment = "";
              state = FRAGMENT;
            }
          } else {
            buffer += c;
          }
          break;
        case FRAGMENT:
          if (c !== undefined) url.fragment += encodeCodePoint(c, sets.fragmentSet);
          break;
        default:
          throw new Error(`celld: URL parser reached unknown state ${state}`);
      }
    }
    return url;
  }

  function serializePath(url) {
    return hasOpaquePath(url) ? url.path : ArrayPrototypeJoin(ArrayPrototypeMap(url.path, (segment) => "/" + segment), "");
  }

  function serialize(url, excludeFragment = false) {
    let out = url.scheme + ":";
    if (url.host !== null) {
      out += "//";
      if (includesCredentials(url)) {
        out += url.username;
        if (url.password !== "") out += ":" + url.password;
        out += "@";
      }
      out += url.host;
      if (url.port !== null) out += ":" + url.port;
    } else if (!hasOpaquePath(url) && url.path.length > 1 && url.path[0] === "") {
      out += "/.";
    }
    out += serializePath(url);
    if (url.query !== null) out += "?" + url.query;
    if (!excludeFragment && url.fragment !== null) out += "#" + url.fragment;
    return out;
  }

  function origin(url) {
    switch (url.scheme) {
      case "blob": {
        const inner = basicParse(serializePath(url));
        if (inner !== FAILURE && (inner.scheme === "http" || inner.scheme === "https")) return origin(inner);
        return "null";
      }
      case "ftp":
      case "http":
      case "https":
      case "ws":
      case "wss":
        return `${url.scheme}://${url.host}${url.port !== null ? ":" + url.port : ""}`;
      default:
        return "null";
    }
  }

  const records = new WeakMap(); // URL -> {url: record, params: URLSearchParams}

  // The last absolute URL parsed, kept as a private copy: a Worker's request URL is parsed
  // when the Request is made and again by the handler's `new URL(request.url)`, and the
  // parser costs ~130 us a URL here. Records are mutable (the setters), hence the copies.
  let lastInput = null;
  let lastRecord = null;
  const copyRecord = (r) => ObjectAssign({}, r, { path: typeof r.path === "string" ? r.path : r.path.slice() });

  function parseOrThrow(input, base) {
    let baseRecord = null;
    if (base !== undefined) {
      baseRecord = basicParse(String(base));
      if (baseRecord === FAILURE) throw new TypeError(`Invalid base URL: ${String(base)}`);
    }
    const text = String(input);
    if (baseRecord === null && text === lastInput) return copyRecord(lastRecord);
    const record = basicParse(text, baseRecord);
    if (record === FAILURE) throw new TypeError(`Invalid URL: ${text}`);
    if (baseRecord === null) {
      lastInput = text;
      lastRecord = copyRecord(record);
    }
    return record;
  }

  function state(self) {
    const s = records.get(self);
    if (!s) throw new TypeError("Illegal invocation");
    return s;
  }

  const cannotHaveCredentialsOrPort = (url) => url.host === null || url.host === "" || url.scheme === "file";

  class URL {
    constructor(url, base = undefined) {
      if (arguments.length === 0) throw new TypeError("URL: 1 argument required, but only 0 present");
      const record = parseOrThrow(url, base);
      const s = { url: record, params: null };
      records.set(this, s);
      s.params = web.newLinkedSearchParams(s);
    }

    static canParse(url, base = undefined) {
      try {
        parseOrThrow(url, base);
        return true;
      } catch {
        return false;
      }
    }

    static parse(url, base = undefined) {
      try {
        return new URL(url, base);
      } catch {
        return null;
      }
    }

    get href() {
      return serialize(state(this).url);
    }

    set href(value) {
      const s = state(this);
      const record = basicParse(String(value));
      if (record === FAILURE) throw new TypeError(`Invalid URL: ${String(value)}`);
      s.url = record;
      web.resetSearchParams(s.params, record.query);
    }

    get origin() {
      return origin(state(this).url);
    }

    get protocol() {
      return state(this).url.scheme + ":";
    }

    set protocol(value) {
      const s = state(this);
      basicParse(String(value) + ":", null, s.url, SCHEME_START);
    }

    get username() {
      return state(this).url.username;
    }

    set username(value) {
      const url = state(this).url;
      if (cannotHaveCredentialsOrPort(url)) return;
      url.username = encodeString(String(value), sets.userinfoSet);
    }

    get password() {
      return state(this).url.password;
    }

    set password(value) {
      const url = state(this).url;
      if (cannotHaveCredentialsOrPort(url)) return;
      url.password = encodeString(String(value), sets.userinfoSet);
    }

    get host() {
      const url = state(this).url;
      if (url.host === null) return "";
      return url.port === null ? url.host : `${url.host}:${url.port}`;
    }

    set host(value) {
      const url = state(this).url;
      if (hasOpaquePath(url)) return;
      updateWith(url, String(value), HOST);
    }

    get hostname() {
      const url = state(this).url;
      return url.host === null ? "" : url.host;
    }

    set hostname(value) {
      const url = state(this).url;
      if (hasOpaquePath(url)) return;
      updateWith(url, String(value), HOSTNAME);
    }

    get port() {
      const url = state(this).url;
      return url.port === null ? "" : String(url.port);
    }

    set port(value) {
      const url = state(this).url;
      if (cannotHaveCredentialsOrPort(url)) return;
      const text = String(value);
      if (text === "") url.port = null;
      else updateWith(url, text, PORT);
    }

    get pathname() {
      return serializePath(state(this).url);
    }

    set pathname(value) {
      const url = state(this).url;
      if (hasOpaquePath(url)) return;
      const saved = url.path;
      url.path = [];
      if (basicParse(String(value), null, url, PATH_START) === FAILURE) url.path = saved;
    }

    get search() {
      const url = state(this).url;
      return url.query === null || url.query === "" ? "" : "?" + url.query;
    }

    set search(value) {
      const s = state(this);
      const url = s.url;
      let text = String(value);
      if (text === "") {
        url.query = null;
        web.resetSearchParams(s.params, null);
        return;
      }
      if (text.startsWith("?")) text = text.slice(1);
      url.query = "";
      basicParse(text, null, url, QUERY);
      web.resetSearchParams(s.params, url.query);
    }

    get searchParams() {
      return state(this).params;
    }

    get hash() {
      const url = state(this).url;
      return url.fragment === null || url.fragment === "" ? "" : "#" + url.fragment;
    }

    set hash(value) {
      const url = state(this).url;
      let text = String(value);
      if (text === "") {
        url.fragment = null;
        return;
      }
      if (text.startsWith("#")) text = text.slice(1);
      url.fragment = "";
      basicParse(text, null, url, FRAGMENT);
    }

    toString() {
      return serialize(state(this).url);
    }

    toJSON() {
      return serialize(state(this).url);
    }
  }

  /** Run a state-override parse on a copy, keeping the original on failure. */
  function updateWith(url, value, stateOverride) {
    const copy = ObjectAssign({}, url, { path: hasOpaquePath(url) ? url.path : url.path.slice() });
    if (basicParse(value, null, copy, stateOverride) !== FAILURE) ObjectAssign(url, copy);
  }

  for (const name of ["createObjectURL", "revokeObjectURL"]) {
    Object.defineProperty(URL, name, {
      value: () => {
        throw new TypeError(`celld does not provide URL.${name} (there is no Blob storage)`);
      },
      writable: true,
      configurable: true,
    });
  }

  web.hideMethods(URL);
  web.setToStringTag(URL, "URL");
  web.defineGlobal("URL", URL);
  ObjectAssign(web.url, { basicParse, serialize, origin, isSpecialScheme });
})();
