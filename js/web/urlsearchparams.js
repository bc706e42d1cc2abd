// URLSearchParams (application/x-www-form-urlencoded lists), optionally linked to
// a URL whose query it rewrites on every change.
"use strict";
(() => {
  const { ArrayFrom, ArrayPrototypeFilter, ArrayPrototypeJoin, ArrayPrototypeMap, ArrayPrototypePush, ObjectKeys } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const { sets, encodeString, percentDecode } = web.url;
  const CREATE_LINKED = Symbol("linked");
  const states = new WeakMap(); // params -> {list: [[name, value]], owner: URL state | null}

  function parseForm(input) {
    const list = [];
    for (const piece of input.split("&")) {
      if (piece === "") continue;
      const eq = piece.indexOf("=");
      const name = eq >= 0 ? piece.slice(0, eq) : piece;
      const value = eq >= 0 ? piece.slice(eq + 1) : "";
      ArrayPrototypePush(list, [decodePart(name), decodePart(value)]);
    }
    return list;
  }

  function decodePart(s) {
    return web.utf8Decode(percentDecode(s.replace(/\+/g, " ")));
  }

  function serializeForm(list) {
    return ArrayPrototypeJoin(ArrayPrototypeMap(list, ([name, value]) => `${encodeString(name, sets.formSet, true)}=${encodeString(value, sets.formSet, true)}`), "&");
  }

  /** USVString conversion: lone surrogates become U+FFFD. */
  function usv(value) {
    const s = String(value);
    return /[\ud800-\udfff]/.test(s) ? web.utf8Decode(web.utf8Encode(s)) : s;
  }

  function state(self) {
    const s = states.get(self);
    if (!s) throw new TypeError("Illegal invocation");
    return s;
  }

  function update(s) {
    if (!s.owner) return;
    const text = serializeForm(s.list);
    s.owner.url.query = text === "" ? null : text;
  }

  class URLSearchParams {
    constructor(init = "", linked = undefined) {
      const s = { list: [], owner: null };
      states.set(this, s);
      if (init === CREATE_LINKED) {
        s.owner = linked;
        s.list = linked.url.query ? parseForm(linked.url.query) : [];
        return;
      }
      if (init instanceof URLSearchParams) {
        s.list = ArrayPrototypeMap(state(init).list, ([n, v]) => [n, v]);
      } else if (init !== null && (typeof init === "object" || typeof init === "function")) {
        if (typeof init[Symbol.iterator] === "function") {
          for (const pair of init) {
            const items = typeof pair === "string" || !pair || typeof pair[Symbol.iterator] !== "function"
              ? null : ArrayFrom(pair);
            if (!items || items.length !== 2) {
              throw new TypeError("URLSearchParams: each pair must be an iterable of exactly two items");
            }
            ArrayPrototypePush(s.list, [usv(items[0]), usv(items[1])]);
          }
        } else {
          for (const key of ObjectKeys(init)) ArrayPrototypePush(s.list, [usv(key), usv(init[key])]);
        }
      } else {
        let text = usv(init);
        if (text.startsWith("?")) text = text.slice(1);
        s.list = parseForm(text);
      }
    }

    get size() {
      return state(this).list.length;
    }

    append(name, value) {
      const s = state(this);
      ArrayPrototypePush(s.list, [usv(name), usv(value)]);
      update(s);
    }

    delete(name, value = undefined) {
      const s = state(this);
      const n = usv(name);
      const v = value === undefined ? undefined : usv(value);
      s.list = ArrayPrototypeFilter(s.list, ([k, x]) => !(k === n && (v === undefined || x === v)));
      update(s);
    }

    get(name) {
      const n = usv(name);
      const found = state(this).list.find(([k]) => k === n);
      return found ? found[1] : null;
    }

    getAll(name) {
      const n = usv(name);
      return ArrayPrototypeMap(ArrayPrototypeFilter(state(this).list, ([k]) => k === n), ([, v]) => v);
    }

    has(name, value = undefined) {
      const n = usv(name);
      const v = value === undefined ? undefined : usv(value);
      return state(this).list.some(([k, x]) => k === n && (v === undefined || x === v));
    }

    set(name, value) {
      const s = state(this);
      const n = usv(name);
      const v = usv(value);
      const index = s.list.findIndex(([k]) => k === n);
      if (index < 0) {
        ArrayPrototypePush(s.list, [n, v]);
      } else {
        s.list[index][1] = v;
        s.list = ArrayPrototypeFilter(s.list, ([k], i) => k !== n || i <= index);
      }
      update(s);
    }

    sort() {
      const s = state(this);
      // Array.prototype.sort is stable; compare by UTF-16 code units as the spec says.
      s.list.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      update(s);
    }

    forEach(callback, thisArg = undefined) {
      if (typeof callback !== "function") throw new TypeError("URLSearchParams.forEach: callback is not a function");
      const s = state(this);
      for (let i = 0; i < s.list.length; i++) callback.call(thisArg, s.list[i][1], s.list[i][0], this);
    }

    *entries() {
      const s = state(this);
      for (let i = 0; i < s.list.length; i++) yield [s.list[i][0], s.list[i][1]];
    }

    *keys() {
      for (const [k] of this.entries()) yield k;
    }

    *values() {
      for (const [, v] of this.entries()) yield v;
    }

    toString() {
      return serializeForm(state(this).list);
    }
  }
  Object.defineProperty(URLSearchParams.prototype, Symbol.iterator, {
    value: URLSearchParams.prototype.entries, writable: true, configurable: true, enumerable: false,
  });

  web.hideMethods(URLSearchParams);
  web.setToStringTag(URLSearchParams, "URLSearchParams");
  web.defineGlobal("URLSearchParams", URLSearchParams);

  web.newLinkedSearchParams = (owner) => new URLSearchParams(CREATE_LINKED, owner);
  web.resetSearchParams = (params, query) => {
    state(params).list = query ? parseForm(query) : [];
  };
  web.formEncode = serializeForm;
  web.formDecode = parseForm;
})();
