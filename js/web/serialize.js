// The value serializer shared by structuredClone and the Workflows engine.
//
// Encoding: tagged JSON. A plain JSON value (object, array, string, finite number
// other than -0, boolean, null) encodes as exactly its JSON text, so stored step
// results stay readable. Anything else becomes an object with a "$" key naming its
// type:
//   {"$":"undefined"} {"$":"NaN"} {"$":"Infinity"} {"$":"-Infinity"} {"$":"-0"}
//   {"$":"BigInt","v":"123"}          {"$":"Date","v":<ms>|null}  (null: invalid date)
//   {"$":"RegExp","source":s,"flags":f}
//   {"$":"Map","v":[[k,v],...]}       {"$":"Set","v":[v,...]}
//   {"$":"ArrayBuffer","v":b64}       {"$":"<TypedArray>|DataView","v":b64}  (own bytes only)
//   {"$":"ArrayBuffer"|"<TypedArray>"|"DataView","blob":[offset,length]}
//                                     the same, its bytes at [offset, offset+length) of the
//                                     value's byte area (below)
//   {"$":"Blobs","at":id,"v":<node>}  the root of a value whose binary data is in a byte
//                                     area that crossed the bridge as an ArrayBuffer beside
//                                     the message text (js/host.js, attachments): no base64
//   {"$":"Error","name":n,"message":m,"stack":s[,"cause":c][,"errors":[...]]}
//   {"$":"Boolean"|"Number"|"String"|"BigIntObject","v":...}  (wrapper objects)
//   {"$":"Object","v":[[k,v],...]}    a plain object that itself has a "$" key (escaped)
//   {"$":"Def","id":n,"v":<node>}     first sight of an object referenced more than once
//   {"$":"Ref","id":n}                a later reference to it (shared refs and cycles)
// A decoder therefore reads every object with an own "$" key as a tag, and any other
// object as a plain object. Array holes become undefined; objects with other
// prototypes are copied as their own enumerable string-keyed properties.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  // Captured built-ins (js/primordials.js): user code that patches Array.prototype.push,
  // Map.prototype.set or JSON must not change what gets recorded or cloned.
  const {
    ArrayIsArray, ArrayPrototypePush, ArrayPrototypePop, ArrayBufferIsView, BigIntPrototypeToString,
    BigIntPrototypeValueOf, BooleanPrototypeValueOf, DatePrototypeGetTime, FunctionPrototypeToString,
    JSONParse, JSONStringify, MapPrototypeForEach, MapPrototypeSet, NumberIsNaN, NumberPrototypeValueOf,
    ObjectDefineProperty, ObjectIs, ObjectKeys, ObjectPrototypeHasOwnProperty,
    ObjectPrototypeToString, SafeMap, SafeSet, SetPrototypeAdd, SetPrototypeForEach,
    StringPrototypeSlice, StringPrototypeValueOf, SymbolPrototypeToString, stringify,
    Array, ArrayBuffer, BigInt, Boolean, DataView, Date, Error, EvalError, Map, Number, Object,
    Promise, RangeError, ReferenceError, RegExp, Set, String, Symbol, SyntaxError, TypeError,
    URIError, Uint8Array, WeakMap, WeakSet, WeakRef, AggregateError, SharedArrayBuffer,
    FinalizationRegistry, isDate, isRegExp, isMap, isSet, isArrayBuffer, isBooleanObject,
    isNumberObject, isStringObject, isBigIntObject,
  } = globalThis.__celld_primordials;
  const hasOwn = ObjectPrototypeHasOwnProperty;
  const RegExpSource = __celld_primordials.uncurryThis(
    Object.getOwnPropertyDescriptor(RegExp.prototype, "source").get);
  const RegExpFlags = __celld_primordials.uncurryThis(
    Object.getOwnPropertyDescriptor(RegExp.prototype, "flags").get);
  const ArrayBufferSlice = __celld_primordials.uncurryThis(ArrayBuffer.prototype.slice);
  const TypedArraySet = __celld_primordials.uncurryThis(Object.getPrototypeOf(Uint8Array.prototype).set);
  const host = globalThis.__celld_host;

  const TYPED_ARRAYS = {
    __proto__: null,
    Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
    Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array, DataView,
  };
  if (typeof Float16Array === "function") TYPED_ARRAYS.Float16Array = Float16Array;

  const ERROR_TYPES = {
    __proto__: null,
    Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError, AggregateError,
  };

  function cloneError(message) {
    return new DOMException(message, "DataCloneError");
  }

  function typeOfView(value) {
    if (value instanceof DataView) return "DataView";
    // %TypedArray%.prototype[@@toStringTag] names the concrete type, even for subclasses.
    const tag = value[Symbol.toStringTag];
    if (!hasOwn(TYPED_ARRAYS, tag)) throw cloneError("unknown view type could not be cloned.");
    return tag;
  }

  function uncloneable(value) {
    return value instanceof Promise || value instanceof WeakMap || value instanceof WeakSet
      || value instanceof WeakRef || (FinalizationRegistry !== undefined && value instanceof FinalizationRegistry);
  }

  /** Objects reached more than once (shared or cyclic): only those get ids. */
  function findShared(root) {
    const seen = new SafeSet();
    const shared = new SafeSet();
    const stack = [root];
    const push = (x) => ArrayPrototypePush(stack, x);
    while (stack.length) {
      const v = ArrayPrototypePop(stack);
      if (v === null || typeof v !== "object") continue;
      if (seen.has(v)) {
        shared.add(v);
        continue;
      }
      seen.add(v);
      if (isMap(v)) {
        MapPrototypeForEach(v, (x, k) => {
          push(k);
          push(x);
        });
      } else if (isSet(v)) {
        SetPrototypeForEach(v, push);
      } else if (v instanceof Error) {
        if ("cause" in v) push(v.cause);
        if (ArrayIsArray(v.errors)) push(v.errors);
      } else if (!ArrayBufferIsView(v) && !isArrayBuffer(v) && !isDate(v) && !isRegExp(v)) {
        const keys = ObjectKeys(v);
        for (let i = 0; i < keys.length; i++) push(v[keys[i]]);
      }
    }
    return shared;
  }

  /** Value -> JSON-ready tree. With `parts` (an array), binary data is not written as
   * base64: each view's bytes are pushed to `parts` and the node names their place in
   * the value's byte area (their concatenation, in order). */
  function encode(root, parts = null) {
    let areaSize = 0;
    function binary(tag, bytes) {
      if (parts === null) return { $: tag, v: web.bytesToBase64(bytes) };
      const offset = areaSize;
      areaSize += bytes.byteLength;
      ArrayPrototypePush(parts, bytes);
      return { $: tag, blob: [offset, bytes.byteLength] };
    }
    const shared = findShared(root);
    const ids = new SafeMap();

    function node(v) {
      switch (typeof v) {
        case "string":
        case "boolean":
          return v;
        case "number":
          if (NumberIsNaN(v)) return { $: "NaN" };
          if (v === Infinity) return { $: "Infinity" };
          if (v === -Infinity) return { $: "-Infinity" };
          if (ObjectIs(v, -0)) return { $: "-0" };
          return v;
        case "undefined":
          return { $: "undefined" };
        case "bigint":
          return { $: "BigInt", v: BigIntPrototypeToString(v) };
        case "function":
          throw cloneError(`${StringPrototypeSlice(FunctionPrototypeToString(v), 0, 60)} could not be cloned.`);
        case "symbol":
          throw cloneError(`${SymbolPrototypeToString(v)} could not be cloned.`);
        default:
          break;
      }
      if (v === null) return null;
      if (ids.has(v)) return { $: "Ref", id: ids.get(v) };
      if (shared.has(v)) {
        const id = ids.size;
        ids.set(v, id);
        return { $: "Def", id, v: body(v) };
      }
      return body(v);
    }

    function body(v) {
      if (ArrayIsArray(v)) {
        const out = new Array(v.length);
        for (let i = 0; i < v.length; i++) out[i] = node(v[i]);
        return out;
      }
      if (isDate(v)) {
        const t = DatePrototypeGetTime(v);
        return { $: "Date", v: NumberIsNaN(t) ? null : t };
      }
      if (isRegExp(v)) return { $: "RegExp", source: RegExpSource(v), flags: RegExpFlags(v) };
      if (isMap(v)) {
        const entries = [];
        MapPrototypeForEach(v, (x, k) => {
          const key = node(k);
          ArrayPrototypePush(entries, [key, node(x)]);
        });
        return { $: "Map", v: entries };
      }
      if (isSet(v)) {
        const items = [];
        SetPrototypeForEach(v, (x) => ArrayPrototypePush(items, node(x)));
        return { $: "Set", v: items };
      }
      if (isArrayBuffer(v)) return binary("ArrayBuffer", new Uint8Array(v));
      if (SharedArrayBuffer !== undefined && v instanceof SharedArrayBuffer) throw cloneError("SharedArrayBuffer could not be cloned.");
      if (ArrayBufferIsView(v)) {
        return binary(typeOfView(v), new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
      }
      if (v instanceof Error) {
        const out = {
          $: "Error",
          name: String(v.name),
          message: String(v.message),
          stack: typeof v.stack === "string" ? v.stack : "",
        };
        if (typeof DOMException === "function" && v instanceof DOMException) out.dom = true;
        if (hasOwn(v, "cause")) out.cause = node(v.cause);
        if (ArrayIsArray(v.errors)) out.errors = node(v.errors);
        return out;
      }
      if (isBooleanObject(v)) return { $: "Boolean", v: BooleanPrototypeValueOf(v) };
      if (isNumberObject(v)) return { $: "Number", v: node(NumberPrototypeValueOf(v)) };
      if (isStringObject(v)) return { $: "String", v: StringPrototypeValueOf(v) };
      if (isBigIntObject(v)) {
        return { $: "BigIntObject", v: BigIntPrototypeToString(BigIntPrototypeValueOf(v)) };
      }
      if (uncloneable(v)) {
        const kind = StringPrototypeSlice(ObjectPrototypeToString(v), 8, -1);
        throw cloneError(`#<${kind}> could not be cloned.`);
      }
      const keys = ObjectKeys(v);
      if (hasOwn(v, "$")) {
        const entries = new Array(keys.length);
        for (let i = 0; i < keys.length; i++) entries[i] = [keys[i], node(v[keys[i]])];
        return { $: "Object", v: entries };
      }
      // A null prototype: setters user code put on Object.prototype never run here.
      const out = { __proto__: null };
      for (let i = 0; i < keys.length; i++) out[keys[i]] = node(v[keys[i]]);
      return out;
    }

    return node(root);
  }

  /** JSON tree -> value. Defs are registered before their contents (for cycles). */
  function decode(root) {
    // A primitive is itself: no table of shared references, no closures (a replay
    // decodes every recorded step's value).
    if (root === null || typeof root !== "object") return root;
    let refs = null; // made at the first Def: most values share nothing
    let area = null; // the byte area of a {"$":"Blobs"} value
    let areaUsed = false;
    if (hasOwn(root, "$") && root.$ === "Blobs") {
      area = host.takeAttachment(root.at);
      root = root.v;
    }

    /** The bytes a binary node names, as a new ArrayBuffer of their own. */
    function bytesOf(n) {
      if (!hasOwn(n, "blob")) return web.base64ToBytes(n.v).buffer;
    if (n.blob[1] === 0) return new ArrayBuffer(0);
      if (area === null) throw new TypeError("celld: malformed serialized value (binary data without its bytes)");
      const offset = n.blob[0];
      const length = n.blob[1];
      if (offset === 0 && length === area.byteLength && !areaUsed) {
        areaUsed = true; // the area is this buffer: no copy
        return area;
      }
      areaUsed = true;
      return ArrayBufferSlice(area, offset, offset + length);
    }

    function define(id, make, fill) {
      const value = make();
      if (id !== undefined) {
        if (refs === null) refs = new SafeMap();
        refs.set(id, value);
      }
      if (fill) fill(value);
      return value;
    }

    function node(n, id) {
      if (n === null || typeof n !== "object") {
        if (id !== undefined) throw new TypeError("celld: malformed serialized value (Def of a primitive)");
        return n;
      }
      if (ArrayIsArray(n)) {
        return define(id, () => new Array(n.length), (out) => {
          for (let i = 0; i < n.length; i++) out[i] = node(n[i]);
        });
      }
      if (!hasOwn(n, "$")) {
        return define(id, () => ({}), (out) => {
          const keys = ObjectKeys(n);
          for (let i = 0; i < keys.length; i++) {
            ObjectDefineProperty(out, keys[i], {
              value: node(n[keys[i]]), writable: true, enumerable: true, configurable: true,
            });
          }
        });
      }
      const tag = n.$;
      switch (tag) {
        case "undefined": return undefined;
        case "NaN": return NaN;
        case "Infinity": return Infinity;
        case "-Infinity": return -Infinity;
        case "-0": return -0;
        case "BigInt": return BigInt(n.v);
        case "Def": return node(n.v, n.id);
        case "Ref":
          if (refs === null || !refs.has(n.id)) throw new TypeError(`celld: malformed serialized value (unknown ref ${n.id})`);
          return refs.get(n.id);
        case "Date": return define(id, () => new Date(n.v === null ? NaN : n.v));
        case "RegExp": return define(id, () => new RegExp(n.source, n.flags));
        case "Map":
          return define(id, () => new Map(), (out) => {
            for (let i = 0; i < n.v.length; i++) {
              const key = node(n.v[i][0]);
              MapPrototypeSet(out, key, node(n.v[i][1]));
            }
          });
        case "Set":
          return define(id, () => new Set(), (out) => {
            for (let i = 0; i < n.v.length; i++) SetPrototypeAdd(out, node(n.v[i]));
          });
        case "Object":
          return define(id, () => ({}), (out) => {
            for (let i = 0; i < n.v.length; i++) {
              ObjectDefineProperty(out, n.v[i][0], {
                value: node(n.v[i][1]), writable: true, enumerable: true, configurable: true,
              });
            }
          });
        case "ArrayBuffer": return define(id, () => bytesOf(n));
        case "Error":
          return define(id, () => reviveError(n), (out) => {
            if ("cause" in n) {
              ObjectDefineProperty(out, "cause", { value: node(n.cause), writable: true, configurable: true });
            }
            if ("errors" in n) {
              ObjectDefineProperty(out, "errors", { value: node(n.errors), writable: true, configurable: true });
            }
          });
        case "Boolean": return define(id, () => Object(Boolean(n.v)));
        case "Number": return define(id, () => Object(node(n.v)));
        case "String": return define(id, () => Object(String(n.v)));
        case "BigIntObject": return define(id, () => Object(BigInt(n.v)));
        default:
          if (hasOwn(TYPED_ARRAYS, tag)) {
            const Type = TYPED_ARRAYS[tag];
            return define(id, () => {
              const buffer = bytesOf(n);
              return Type === DataView ? new DataView(buffer) : new Type(buffer);
            });
          }
          throw new TypeError(`celld: malformed serialized value (unknown tag ${String(tag)})`);
      }
    }

    return node(root);
  }

  function reviveError(n) {
    let error;
    if (n.dom) {
      error = new DOMException(n.message, n.name);
    } else {
      const Type = hasOwn(ERROR_TYPES, n.name) ? ERROR_TYPES[n.name] : Error;
      error = Type === AggregateError ? new AggregateError([], n.message) : new Type(n.message);
      if (error.name !== n.name) {
        ObjectDefineProperty(error, "name", { value: n.name, writable: true, configurable: true, enumerable: false });
      }
    }
    if (n.stack !== undefined) {
      ObjectDefineProperty(error, "stack", { value: n.stack, writable: true, configurable: true, enumerable: false });
    }
    return error;
  }

  /** Value -> JSON text. Throws DataCloneError for what cannot be cloned and
   * RangeError for values nested too deeply to store or send. */
  function serialize(value) {
    // A plain JSON primitive is its own JSON text (JSON.stringify looks up no toJSON for
    // primitives): no walk for shared references, no tree.
    switch (typeof value) {
      case "string":
        return JSONStringify(value);
      case "boolean":
        return value ? "true" : "false";
      case "number":
        if (value === value && value !== Infinity && value !== -Infinity && (value !== 0 || 1 / value > 0)) {
          return JSONStringify(value);
        }
        break;
      case "object":
        if (value === null) return "null";
        break;
    }
    if (!host.binaryBridge) return stringify(encode(value));
    const parts = [];
    const text = stringify(encode(value, parts));
    let total = 0;
    for (let i = 0; i < parts.length; i++) total += parts[i].byteLength;
    if (total === 0) return text; // (empty views only: their nodes need no area)
    return `{"$":"Blobs","at":${host.sendAttachment(area(parts))},"v":${text}}`;
  }

  /** One ArrayBuffer holding the bytes of `parts` (views) in order: the one copy a value's
   * binary data takes in JS (what the value's views show may change after it is sent). */
  function area(parts) {
    if (parts.length === 1) {
      const view = parts[0];
      return ArrayBufferSlice(view.buffer, view.byteOffset, view.byteOffset + view.byteLength);
    }
    let total = 0;
    for (let i = 0; i < parts.length; i++) total += parts[i].byteLength;
    const out = new Uint8Array(total);
    let offset = 0;
    for (let i = 0; i < parts.length; i++) {
      TypedArraySet(out, parts[i], offset);
      offset += parts[i].byteLength;
    }
    return out.buffer;
  }

  /** Serialized text (or a tree already parsed with its message) -> value. */
  function deserialize(text) {
    return decode(typeof text === "string" ? JSONParse(text) : text);
  }

  function structuredClone(value, options = undefined) {
    if (arguments.length === 0) throw new TypeError("structuredClone: 1 argument required, but only 0 present");
    if (options && options.transfer !== undefined && Array.from(options.transfer).length > 0) {
      throw cloneError("structuredClone: the transfer option is not supported by celld");
    }
    return decode(encode(value));
  }

  const hidden = { configurable: false, enumerable: false, writable: false };
  Object.defineProperty(globalThis, "__celld_serialize", Object.assign({ value: serialize }, hidden));
  Object.defineProperty(globalThis, "__celld_deserialize", Object.assign({ value: deserialize }, hidden));
  web.serialize = serialize;
  web.deserialize = deserialize;
  web.decode = decode; // for values that arrive already parsed (a replay journal)
  web.defineGlobal("structuredClone", structuredClone);
})();
