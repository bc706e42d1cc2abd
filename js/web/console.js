// console: formats its arguments the way Node and workerd do (util.inspect style)
// and sends each line to the host as a `log` notification.
"use strict";
(() => {
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;

  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const LINE_WIDTH = 72;
  const MAX_ITEMS = 100;

  function quote(s) {
    const escaped = s.replace(/[\\'\n\r\t\b\f\v\0]/g, (c) => ({
      "\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t",
      "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "\\0",
    })[c]);
    return `'${escaped}'`;
  }

  function formatKey(key) {
    if (typeof key === "symbol") return `[${key.toString()}]`;
    return IDENT.test(key) ? key : quote(key);
  }

  function constructorName(value) {
    let proto = Object.getPrototypeOf(value);
    while (proto) {
      const desc = Object.getOwnPropertyDescriptor(proto, "constructor");
      if (desc && typeof desc.value === "function" && desc.value.name) return desc.value.name;
      proto = Object.getPrototypeOf(proto);
    }
    return null;
  }

  function formatError(error) {
    const name = error.name || "Error";
    const head = error.message ? `${name}: ${error.message}` : String(name);
    let stack = typeof error.stack === "string" ? error.stack : "";
    // QuickJS stacks hold only frames; V8's start with the header line.
    if (stack.startsWith(head)) stack = stack.slice(head.length);
    stack = stack.replace(/^\n+/, "").replace(/\s+$/, "");
    return stack ? `${head}\n${stack}` : head;
  }

  /** Join entries on one line if short enough, else one per line, indented. */
  function wrap(prefix, open, entries, close, indent) {
    if (entries.length === 0) return `${prefix}${open}${close}`;
    const oneLine = `${prefix}${open} ${entries.join(", ")} ${close}`;
    if (oneLine.length + indent.length <= LINE_WIDTH && !oneLine.includes("\n")) return oneLine;
    const inner = indent + "  ";
    return `${prefix}${open}\n${inner}${entries.join(`,\n${inner}`)}\n${indent}${close}`;
  }

  function inspect(value, options = {}) {
    const depthLimit = options.depth === undefined ? 2 : options.depth;
    const seen = [];

    function format(v, depth, indent, nested) {
      switch (typeof v) {
        case "string":
          return nested ? quote(v) : v;
        case "number":
          return Object.is(v, -0) ? "-0" : String(v);
        case "bigint":
          return `${v}n`;
        case "boolean":
        case "undefined":
          return String(v);
        case "symbol":
          return v.toString();
        case "function": {
          const source = Function.prototype.toString.call(v);
          const isClass = source.startsWith("class");
          const label = isClass ? `[class ${v.name || "(anonymous)"}]`
            : `[Function: ${v.name || "(anonymous)"}]`;
          return formatObject(v, depth, indent, label);
        }
        default:
          break;
      }
      if (v === null) return "null";
      return formatObject(v, depth, indent, null);
    }

    function formatObject(v, depth, indent, label) {
      if (seen.includes(v)) return "[Circular *1]";
      const keys = Object.keys(v);
      if (label !== null && keys.length === 0) return label;
      if (v instanceof Error) {
        const text = formatError(v);
        if (keys.length === 0 || depth > depthLimit) return text;
      }
      if (v instanceof Date) return Number.isNaN(v.getTime()) ? "Invalid Date" : v.toISOString();
      if (v instanceof RegExp) return String(v);
      if (v instanceof Promise) return "Promise { <unknown> }";
      if (v instanceof WeakMap) return "WeakMap { <items unknown> }";
      if (v instanceof WeakSet) return "WeakSet { <items unknown> }";
      if (typeof v.valueOf === "function" && (v instanceof Number || v instanceof String || v instanceof Boolean)) {
        const type = v instanceof Number ? "Number" : v instanceof String ? "String" : "Boolean";
        return `[${type}: ${format(v.valueOf(), depth, indent, true)}]`;
      }
      const name = constructorName(v);
      const isArray = Array.isArray(v);
      if (depth > depthLimit) {
        if (isArray) return "[Array]";
        return `[${name || "Object"}]`;
      }
      seen.push(v);
      try {
        const entries = [];
        const inner = indent + "  ";
        const item = (x) => format(x, depth + 1, inner, true);
        let prefix = "";
        let open = "{";
        let close = "}";
        let skipKeys = null;
        if (isArray) {
          open = "[";
          close = "]";
          prefix = name && name !== "Array" ? `${name}(${v.length}) ` : "";
          let holes = 0;
          const shown = Math.min(v.length, MAX_ITEMS);
          for (let i = 0; i < shown; i++) {
            if (!Object.prototype.hasOwnProperty.call(v, i)) {
              holes++;
              continue;
            }
            if (holes) entries.push(`<${holes} empty item${holes > 1 ? "s" : ""}>`);
            holes = 0;
            entries.push(item(v[i]));
          }
          if (holes) entries.push(`<${holes} empty item${holes > 1 ? "s" : ""}>`);
          if (v.length > MAX_ITEMS) entries.push(`... ${v.length - MAX_ITEMS} more items`);
          skipKeys = (k) => /^\d+$/.test(k);
        } else if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
          open = "[";
          close = "]";
          prefix = `${name}(${v.length}) `;
          const shown = Math.min(v.length, MAX_ITEMS);
          for (let i = 0; i < shown; i++) entries.push(item(v[i]));
          if (v.length > MAX_ITEMS) entries.push(`... ${v.length - MAX_ITEMS} more items`);
          skipKeys = (k) => /^\d+$/.test(k);
        } else if (v instanceof ArrayBuffer) {
          prefix = "ArrayBuffer ";
          const bytes = new Uint8Array(v, 0, Math.min(v.byteLength, 50));
          const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
          const more = v.byteLength > 50 ? ` ... ${v.byteLength - 50} more bytes` : "";
          entries.push(`[Uint8Contents]: <${hex}${more}>`, `byteLength: ${v.byteLength}`);
        } else if (v instanceof Map) {
          prefix = `${name || "Map"}(${v.size}) `;
          for (const [k, x] of v) entries.push(`${item(k)} => ${item(x)}`);
        } else if (v instanceof Set) {
          prefix = `${name || "Set"}(${v.size}) `;
          for (const x of v) entries.push(item(x));
        } else if (v instanceof Error) {
          prefix = `${formatError(v)} `;
        } else if (label !== null) {
          prefix = `${label} `;
        } else if (Object.getPrototypeOf(v) === null) {
          prefix = "[Object: null prototype] ";
        } else if (name && name !== "Object") {
          prefix = `${name} `;
        } else {
          const tag = v[Symbol.toStringTag];
          if (typeof tag === "string" && tag) prefix = `Object [${tag}] `;
        }
        for (const key of keys) {
          if (skipKeys && skipKeys(key)) continue;
          let text;
          const desc = Object.getOwnPropertyDescriptor(v, key);
          if (desc && (desc.get || desc.set)) {
            text = desc.get && desc.set ? "[Getter/Setter]" : desc.get ? "[Getter]" : "[Setter]";
          } else {
            text = item(v[key]);
          }
          entries.push(`${formatKey(key)}: ${text}`);
        }
        for (const sym of Object.getOwnPropertySymbols(v)) {
          if (Object.prototype.propertyIsEnumerable.call(v, sym)) {
            entries.push(`${formatKey(sym)}: ${item(v[sym])}`);
          }
        }
        if (v instanceof Error && entries.length === 0) return formatError(v);
        return wrap(prefix, open, entries, close, indent);
      } finally {
        seen.pop();
      }
    }

    return format(value, 0, "", false);
  }

  /** printf-style substitutions in a leading string, then the rest space-joined. */
  function formatArgs(args) {
    let first = 0;
    let out = "";
    if (typeof args[0] === "string") {
      first = 1;
      const fmt = args[0];
      let next = 1;
      let last = 0;
      for (let i = 0; i < fmt.length - 1; i++) {
        if (fmt[i] !== "%") continue;
        const spec = fmt[i + 1];
        let text;
        if (spec === "%") {
          text = "%";
        } else if (next >= args.length || !"sdifoOjc".includes(spec)) {
          continue;
        } else {
          const arg = args[next++];
          switch (spec) {
            case "s":
              text = typeof arg === "string" ? arg
                : typeof arg === "bigint" ? `${arg}n`
                  : typeof arg === "object" && arg !== null ? inspect(arg, { depth: 1 }) : String(arg);
              break;
            case "d":
            case "i":
              if (typeof arg === "bigint") text = `${arg}n`;
              else if (typeof arg === "symbol") text = "NaN";
              else {
                const n = Number(arg);
                text = String(spec === "i" ? Math.trunc(n) : n);
              }
              break;
            case "f":
              text = typeof arg === "symbol" ? "NaN" : String(parseFloat(arg));
              break;
            case "j":
              try {
                text = JSON.stringify(arg);
              } catch {
                text = "[Circular]";
              }
              break;
            case "c":
              text = "";
              break;
            default:
              text = inspect(arg, { depth: 4 });
          }
        }
        out += fmt.slice(last, i) + text;
        last = i + 2;
        i++;
      }
      out += fmt.slice(last);
      first = next;
    }
    for (let i = first; i < args.length; i++) {
      const piece = typeof args[i] === "string" ? args[i] : inspect(args[i]);
      out += (i === 0 ? "" : " ") + piece;
    }
    return out;
  }

  let groupIndent = "";
  function emit(level, text) {
    const indented = groupIndent ? text.split("\n").map((l) => groupIndent + l).join("\n") : text;
    host.notify("log", { level, text: indented });
  }

  const counts = new Map();
  const timers = new Map();

  const console = {
    log: (...args) => emit("log", formatArgs(args)),
    info: (...args) => emit("info", formatArgs(args)),
    warn: (...args) => emit("warn", formatArgs(args)),
    error: (...args) => emit("error", formatArgs(args)),
    debug: (...args) => emit("debug", formatArgs(args)),
    trace: (...args) => {
      const stack = (new Error().stack || "").split("\n").slice(1).join("\n").trimEnd();
      emit("log", `Trace${args.length ? ": " + formatArgs(args) : ""}${stack ? "\n" + stack : ""}`);
    },
    dir: (value, options) => emit("log", inspect(value, options || {})),
    dirxml: (...args) => emit("log", formatArgs(args)),
    table: (...args) => emit("log", formatArgs(args)),
    assert: (condition, ...args) => {
      if (!condition) emit("error", `Assertion failed${args.length ? ": " + formatArgs(args) : ""}`);
    },
    count: (label = "default") => {
      const n = (counts.get(label) || 0) + 1;
      counts.set(label, n);
      emit("info", `${label}: ${n}`);
    },
    countReset: (label = "default") => counts.delete(label),
    group: (...args) => {
      if (args.length) emit("log", formatArgs(args));
      groupIndent += "  ";
    },
    groupEnd: () => {
      groupIndent = groupIndent.slice(2);
    },
    time: (label = "default") => timers.set(label, performance.now()),
    timeLog: (label = "default", ...args) => {
      if (!timers.has(label)) return emit("warn", `No such label '${label}' for console.timeLog()`);
      const ms = (performance.now() - timers.get(label)).toFixed(3);
      emit("info", [`${label}: ${ms}ms`, ...args.map((a) => inspect(a))].join(" "));
    },
    timeEnd: (label = "default") => {
      if (!timers.has(label)) return emit("warn", `No such label '${label}' for console.timeEnd()`);
      const ms = (performance.now() - timers.get(label)).toFixed(3);
      timers.delete(label);
      emit("info", `${label}: ${ms}ms`);
    },
  };
  console.groupCollapsed = console.group;

  web.inspect = inspect;
  web.formatLogArgs = formatArgs;
  web.defineGlobal("console", console);
})();
