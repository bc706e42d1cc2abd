// The built-ins celld's own JavaScript uses, captured before any user code runs.
//
// User code may replace or patch JSON, Array.prototype.push, Map.prototype.set,
// Promise.prototype.then and the like; the runtime must keep working and keep
// recording exactly what user code produced. So the runtime files take what they
// need from `__celld_primordials` (a frozen, hidden global) instead of looking the
// built-ins up when they run. Methods are "uncurried": `ArrayPrototypePush(list, x)`
// calls the original push on `list`.
//
// `__celld_intrinsics_changed()` lists the built-ins user code changed since, so an
// owner can refuse to hand a patched isolate to someone else.
"use strict";
(() => {
  const call = Function.prototype.call;
  const bind = Function.prototype.bind;
  /** `fn` as a plain function whose first argument is its `this`. */
  const uncurryThis = bind.bind(call);

  const ObjectDefineProperty = Object.defineProperty;
  const ObjectFreeze = Object.freeze;
  const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const ReflectOwnKeys = Reflect.ownKeys;
  const ReflectApply = Reflect.apply;
  const ObjectIs = Object.is;

  const p = Object.create(null);

  /** Safe collections: the methods are the original ones, copied onto the class itself,
   * so patching Map.prototype does not reach them. */
  function makeSafe(Base, Safe) {
    for (const key of ReflectOwnKeys(Base.prototype)) {
      if (key === "constructor") continue;
      const desc = ObjectGetOwnPropertyDescriptor(Base.prototype, key);
      ObjectDefineProperty(Safe.prototype, key, desc);
    }
    ObjectFreeze(Safe.prototype);
    return ObjectFreeze(Safe);
  }

  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const ObjectPrototype = Object.prototype;
  const ArrayPrototype = Array.prototype;
  const ObjectPrototypeHasOwnProperty = uncurryThis(Object.prototype.hasOwnProperty);
  const ObjectKeys = Object.keys;
  const ArrayIsArray = Array.isArray;
  const SafeMap = makeSafe(Map, class SafeMap extends Map {});
  const SafeWeakMap = makeSafe(WeakMap, class SafeWeakMap extends WeakMap {});

  /** Prototypes whose `toJSON` JSON.stringify would look up for the values it meets. */
  const TOJSON_HOLDERS = [
    ObjectPrototype, ArrayPrototype, String.prototype, Number.prototype, Boolean.prototype,
    BigInt.prototype, Symbol.prototype,
  ];

  function toJSONPatched() {
    for (let i = 0; i < TOJSON_HOLDERS.length; i++) {
      if (ObjectPrototypeHasOwnProperty(TOJSON_HOLDERS[i], "toJSON")) return true;
    }
    return false;
  }

  /** Deepest nesting a bridge message or serialized value may have (the host's JSON
   * reader stops at 1024). */
  const MAX_DEPTH = 1000;

  function tooDeep() {
    return new RangeError(
      `celld: the value is nested more than ${MAX_DEPTH} levels deep and cannot be sent`,
    );
  }

  /** Nesting depth of a JSON-ready tree (no cycles: JSON.stringify already refused those),
   * or MAX_DEPTH + 1 as soon as it is known to be deeper. */
  function depthOf(value, level) {
    if (value === null || typeof value !== "object") return level - 1;
    if (level > MAX_DEPTH) return level;
    let deepest = level;
    if (ArrayIsArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item = value[i];
        if (item !== null && typeof item === "object") {
          const d = depthOf(item, level + 1);
          if (d > deepest) deepest = d;
          if (deepest > MAX_DEPTH) return deepest;
        }
      }
      return deepest;
    }
    const keys = ObjectKeys(value);
    for (let i = 0; i < keys.length; i++) {
      const item = value[keys[i]];
      if (item !== null && typeof item === "object") {
        const d = depthOf(item, level + 1);
        if (d > deepest) deepest = d;
        if (deepest > MAX_DEPTH) return deepest;
      }
    }
    return deepest;
  }

  /**
   * JSON text of a tree of plain objects, arrays and primitives, immune to patched
   * `toJSON` methods and limited in depth. Throws TypeError for cycles, RangeError
   * for depth.
   */
  function stringify(value) {
    let text;
    if (!toJSONPatched()) {
      text = JSONStringify(value);
    } else {
      // Someone defined toJSON on a built-in prototype. The replacer sees the value
      // after toJSON ran, but its holder still has the original: put that back.
      text = JSONStringify(value, function replacer(key) {
        return this[key];
      });
    }
    // Each level of nesting takes an opening and a closing bracket: a text no longer than
    // 2 * MAX_DEPTH cannot hold more levels than that, so only longer ones are walked.
    if (text !== undefined && text.length > 2 * MAX_DEPTH && depthOf(value, 1) > MAX_DEPTH) {
      throw tooDeep();
    }
    return text;
  }

  /** Brand checks: true only for real instances (not for objects that merely inherit
   * from the prototype), by calling a method that throws on anything else. */
  function brand(method) {
    const check = uncurryThis(method);
    return (value) => {
      if (value === null || typeof value !== "object") return false;
      try {
        check(value);
        return true;
      } catch (error) {
        return false;
      }
    };
  }
  const getter = (proto, name) => ObjectGetOwnPropertyDescriptor(proto, name).get;

  Object.assign(p, {
    uncurryThis,
    isDate: brand(Date.prototype.getTime),
    isRegExp: brand(getter(RegExp.prototype, "source")),
    isMap: brand(getter(Map.prototype, "size")),
    isSet: brand(getter(Set.prototype, "size")),
    isArrayBuffer: brand(getter(ArrayBuffer.prototype, "byteLength")),
    isBooleanObject: brand(Boolean.prototype.valueOf),
    isNumberObject: brand(Number.prototype.valueOf),
    isStringObject: brand(String.prototype.valueOf),
    isBigIntObject: brand(BigInt.prototype.valueOf),
    ReflectApply,
    ReflectOwnKeys,
    JSONParse,
    JSONStringify,
    stringify,
    MAX_DEPTH,
    ObjectAssign: Object.assign,
    ObjectCreate: Object.create,
    ObjectDefineProperty,
    ObjectFreeze,
    ObjectKeys,
    ObjectGetPrototypeOf: Object.getPrototypeOf,
    ObjectGetOwnPropertyDescriptor,
    ObjectIs,
    ObjectPrototypeHasOwnProperty,
    ObjectPrototypeToString: uncurryThis(Object.prototype.toString),
    ArrayIsArray,
    ArrayPrototypePush: uncurryThis(Array.prototype.push),
    ArrayPrototypePop: uncurryThis(Array.prototype.pop),
    ArrayPrototypeJoin: uncurryThis(Array.prototype.join),
    ArrayPrototypeSlice: uncurryThis(Array.prototype.slice),
    ArrayPrototypeMap: uncurryThis(Array.prototype.map),
    ArrayPrototypeFilter: uncurryThis(Array.prototype.filter),
    ArrayFrom: (items, mapFn) => ReflectApply(Array.from, Array, mapFn === undefined ? [items] : [items, mapFn]),
    ArrayBufferIsView: ArrayBuffer.isView,
    FunctionPrototypeToString: uncurryThis(Function.prototype.toString),
    StringPrototypeSlice: uncurryThis(String.prototype.slice),
    StringPrototypeIndexOf: uncurryThis(String.prototype.indexOf),
    StringPrototypeSplit: uncurryThis(String.prototype.split),
    NumberIsNaN: Number.isNaN,
    NumberIsFinite: Number.isFinite,
    NumberPrototypeValueOf: uncurryThis(Number.prototype.valueOf),
    BooleanPrototypeValueOf: uncurryThis(Boolean.prototype.valueOf),
    StringPrototypeValueOf: uncurryThis(String.prototype.valueOf),
    BigIntPrototypeValueOf: uncurryThis(BigInt.prototype.valueOf),
    BigIntPrototypeToString: uncurryThis(BigInt.prototype.toString),
    SymbolPrototypeToString: uncurryThis(Symbol.prototype.toString),
    DatePrototypeGetTime: uncurryThis(Date.prototype.getTime),
    MapPrototypeForEach: uncurryThis(Map.prototype.forEach),
    SetPrototypeForEach: uncurryThis(Set.prototype.forEach),
    MapPrototypeSet: uncurryThis(Map.prototype.set),
    SetPrototypeAdd: uncurryThis(Set.prototype.add),
    PromisePrototypeThen: uncurryThis(Promise.prototype.then),
    PromiseResolve: (value) => ReflectApply(Promise.resolve, Promise, [value]),
    PromiseReject: (error) => ReflectApply(Promise.reject, Promise, [error]),
    SafeMap,
    SafeSet: makeSafe(Set, class SafeSet extends Set {}),
    SafeWeakMap,
    // Constructors, as they were before user code could replace the globals.
    Array, ArrayBuffer, BigInt, Boolean, DataView, Date, Error, EvalError, Map, Number, Object,
    Promise, RangeError, ReferenceError, RegExp, Set, String, Symbol, SyntaxError, TypeError,
    URIError, Uint8Array, WeakMap, WeakSet, WeakRef,
    AggregateError,
  });
  if (typeof SharedArrayBuffer === "function") p.SharedArrayBuffer = SharedArrayBuffer;
  // QuickJS's own base64 (bodies cross the bridge in base64 pieces: js/web/hoststreams.js).
  if (typeof Uint8Array.prototype.toBase64 === "function") {
    p.Uint8ArrayPrototypeToBase64 = uncurryThis(Uint8Array.prototype.toBase64);
  }
  if (typeof FinalizationRegistry === "function") p.FinalizationRegistry = FinalizationRegistry;

  // -- what user code changed ------------------------------------------------------

  const AUDITED = {
    JSON, Object, Array, Promise, Map, Set, WeakMap, Function, String, Number, Boolean,
    Symbol, Reflect, Error, Date, RegExp, BigInt, ArrayBuffer, Uint8Array, Math,
    "Object.prototype": Object.prototype,
    "Array.prototype": Array.prototype,
    "Promise.prototype": Promise.prototype,
    "Map.prototype": Map.prototype,
    "Set.prototype": Set.prototype,
    "Function.prototype": Function.prototype,
    "String.prototype": String.prototype,
    "Number.prototype": Number.prototype,
    "Error.prototype": Error.prototype,
    "Date.prototype": Date.prototype,
  };
  const GLOBALS = ["JSON", "Object", "Array", "Promise", "Map", "Set", "WeakMap", "Function",
    "String", "Number", "Boolean", "Symbol", "Reflect", "Error", "Date", "RegExp", "BigInt",
    "ArrayBuffer", "Uint8Array", "Math"];
  const baseline = new SafeMap();

  function fingerprint(target) {
    const keys = ReflectOwnKeys(target);
    const out = [];
    for (let i = 0; i < keys.length; i++) {
      const desc = ObjectGetOwnPropertyDescriptor(target, keys[i]);
      out[i] = [keys[i], desc.value, desc.get, desc.set, desc.writable, desc.configurable];
    }
    return out;
  }

  function sameFingerprint(a, b) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) {
      for (let j = 0; j < 6; j++) if (!ObjectIs(a[i][j], b[i][j])) return false;
    }
    return true;
  }

  const auditedNames = ReflectOwnKeys(AUDITED);
  const globalValues = [];
  let sealed = false;

  /** Take the reference state, once the runtime has set up (js/seal.js calls this,
   * before any user module runs). */
  function seal() {
    if (sealed) return;
    sealed = true;
    for (let i = 0; i < auditedNames.length; i++) {
      baseline.set(auditedNames[i], fingerprint(AUDITED[auditedNames[i]]));
    }
    for (let i = 0; i < GLOBALS.length; i++) globalValues[i] = globalThis[GLOBALS[i]];
    watchAll();
  }

  /** Names of the audited built-ins whose properties user code changed (or replaced). */
  function intrinsicsChanged() {
    const changed = [];
    if (!sealed) return JSONStringify(changed);
    for (let i = 0; i < auditedNames.length; i++) {
      const name = auditedNames[i];
      if (!sameFingerprint(baseline.get(name), fingerprint(AUDITED[name]))) changed[changed.length] = name;
    }
    for (let i = 0; i < GLOBALS.length; i++) {
      if (globalThis[GLOBALS[i]] !== globalValues[i]) changed[changed.length] = `globalThis.${GLOBALS[i]}`;
    }
    return JSONStringify(changed);
  }

  // A cheap check run after every turn: the built-ins user code patches in practice
  // (and that the runtime of a next run would trip over) are still the originals.
  const CANARIES = [];
  function watch(holder, keys) {
    for (let i = 0; i < keys.length; i++) {
      const desc = ObjectGetOwnPropertyDescriptor(holder, keys[i]);
      CANARIES[CANARIES.length] = [holder, keys[i], desc === undefined ? undefined : desc.value];
    }
  }
  const GLOBAL_NAMES = ["JSON", "Object", "Array", "Promise", "Map", "Set", "Reflect", "Symbol"];
  function watchAll() {
    watch(globalThis, GLOBAL_NAMES);
    watch(JSON, ["parse", "stringify"]);
    watch(Object, ["assign", "keys", "values", "entries", "fromEntries", "create", "freeze",
      "defineProperty", "defineProperties", "getPrototypeOf", "getOwnPropertyDescriptor"]);
    watch(Array, ["isArray", "from", "of"]);
    watch(Array.prototype, ["push", "pop", "shift", "map", "filter", "join", "slice", "splice",
      "forEach", "concat", "indexOf", "includes", "sort", "reduce", "some", "every", "find",
      Symbol.iterator]);
    watch(Map.prototype, ["get", "set", "has", "delete", "forEach", Symbol.iterator]);
    watch(Set.prototype, ["add", "has", "delete", "forEach", Symbol.iterator]);
    watch(Promise, ["resolve", "reject", "all", "race", "allSettled"]);
    watch(Promise.prototype, ["then", "catch", "finally"]);
    watch(Function.prototype, ["call", "apply", "bind"]);
    // Properties that must stay absent: toJSON reroutes JSON, `then` makes every object a
    // thenable.
    watch(Object.prototype, ["toJSON", "then"]);
    watch(Array.prototype, ["toJSON"]);
    watch(String.prototype, ["toJSON"]);
    watch(Number.prototype, ["toJSON"]);
  }

  /** The first watched built-in that changed (its key, as text), or null. */
  function canaryChanged() {
    for (let i = 0; i < CANARIES.length; i++) {
      const entry = CANARIES[i];
      const desc = ObjectGetOwnPropertyDescriptor(entry[0], entry[1]);
      if (desc === undefined ? entry[2] !== undefined : !ObjectIs(desc.value, entry[2]) || desc.get) {
        return String(entry[1]);
      }
    }
    return null;
  }
  p.canaryChanged = canaryChanged;

  const hidden = { configurable: false, enumerable: false, writable: false };
  ObjectDefineProperty(globalThis, "__celld_primordials", Object.assign({ value: ObjectFreeze(p) }, hidden));
  ObjectDefineProperty(globalThis, "__celld_intrinsics_changed",
    Object.assign({ value: intrinsicsChanged }, hidden));
  ObjectDefineProperty(globalThis, "__celld_intrinsics_seal", Object.assign({ value: seal }, hidden));
})();
