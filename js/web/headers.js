// Headers: a case-insensitive multimap with the fetch spec's validation, combining
// and iteration rules, plus a guard that makes some instances immutable.
"use strict";
(() => {
  const { ArrayFrom, ArrayIsArray, ArrayPrototypeFilter, ArrayPrototypeJoin, ArrayPrototypeMap, ArrayPrototypePush, ObjectKeys, SafeSet } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const states = new WeakMap(); // headers -> {list: [[lowerName, value]], guard}
  /** A value that needs neither trimming nor a closer look: no whitespace at either end,
   * no control character but tab, nothing past 0xff (every request's headers are). */
  const PLAIN_VALUE = /^(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?$/;
  /** The array iterator as the runtime loaded it: a pair that still iterates with it is
   * read by index, without the iterator protocol's objects (~2 us a header). */
  const ARRAY_ITERATOR = Array.prototype[Symbol.iterator];

  function normalizeValue(value) {
    // Strip leading and trailing HTTP whitespace (tab, space, CR, LF).
    return String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
  }

  function checkName(name) {
    const n = String(name);
    if (!TOKEN.test(n)) throw new TypeError(`Invalid header name: "${n}"`);
    return n.toLowerCase();
  }

  function checkValue(value) {
    if (typeof value === "string" && PLAIN_VALUE.test(value)) return value;
    const v = normalizeValue(value);
    if (/[\0\r\n]/.test(v) || /[^\x00-\xff]/.test(v)) throw new TypeError(`Invalid header value: "${v}"`);
    return v;
  }

  function state(self) {
    const s = states.get(self);
    if (!s) throw new TypeError("Illegal invocation");
    return s;
  }

  function checkMutable(s) {
    if (s.guard === "immutable") throw new TypeError("Can't modify immutable headers.");
  }

  function fill(headers, init) {
    if (init === undefined || init === null) return;
    if (typeof init !== "object" && typeof init !== "function") {
      throw new TypeError("Headers: init must be an object, an iterable of pairs or a Headers");
    }
    if (init instanceof Headers) {
      for (const [name, value] of state(init).list) headers.append(name, value);
      return;
    }
    if (typeof init[Symbol.iterator] === "function") {
      for (const pair of init) {
        if (ArrayIsArray(pair) && pair.length === 2 && pair[Symbol.iterator] === ARRAY_ITERATOR) {
          headers.append(pair[0], pair[1]);
          continue;
        }
        const items = pair && typeof pair !== "string" && typeof pair[Symbol.iterator] === "function"
          ? ArrayFrom(pair) : null;
        if (!items || items.length !== 2) {
          throw new TypeError("Headers: each header must be a [name, value] pair");
        }
        headers.append(items[0], items[1]);
      }
      return;
    }
    for (const key of ObjectKeys(init)) headers.append(key, init[key]);
  }

  class Headers {
    constructor(init = undefined) {
      states.set(this, { list: [], guard: "none" });
      fill(this, init);
    }

    append(name, value) {
      const s = state(this);
      const n = checkName(name);
      const v = checkValue(value);
      checkMutable(s);
      ArrayPrototypePush(s.list, [n, v]);
    }

    delete(name) {
      const s = state(this);
      const n = checkName(name);
      checkMutable(s);
      s.list = ArrayPrototypeFilter(s.list, ([k]) => k !== n);
    }

    get(name) {
      const n = checkName(name);
      const values = ArrayPrototypeMap(ArrayPrototypeFilter(state(this).list, ([k]) => k === n), ([, v]) => v);
      return values.length ? ArrayPrototypeJoin(values, ", ") : null;
    }

    getAll(name) {
      // Workers keeps getAll for Set-Cookie only.
      const n = checkName(name);
      if (n !== "set-cookie") throw new TypeError("getAll() can only be used with the header name \"Set-Cookie\".");
      return this.getSetCookie();
    }

    getSetCookie() {
      return ArrayPrototypeMap(ArrayPrototypeFilter(state(this).list, ([k]) => k === "set-cookie"), ([, v]) => v);
    }

    has(name) {
      const n = checkName(name);
      return state(this).list.some(([k]) => k === n);
    }

    set(name, value) {
      const s = state(this);
      const n = checkName(name);
      const v = checkValue(value);
      checkMutable(s);
      const index = s.list.findIndex(([k]) => k === n);
      if (index < 0) {
        ArrayPrototypePush(s.list, [n, v]);
      } else {
        s.list[index] = [n, v];
        s.list = ArrayPrototypeFilter(s.list, ([k], i) => k !== n || i === index);
      }
    }

    forEach(callback, thisArg = undefined) {
      if (typeof callback !== "function") throw new TypeError("Headers.forEach: callback is not a function");
      for (const [name, value] of this) callback.call(thisArg, value, name, this);
    }

    /** Sorted by name; values combined, except Set-Cookie which stays one per entry. */
    *entries() {
      const list = state(this).list;
      const names = [...new SafeSet(ArrayPrototypeMap(list, ([k]) => k))].sort();
      for (const name of names) {
        if (name === "set-cookie") {
          for (const [k, v] of list) if (k === name) yield [name, v];
        } else {
          yield [name, this.get(name)];
        }
      }
    }

    *keys() {
      for (const [name] of this.entries()) yield name;
    }

    *values() {
      for (const [, value] of this.entries()) yield value;
    }
  }
  Object.defineProperty(Headers.prototype, Symbol.iterator, {
    value: Headers.prototype.entries, writable: true, configurable: true, enumerable: false,
  });

  web.hideMethods(Headers);
  web.setToStringTag(Headers, "Headers");
  web.defineGlobal("Headers", Headers);

  web.headerList = (headers) => ArrayPrototypeMap(state(headers).list, ([k, v]) => [k, v]);
  web.setHeadersGuard = (headers, guard) => {
    state(headers).guard = guard;
  };
  web.headersFrom = (init, guard = "none") => {
    const headers = new Headers(init);
    state(headers).guard = guard;
    return headers;
  };
})();
