// node:assert and node:assert/strict.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const node = globalThis.__celld_node;
  const web = globalThis.__celld_web;

  class AssertionError extends Error {
    constructor(options = {}) {
      super(options.message ?? "Assertion failed");
      this.name = "AssertionError";
      this.code = "ERR_ASSERTION";
      this.actual = options.actual;
      this.expected = options.expected;
      this.operator = options.operator;
      this.generatedMessage = options.message === undefined;
    }
  }

  const show = (v) => web.inspect(v, { depth: 3 });

  function fail(message, actual, expected, operator, generated) {
    if (message instanceof Error) throw message;
    throw new AssertionError({
      message: message ?? generated, actual, expected, operator,
    });
  }

  function looseDeepEqual(a, b) {
    // eslint-disable-next-line eqeqeq
    if (a == b) return true;
    if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every((k) => looseDeepEqual(a[k], b[k]));
  }

  function matches(error, expected) {
    if (expected === undefined) return true;
    if (typeof expected === "function") {
      if (expected.prototype !== undefined && error instanceof expected) return true;
      if (Error.isPrototypeOf(expected) || expected === Error) return false;
      return expected(error) === true;
    }
    if (expected instanceof RegExp) return expected.test(String(error?.message ?? error));
    if (typeof expected === "object") {
      return Object.keys(expected).every((k) =>
        expected[k] instanceof RegExp ? expected[k].test(error[k]) : node.isDeepStrictEqual(error[k], expected[k]));
    }
    return false;
  }

  function make(strict) {
    const equalDeep = strict ? node.isDeepStrictEqual : looseDeepEqual;
    function assert(value, message) {
      if (!value) fail(message, value, true, "==", `The expression evaluated to a falsy value:\n\n  assert(${show(value)})\n`);
    }
    Object.assign(assert, {
      ok: assert,
      AssertionError,
      fail: (message = "Failed") => fail(message, undefined, undefined, "fail"),
      equal: strict
        ? (a, b, m) => Object.is(a, b) || fail(m, a, b, "strictEqual", `Expected values to be strictly equal:\n\n${show(a)} !== ${show(b)}\n`)
        // eslint-disable-next-line eqeqeq
        : (a, b, m) => a == b || fail(m, a, b, "==", `${show(a)} == ${show(b)}`),
      notEqual: strict
        ? (a, b, m) => !Object.is(a, b) || fail(m, a, b, "notStrictEqual", `Expected "actual" to be strictly unequal to: ${show(b)}`)
        // eslint-disable-next-line eqeqeq
        : (a, b, m) => a != b || fail(m, a, b, "!=", `${show(a)} != ${show(b)}`),
      strictEqual: (a, b, m) => Object.is(a, b) || fail(m, a, b, "strictEqual", `Expected values to be strictly equal:\n\n${show(a)} !== ${show(b)}\n`),
      notStrictEqual: (a, b, m) => !Object.is(a, b) || fail(m, a, b, "notStrictEqual", `Expected "actual" to be strictly unequal to: ${show(b)}`),
      deepEqual: (a, b, m) => equalDeep(a, b) || fail(m, a, b, strict ? "deepStrictEqual" : "deepEqual", `Expected values to be ${strict ? "strictly " : "loosely "}deep-equal:\n\n${show(a)}\n\nshould equal\n\n${show(b)}`),
      notDeepEqual: (a, b, m) => !equalDeep(a, b) || fail(m, a, b, "notDeepEqual", `Expected "actual" not to be deep-equal to: ${show(b)}`),
      deepStrictEqual: (a, b, m) => node.isDeepStrictEqual(a, b) || fail(m, a, b, "deepStrictEqual", `Expected values to be strictly deep-equal:\n\n${show(a)}\n\nshould equal\n\n${show(b)}`),
      notDeepStrictEqual: (a, b, m) => !node.isDeepStrictEqual(a, b) || fail(m, a, b, "notDeepStrictEqual", `Expected "actual" not to be strictly deep-equal to: ${show(b)}`),
      match: (s, re, m) => re.test(s) || fail(m, s, re, "match", `The input did not match the regular expression ${re}. Input:\n\n${show(s)}\n`),
      doesNotMatch: (s, re, m) => !re.test(s) || fail(m, s, re, "doesNotMatch", `The input was expected to not match the regular expression ${re}. Input:\n\n${show(s)}\n`),
      ifError: (value) => {
        if (value !== null && value !== undefined) throw value;
      },
      throws(fn, expected, message) {
        if (typeof expected === "string") { message = expected; expected = undefined; }
        try {
          fn();
        } catch (error) {
          if (!matches(error, expected)) throw error;
          return;
        }
        fail(message, undefined, expected, "throws", "Missing expected exception.");
      },
      doesNotThrow(fn, message) {
        try {
          fn();
        } catch (error) {
          fail(message, error, undefined, "doesNotThrow", `Got unwanted exception.\nActual message: "${error?.message}"`);
        }
      },
      async rejects(promiseOrFn, expected, message) {
        if (typeof expected === "string") { message = expected; expected = undefined; }
        try {
          await (typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn);
        } catch (error) {
          if (!matches(error, expected)) throw error;
          return;
        }
        fail(message, undefined, expected, "rejects", "Missing expected rejection.");
      },
      async doesNotReject(promiseOrFn, message) {
        try {
          await (typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn);
        } catch (error) {
          fail(message, error, undefined, "doesNotReject", `Got unwanted rejection.\nActual message: "${error?.message}"`);
        }
      },
    });
    return assert;
  }

  const loose = make(false);
  const strict = make(true);
  loose.strict = strict;
  strict.strict = strict;
  const ns = (fn) => Object.freeze(Object.assign(Object.create(null), fn, { default: fn }));
  modules["node:assert"] = ns(loose);
  modules["node:assert/strict"] = ns(strict);
})();
