// node:util: promisify/callbackify, inspect/format (the console's formatter), types,
// inherits, deprecate, isDeepStrictEqual, TextEncoder/TextDecoder.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const web = globalThis.__celld_web;
  const custom = Symbol.for("nodejs.util.promisify.custom");

  function promisify(original) {
    if (typeof original !== "function") {
      throw new TypeError(`The "original" argument must be of type function`);
    }
    if (original[custom]) return original[custom];
    function promisified(...args) {
      return new Promise((resolve, reject) => {
        original.call(this, ...args, (error, ...values) => {
          if (error) reject(error);
          else resolve(values.length > 1 ? values : values[0]);
        });
      });
    }
    Object.setPrototypeOf(promisified, Object.getPrototypeOf(original));
    return Object.defineProperties(promisified, Object.getOwnPropertyDescriptors(original));
  }
  promisify.custom = custom;

  function callbackify(original) {
    return function (...args) {
      const callback = args.pop();
      original.apply(this, args).then(
        (value) => queueMicrotask(() => callback(null, value)),
        (error) => queueMicrotask(() => callback(error || new Error(String(error)))),
      );
    };
  }

  function inspect(value, options) {
    if (typeof options === "boolean") options = { showHidden: options };
    return web.inspect(value, options || {});
  }
  inspect.custom = Symbol.for("nodejs.util.inspect.custom");

  const format = (...args) => web.formatLogArgs(args);

  const tag = (value) => Object.prototype.toString.call(value).slice(8, -1);
  const types = {
    isDate: (v) => v instanceof Date,
    isRegExp: (v) => v instanceof RegExp,
    isPromise: (v) => v instanceof Promise,
    isMap: (v) => v instanceof Map,
    isSet: (v) => v instanceof Set,
    isWeakMap: (v) => v instanceof WeakMap,
    isWeakSet: (v) => v instanceof WeakSet,
    isArrayBuffer: (v) => v instanceof ArrayBuffer,
    isAnyArrayBuffer: (v) => v instanceof ArrayBuffer || tag(v) === "SharedArrayBuffer",
    isArrayBufferView: (v) => ArrayBuffer.isView(v),
    isDataView: (v) => v instanceof DataView,
    isTypedArray: (v) => ArrayBuffer.isView(v) && !(v instanceof DataView),
    isUint8Array: (v) => v instanceof Uint8Array,
    isNativeError: (v) => v instanceof Error,
    isAsyncFunction: (v) => tag(v) === "AsyncFunction" || tag(v) === "AsyncGeneratorFunction",
    isGeneratorFunction: (v) => tag(v) === "GeneratorFunction" || tag(v) === "AsyncGeneratorFunction",
    isGeneratorObject: (v) => tag(v) === "Generator",
    isBoxedPrimitive: (v) => v instanceof Number || v instanceof String || v instanceof Boolean,
    isSymbolObject: (v) => typeof v === "object" && tag(v) === "Symbol",
    isProxy: () => false,
  };

  function isDeepStrictEqual(a, b, seen = new Map()) {
    if (Object.is(a, b)) return true;
    if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
    if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
    if (seen.get(a) === b) return true;
    seen.set(a, b);
    if (a instanceof Date) return a.getTime() === b.getTime();
    if (a instanceof RegExp) return String(a) === String(b);
    if (ArrayBuffer.isView(a)) {
      if (a.byteLength !== b.byteLength) return false;
      const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
      const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      return x.every((byte, i) => byte === y[i]);
    }
    if (a instanceof Map) {
      if (a.size !== b.size) return false;
      for (const [k, v] of a) if (!b.has(k) || !isDeepStrictEqual(v, b.get(k), seen)) return false;
      return true;
    }
    if (a instanceof Set) {
      if (a.size !== b.size) return false;
      for (const v of a) if (!b.has(v)) return false;
      return true;
    }
    const keysA = Reflect.ownKeys(a).filter((k) => Object.prototype.propertyIsEnumerable.call(a, k));
    const keysB = Reflect.ownKeys(b).filter((k) => Object.prototype.propertyIsEnumerable.call(b, k));
    if (keysA.length !== keysB.length) return false;
    for (const key of keysA) {
      if (!Object.prototype.hasOwnProperty.call(b, key)) return false;
      if (!isDeepStrictEqual(a[key], b[key], seen)) return false;
    }
    return true;
  }

  function inherits(ctor, superCtor) {
    Object.defineProperty(ctor, "super_", { value: superCtor, writable: true, configurable: true });
    Object.setPrototypeOf(ctor.prototype, superCtor.prototype);
  }

  function deprecate(fn, message) {
    let warned = false;
    return function (...args) {
      if (!warned) {
        warned = true;
        console.warn(`DeprecationWarning: ${message}`);
      }
      return new.target ? Reflect.construct(fn, args, new.target) : fn.apply(this, args);
    };
  }

  const util = {
    promisify, callbackify, inspect, format, types, isDeepStrictEqual, inherits, deprecate,
    formatWithOptions: (options, ...args) => web.formatLogArgs(args),
    TextEncoder: globalThis.TextEncoder,
    TextDecoder: globalThis.TextDecoder,
    isArray: Array.isArray,
    debuglog: () => () => {},
    toUSVString: (s) => String(s).toWellFormed ? String(s).toWellFormed() : String(s),
    stripVTControlCharacters: (s) => String(s).replace(/\u001b\[[0-9;]*[A-Za-z]/g, ""),
  };
  globalThis.__celld_node.isDeepStrictEqual = isDeepStrictEqual;
  modules["node:util"] = Object.freeze(Object.assign(Object.create(null), util, { default: util }));
  modules["node:sys"] = modules["node:util"]; // Node's old name for util
  modules["node:util/types"] = Object.freeze(Object.assign(Object.create(null), types, {
    default: types,
  }));
})();
